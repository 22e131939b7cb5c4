"""``curves.png``: training and evaluation return against frames, per group too."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from marl.atomic import atomic_path
from marl.extras import require

__all__ = ["plot_curves"]


def _returns(scalars: Mapping[str, list[tuple[int, float]]], scope: str) -> dict[str, list]:
    """``{label: points}`` for ``<scope>/episode_reward`` and ``<scope>/<group>/episode_reward``."""
    out = {}
    for key, points in sorted(scalars.items()):
        parts = key.split("/")
        if parts[0] != scope or parts[-1] != "episode_reward" or not points:
            continue
        out["all groups" if len(parts) == 2 else "/".join(parts[1:-1])] = points
    if len(out) == 2 and "all groups" in out:  # one group: its curve is the overall one
        out = {"all groups": out["all groups"]}
    return out


def plot_curves(
    scalars: Mapping[str, list[tuple[int, float]]],
    path: str | os.PathLike[str],
    title: str = "",
) -> Path:
    """Plot training (left) and evaluation (right) episode return against frames.

    Args:
        scalars: ``{key: [(frames, value), ...]}``, e.g. from
            :func:`marl.experiment.loggers.read_scalars`.
        path: the PNG to write.
        title: the figure title.

    Returns:
        ``path``.

    Raises:
        ImportError: naming ``pip install "marl[report]"`` when matplotlib is missing.

    Examples:
        >>> import tempfile
        >>> scalars = {"train/episode_reward": [(100, 0.0), (200, 1.0)],
        ...            "eval/episode_reward": [(200, 1.5)]}
        >>> plot_curves(scalars, Path(tempfile.mkdtemp()) / "curves.png").stat().st_size > 0
        True
    """
    matplotlib = require("matplotlib", "curves.png", "report")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import EngFormatter

    path = Path(path)
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6), sharey=True, constrained_layout=True)
    for ax, scope, name in zip(axes, ("train", "eval"), ("training", "evaluation")):
        series = _returns(scalars, scope)
        for label, points in series.items():
            xs, ys = zip(*sorted(points))
            overall = label == "all groups"
            ax.plot(
                xs,
                ys,
                label=label,
                linewidth=2.0 if overall else 1.2,
                linestyle="-" if overall else "--",
                marker="o" if scope == "eval" and len(xs) < 30 else None,
                markersize=3,
            )
        ax.set_title(f"{name} return")
        ax.set_xlabel("frames")
        ax.xaxis.set_major_formatter(EngFormatter(sep=""))
        ax.grid(alpha=0.3)
        if series:
            ax.legend(fontsize=8)
        else:
            ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes)
    axes[0].set_ylabel("episode return (mean over agents)")
    if title:
        fig.suptitle(title)
    with atomic_path(path, fsync=False) as tmp:  # savefig infers PNG from the suffix
        fig.savefig(tmp, dpi=100)
        plt.close(fig)
    return path
