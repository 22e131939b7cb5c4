"""``tune.png``: each member's score and searched values against frames."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["member_series", "plot_members"]


def member_series(history: Any, column: str) -> list[tuple[int, float]]:
    """``[(frames, value), ...]`` of one column of a member's reports (a pandas DataFrame
    or a list of dicts); rows without a number there are skipped.

    Examples:
        >>> member_series([{"frames": 10, "x": 1.0}, {"frames": 20}, {"frames": 30, "x": 2}], "x")
        [(10, 1.0), (30, 2.0)]
    """
    rows = history.to_dict("records") if hasattr(history, "to_dict") else list(history)
    out = []
    for row in rows:
        value = row.get(column)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value == value:
            out.append((int(row["frames"]), float(value)))
    return out


def plot_members(
    histories: Mapping[str, Any],
    keys: Sequence[str],
    metric: str,
    path: str | os.PathLike[str],
    lineage: Sequence[Mapping[str, Any]] = (),
) -> Path:
    """One panel for ``metric`` and one per searched key, a line per member; each
    exploit is a marker on the cut member's line (at the frames it happened).

    Args:
        histories: ``{member: reports}`` (Ray's ``metrics_dataframe``, or lists of dicts
            with ``frames``, ``metric`` and ``hp/<key>``).
        keys: the searched keys.
        metric: the score.
        path: the PNG to write.
        lineage: the exploits (``member``, ``frames``, ``donor``).

    Returns:
        ``path``.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    columns = [metric, *(f"hp/{k}" for k in keys)]
    fig, axes = plt.subplots(
        len(columns), 1, figsize=(7, 2.4 * len(columns)), sharex=True, squeeze=False
    )
    for ax, column in zip(axes[:, 0], columns):
        for member in sorted(histories):
            points = member_series(histories[member], column)
            if not points:
                continue
            (line,) = ax.plot(*zip(*points), marker=".", label=member)
            cuts = [e["frames"] for e in lineage if e["member"] == member]
            at = [(f, v) for f, v in points if f in cuts]
            if at:
                ax.plot(*zip(*at), "x", color=line.get_color(), markersize=9)
        ax.set_ylabel(column.removeprefix("hp/"), fontsize=8)
        values = [v for m in histories for _, v in member_series(histories[m], column)]
        if column != metric and values and min(values) > 0 and max(values) > 20 * min(values):
            ax.set_yscale("log")  # e.g. learning rates over decades
    axes[0, 0].set_title("members (x: copied a better member's checkpoint)", fontsize=9)
    axes[-1, 0].set_xlabel("frames")
    handles, _labels = axes[0, 0].get_legend_handles_labels()
    if handles:
        axes[0, 0].legend(fontsize=7, ncol=4)
    fig.tight_layout()
    out = Path(path)
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out
