"""Draw the documentation figures into ``docs/figures/`` (PNG).

Run ``python docs/figures/make_figures.py`` after changing a figure; the PNGs
are committed. Needs matplotlib (``pip install "marl[report]"``).
"""

import itertools
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

HERE = Path(__file__).resolve().parent
BLUE, ORANGE, GREEN, GREY = "#4c72b0", "#dd8452", "#55a868", "#8c8c8c"


def box(ax, x, y, w, h, text, color, size=9, alpha=0.25, weight="normal"):
    ax.add_patch(
        FancyBboxPatch(
            (x, y),
            w,
            h,
            boxstyle="round,pad=0.02,rounding_size=0.08",
            fc=color,
            ec=color,
            alpha=alpha,
            lw=1.5,
        )
    )
    ax.add_patch(
        FancyBboxPatch(
            (x, y), w, h, boxstyle="round,pad=0.02,rounding_size=0.08", fc="none", ec=color, lw=1.5
        )
    )
    ax.text(x + w / 2, y + h / 2, text, ha="center", va="center", fontsize=size, weight=weight)


def arrow(ax, start, end, text="", color="black"):
    ax.add_patch(
        FancyArrowPatch(start, end, arrowstyle="-|>", mutation_scale=14, lw=1.5, color=color)
    )
    if text:
        mid = ((start[0] + end[0]) / 2, (start[1] + end[1]) / 2)
        ax.text(mid[0], mid[1] + 0.12, text, ha="center", va="bottom", fontsize=8, color=GREY)


def canvas(w, h):
    fig, ax = plt.subplots(figsize=(w, h))
    ax.set_xlim(0, w * 2)
    ax.set_ylim(0, h * 2)
    ax.axis("off")
    return fig, ax


def save(fig, name):
    fig.savefig(HERE / name, dpi=90, bbox_inches="tight")
    plt.close(fig)
    print(f"wrote {HERE / name} ({(HERE / name).stat().st_size // 1024} KB)")


def group_layout():
    """Agents -> groups -> nested TensorDict entries."""
    fig, ax = canvas(9, 4.2)
    ax.text(0.2, 8.0, "agents", fontsize=10, weight="bold")
    agents = [
        ("adversary_0", BLUE),
        ("adversary_1", BLUE),
        ("adversary_2", BLUE),
        ("agent_0", ORANGE),
    ]
    for i, (name, color) in enumerate(agents):
        box(
            ax,
            0.2,
            6.6 - i * 1.4,
            2.6,
            1.0,
            f"{name}\nobs [16]" if color == BLUE else f"{name}\nobs [14]",
            color,
            size=8,
        )
    ax.text(4.0, 8.0, "by_prefix groups", fontsize=10, weight="bold")
    box(ax, 4.0, 4.6, 3.4, 3.0, "group 'adversary'\n3 agents\nstacked on an\nagent dim", BLUE)
    box(ax, 4.0, 1.7, 3.4, 1.6, "group 'agent'\n1 agent", ORANGE)
    for i in range(3):
        arrow(ax, (2.9, 7.1 - i * 1.4), (3.95, 6.1), color=BLUE)
    arrow(ax, (2.9, 2.9), (3.95, 2.5), color=ORANGE)
    ax.text(8.4, 8.0, "TensorDict, batch [*B] ([*B, T] when collected)", fontsize=10, weight="bold")
    box(ax, 8.3, 0.3, 9.4, 7.4, "", GREY, alpha=0.08)
    box(ax, 8.6, 4.4, 8.8, 3.0, "", BLUE, alpha=0.12)
    ax.text(8.8, 7.0, '"adversary": TensorDict, batch [*B, 3]', fontsize=9)
    rows = [
        ('"observation"', "[*B, 3, 16]"),
        ('"action"', "[*B, 3]"),
        ('("next", ..., "reward")', "[*B, 3, 1]"),
    ]
    for i, (k, s) in enumerate(rows):
        ax.text(9.0, 6.3 - i * 0.6, k, fontsize=9, family="monospace")
        ax.text(14.6, 6.3 - i * 0.6, s, fontsize=9, family="monospace")
    box(ax, 8.6, 2.0, 8.8, 2.0, "", ORANGE, alpha=0.12)
    ax.text(8.8, 3.6, '"agent": TensorDict, batch [*B, 1]', fontsize=9)
    ax.text(9.0, 2.9, '"observation"', fontsize=9, family="monospace")
    ax.text(14.6, 2.9, "[*B, 1, 14]", fontsize=9, family="monospace")
    ax.text(9.0, 2.3, '"action"', fontsize=9, family="monospace")
    ax.text(14.6, 2.3, "[*B, 1]", fontsize=9, family="monospace")
    ax.text(8.8, 1.2, '("next", "done")  env-level', fontsize=9, family="monospace")
    ax.text(14.6, 1.2, "[*B, 1]", fontsize=9, family="monospace")
    ax.text(8.8, 0.6, '"state"  (optional, global)', fontsize=9, family="monospace")
    ax.text(14.6, 0.6, "[*B, S]", fontsize=9, family="monospace")
    arrow(ax, (7.5, 6.1), (8.55, 6.1), color=BLUE)
    arrow(ax, (7.5, 2.5), (8.55, 2.8), color=ORANGE)
    save(fig, "group_layout.png")


