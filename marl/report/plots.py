"""PNG figures of a report, drawn with matplotlib's Agg backend (imported lazily)."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import numpy as np

from marl.extras import require
from marl.report.baselines import POLICIES
from marl.report.report import Report, figure_role

__all__ = [
    "plot_aggregates",
    "plot_curves",
    "plot_improvement",
    "plot_profiles",
    "require_matplotlib",
    "write_figures",
]

_DPI = 100


def require_matplotlib() -> Any:
    """Import ``matplotlib.pyplot`` on the Agg backend.

    Raises:
        ImportError: naming the extra to install when matplotlib is missing.
    """
    matplotlib = require("matplotlib", "marl-report's figures", "report")
    if "matplotlib.pyplot" not in sys.modules:
        # Agg renders to files with no display; choose it before pyplot picks a GUI
        # backend. A session that already imported pyplot keeps its backend.
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _colors(names: list[str]) -> dict[str, Any]:
    require_matplotlib()
    import matplotlib

    # tab10 has 10 colours: more algorithms than that would share them
    cmap = matplotlib.colormaps["tab10" if len(names) <= 10 else "tab20"]
    return {n: cmap(i % cmap.N) for i, n in enumerate(names)}


def _save(fig: Any, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=_DPI)
    require_matplotlib().close(fig)
    return path


def safe_name(name: str) -> str:
    """A file-name-safe version of ``name``.

    Examples:
        >>> safe_name("vmas/navigation")
        'vmas_navigation'
    """
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("_") or "task"


def plot_curves(rep: Report, task: str, path: Path) -> Path:
    """Sample-efficiency curves of one task: mean over seeds with its CI band, per algorithm."""
    plt = require_matplotlib()
    colors = _colors(rep.algorithms)
    # the legend sits right of the axes: inside, a dozen entries would hide the curves
    fig, ax = plt.subplots(figsize=(7.5, 3.8))
    for algo, curve in rep.curves[task].items():
        c = colors[algo]
        n = int(curve.n.max())
        ax.plot(curve.step_counts, curve.mean, color=c, marker=".", label=f"{algo} (n={n})")
        ax.fill_between(curve.step_counts, curve.low, curve.high, color=c, alpha=0.2, linewidth=0)
    _baseline_lines(ax, rep, task)
    ax.set_title(f"{task}: {rep.config.metric}")
    ax.set_xlabel("frames")
    ax.xaxis.set_major_formatter(_frames_formatter())
    ax.set_ylabel(f"evaluation {rep.config.metric}")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    return _save(fig, path)


def _frames_formatter() -> Any:
    """Tick labels ``0, 50k, 1.2M``: full frame counts run into each other."""
    from matplotlib.ticker import FuncFormatter

    def short(x: float, _pos: Any) -> str:
        for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
            if abs(x) >= scale:
                return f"{x / scale:g}{suffix}"
        return f"{x:g}"

    return FuncFormatter(short)


_BASELINE_STYLE = {"random": "--", "noop": ":"}
_BASELINE_COLORS = ("black", "gray", "darkgoldenrod", "purple")


def _baseline_lines(ax: Any, rep: Report, task: str) -> None:
    """The random (dashed) and no-op (dotted) baselines as horizontal lines; where the
    task's algorithms were evaluated under settings that score differently, a colour
    per value, labelled with its algorithms (equal values share one line)."""
    for policy, style in _BASELINE_STYLE.items():
        values = rep.baseline_values(task, policy)
        for i, (mean, algos) in enumerate(values):
            label = POLICIES[policy]
            if len(values) > 1:
                label += f" ({', '.join(algos)})"
            color = _BASELINE_COLORS[i % len(_BASELINE_COLORS)]
            ax.axhline(mean, color=color, linestyle=style, linewidth=1.2, label=label)


def _group_algorithms(rep: Report, group: int) -> list[str]:
    """The algorithms of group ``group`` (all of them for a report without groups)."""
    if not rep.groups:
        return list(rep.aggregates)
    return list(rep.groups[group].algorithms)


def _group_tasks(rep: Report, group: int) -> str:
    if not rep.groups:
        return ""
    tasks = rep.groups[group].tasks
    shown = ", ".join(tasks) if len(tasks) <= 4 else f"{len(tasks)} tasks"
    return f" on {shown}"


def plot_aggregates(rep: Report, path: Path, group: int = 0) -> Path:
    """One panel per aggregate metric: each algorithm's CI as a bar, its point estimate as a tick.

    Only the algorithms of ``rep.groups[group]`` (those that ran the same tasks) are drawn.
    """
    plt = require_matplotlib()
    algos = _group_algorithms(rep, group)
    metrics = list(next(iter(rep.aggregates.values())))
    colors = _colors(rep.algorithms)
    fig, axes = plt.subplots(1, len(metrics), figsize=(2.6 * len(metrics), 0.5 * len(algos) + 1.6))
    for ax, metric in zip(np.atleast_1d(axes), metrics):
        for i, algo in enumerate(algos):
            ci = rep.aggregates[algo][metric]
            ax.barh(i, ci.high - ci.low, left=ci.low, height=0.6, color=colors[algo], alpha=0.6)
            ax.plot([ci.point, ci.point], [i - 0.3, i + 0.3], color="black", linewidth=1.5)
        ax.margins(x=0.15)  # room for CIs that touch the data range's edges
        ax.set_yticks(range(len(algos)), algos if metric == metrics[0] else [""] * len(algos))
        ax.set_title(metric)
        ax.set_xlabel("normalized score")
        ax.grid(axis="x", alpha=0.3)
    fig.suptitle(
        f"Aggregate {rep.config.metric}{_group_tasks(rep, group)} "
        f"({100 * rep.config.confidence:g}% CI)",
        fontsize=10,
    )
    return _save(fig, path)


def plot_profiles(rep: Report, path: Path, group: int = 0) -> Path:
    """Performance profiles with their bootstrap bands, of the algorithms of ``rep.groups[group]``."""
    plt = require_matplotlib()
    colors = _colors(rep.algorithms)
    fig, ax = plt.subplots(figsize=(5.5, 3.8))
    for algo in _group_algorithms(rep, group):
        prof = rep.profiles[algo]
        ax.plot(prof.taus, prof.point, color=colors[algo], label=algo)
        ax.fill_between(prof.taus, prof.low, prof.high, color=colors[algo], alpha=0.2, linewidth=0)
    ax.set_title(f"Performance profiles{_group_tasks(rep, group)}", fontsize=10)
    ax.set_xlabel(r"normalized score $\tau$")
    ax.set_ylabel(r"fraction of runs with score > $\tau$")
    ax.set_ylim(-0.02, 1.02)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    return _save(fig, path)


def _group_pairs(rep: Report, group: int) -> list[tuple[str, str]]:
    algos = set(_group_algorithms(rep, group))
    return [(x, y) for x, y in rep.improvement if x in algos and y in algos]


def plot_improvement(rep: Report, path: Path, group: int = 0) -> Path:
    """P(X > Y) per pair of algorithms of ``rep.groups[group]``: CI bar, point tick, and the
    0.5 line of no difference."""
    plt = require_matplotlib()
    pairs = _group_pairs(rep, group)
    fig, ax = plt.subplots(figsize=(5.5, 0.45 * len(pairs) + 1.4))
    for i, pair in enumerate(pairs):
        ci, _ = rep.improvement[pair]
        ax.barh(i, ci.high - ci.low, left=ci.low, height=0.6, color="tab:blue", alpha=0.5)
        # A marker too: a CI of zero width (one algorithm always wins) has no visible bar.
        ax.plot([ci.point], [i], marker="o", color="black", markersize=5)
    ax.set_yticks(range(len(pairs)), [f"P({x} > {y})" for x, y in pairs])
    ax.axvline(0.5, color="gray", linestyle="--", linewidth=1)
    ax.set_xlim(-0.03, 1.03)
    ax.invert_yaxis()
    ax.set_title(f"Probability of improvement{_group_tasks(rep, group)}", fontsize=10)
    ax.set_xlabel("probability")
    ax.grid(axis="x", alpha=0.3)
    return _save(fig, path)


def write_figures(rep: Report, out_dir: str | Path) -> dict[str, str]:
    """Draw every figure of the report into ``out_dir``.

    Args:
        rep: the computed report.
        out_dir: the report folder.

    Returns:
        figure role -> file name relative to ``out_dir`` (as
        :func:`marl.report.markdown.render_markdown` takes them).

    Raises:
        ImportError: when matplotlib is missing.
    """
    require_matplotlib()
    out_dir = Path(out_dir)
    figures = {}
    groups = range(len(rep.groups)) if rep.groups else range(1 if rep.aggregates else 0)
    for i in groups:
        # the first group's figures keep the plain names; group k >= 2 gets a "_k" suffix
        suffix = "" if i == 0 else f"_{i + 1}"
        if rep.aggregates:
            figures[figure_role("aggregate", i)] = plot_aggregates(
                rep, out_dir / f"aggregate{suffix}.png", i
            ).name
        if rep.profiles:
            figures[figure_role("profile", i)] = plot_profiles(
                rep, out_dir / f"performance_profile{suffix}.png", i
            ).name
        if _group_pairs(rep, i):
            figures[figure_role("improvement", i)] = plot_improvement(
                rep, out_dir / f"probability_of_improvement{suffix}.png", i
            ).name
    for task in rep.curves:
        name = f"curves_{safe_name(task)}.png"
        figures[f"curve:{task}"] = plot_curves(rep, task, out_dir / name).name
    return figures