def segment_tree():
    """A binary sum tree over 8 priorities and one prefix-sum descent."""
    leaves = [3, 1, 0, 4, 2, 2, 5, 1]
    fig, ax = canvas(9, 4)
    levels = [leaves]
    while len(levels[-1]) > 1:
        prev = levels[-1]
        levels.append([prev[i] + prev[i + 1] for i in range(0, len(prev), 2)])
    # mass 9.5 in [0, 18): root 18 -> left 8 (9.5 >= 8, go right, 1.5) -> 4 (1.5 < 4, left)
    # -> 2 (1.5 < 2, left) -> leaf 4 (priority 2)
    path = {(3, 0), (2, 1), (1, 2), (0, 4)}
    w = 17.0
    for depth, values in enumerate(levels):
        n = len(values)
        y = 0.6 + depth * 1.8
        for i, v in enumerate(values):
            x = 0.5 + (i + 0.5) * w / n
            on = (depth, i) in path
            box(
                ax,
                x - 0.55,
                y,
                1.1,
                0.8,
                str(v),
                ORANGE if on else BLUE,
                size=10,
                alpha=0.45 if on else 0.2,
                weight="bold" if on else "normal",
            )
            if depth > 0:
                for c in (2 * i, 2 * i + 1):
                    cx = 0.5 + (c + 0.5) * w / (2 * n)
                    color = ORANGE if on and (depth - 1, c) in path else GREY
                    ax.plot([x, cx], [y, y - 1.0], color=color, lw=1.5 if color == ORANGE else 1)
        label = "leaves: priorities p_i^alpha" if depth == 0 else f"level {depth}: sums"
        ax.text(18.0, y + 0.4, label, fontsize=8, va="center", color=GREY)
    for i in range(8):
        ax.text(0.5 + (i + 0.5) * w / 8, 0.2, f"slot {i}", ha="center", fontsize=8, color=GREY)
    ax.text(
        0.3, 7.8, "sample: mass u = 9.5, uniform in [0, total = 18)", fontsize=10, weight="bold"
    )
    ax.text(
        0.3, 7.3, "at each node: u < left sum ? go left : (u -= left sum, go right)", fontsize=9
    )
    ax.text(
        0.3,
        6.85,
        "root 18: 9.5 >= 8, right (u = 1.5);  10: 1.5 < 4, left;  4: 1.5 < 2, left  ->  slot 4",
        fontsize=9,
        color=ORANGE,
    )
    ax.set_ylim(0, 8.2)
    save(fig, "segment_tree.png")


def data_flow():
    """env -> collector -> (processing) -> buffer -> loss -> optimizer -> policy."""
    fig, ax = canvas(9, 2.6)
    items = [
        (0.2, "env\n(EnvBase)\nreset / step", GREEN),
        (3.8, "Collector\npolicy + env\n[*B, T] batch", BLUE),
        (7.4, "process_batch\nGAE advantages\n(on-policy)", GREY),
        (11.0, "ReplayBuffer\nstorage, sampler,\nwriter", ORANGE),
        (14.6, "loss (per group)\nPPOLoss, SACLoss,\nDQNLoss, ...", BLUE),
    ]
    for x, text, color in items:
        box(ax, x, 1.8, 3.0, 1.7, text, color, size=8)
    for (x0, _, _), (x1, _, _) in itertools.pairwise(items):
        arrow(ax, (x0 + 3.05, 2.65), (x1 - 0.05, 2.65))
    ax.text(3.45, 3.7, "td", fontsize=8, color=GREY, ha="center")
    ax.text(7.05, 3.7, "batch", fontsize=8, color=GREY, ha="center")
    ax.text(10.65, 3.7, "extend", fontsize=8, color=GREY, ha="center")
    ax.text(14.25, 3.7, "sample", fontsize=8, color=GREY, ha="center")
    box(ax, 11.0, 0.1, 6.6, 1.0, "optimizer step\n(+ target and priority updates)", GREY, size=8)
    arrow(ax, (16.1, 1.75), (16.1, 1.15))
    arrow(ax, (10.95, 0.6), (5.3, 0.6), "update_policy_weights_()")
    arrow(ax, (5.3, 0.6), (5.3, 1.75))
    ax.text(
        0.2,
        4.6,
        "Trainer iteration: collect -> process -> update -> sync weights -> log / evaluate",
        fontsize=10,
        weight="bold",
    )
    ax.set_ylim(0, 5.0)
    save(fig, "data_flow.png")


if __name__ == "__main__":
    group_layout()
    segment_tree()
    data_flow()
