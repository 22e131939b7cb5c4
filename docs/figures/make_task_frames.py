"""Render frames of catalogue tasks into ``docs/figures/`` (PNG), for the family pages.

Run ``python docs/figures/make_task_frames.py`` for every figure, or name some
(``python docs/figures/make_task_frames.py vmas_frames.png``). It needs the families'
extras and matplotlib. Each frame comes from the wrapper's ``render()`` after 5 random
steps from the seeded start (seed 0); pyglet (VMAS, LBF, RWARE) draws headless (EGL)
when there is no display, PettingZoo, Gymnasium, MAgent2 and Melting Pot (its
``WORLD.RGB``) draw with their
``rgb_array`` render mode (MuJoCo through EGL), Overcooked with the package's
``StateVisualizer`` (pygame, SDL's dummy video driver without a display). The PNGs are committed.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.image
import matplotlib.pyplot as plt

from marl.envs import make_task
from marl.envs.tasks import load_task_config

# MuJoCo (halfcheetah) needs an OpenGL backend: EGL draws without a display
if not os.environ.get("DISPLAY"):
    os.environ.setdefault("MUJOCO_GL", "egl")

HERE = Path(__file__).resolve().parent
# one frame per file, or a row of frames with the task names as titles
FIGURES: dict[str, list[str]] = {
    "lbforaging_frame.png": ["lbforaging/8x8-2p-2f-coop"],
    "rware_frame.png": ["rware/tiny-4ag"],
    "lbforaging_torch_frame.png": ["lbforaging_torch/8x8-2p-2f-coop"],
    "rware_torch_frame.png": ["rware_torch/tiny-4ag"],
    "smax_frames.png": ["smax/3m", "smax/2s3z", "smax/6h_vs_8z", "smax/smacv2_10_units"],
    "vmas_frames.png": ["vmas/navigation", "vmas/balance", "vmas/transport", "vmas/football"],
    "pettingzoo_frames.png": [
        "pettingzoo/simple_tag",
        "pettingzoo/multiwalker",
        "pettingzoo/pistonball",
        "pettingzoo/knights_archers_zombies",
    ],
    "gymnasium_frames.png": ["gymnasium/lunarlander", "gymnasium/halfcheetah"],
    "magent2_battle_frame.png": ["magent2/battle"],
    "meltingpot_frames.png": [
        "meltingpot/commons_harvest__open",
        "meltingpot/clean_up",
        "meltingpot/collaborative_cooking__asymmetric",
        "meltingpot/prisoners_dilemma_in_the_matrix__arena",
        "meltingpot/territory__rooms",
    ],
    "overcooked_frames.png": [
        "overcooked/cramped_room",
        "overcooked/asymmetric_advantages",
        "overcooked/coordination_ring",
        "overcooked/forced_coordination",
        "overcooked/counter_circuit",
    ],
}
# random steps before the frame where 5 show too little (the armies have not met yet)
STEPS = {
    "magent2/battle": 30,
    **{f"smax/{n}": 15 for n in ("3m", "2s3z", "6h_vs_8z", "smacv2_10_units")},
    **{
        f"overcooked/{n}": 20
        for n in (
            "cramped_room",
            "asymmetric_advantages",
            "coordination_ring",
            "forced_coordination",
            "counter_circuit",
        )
    },
}


def frame(task: str):
    """An RGB frame of ``task`` after 5 (or ``STEPS[task]``) random steps from seed 0."""
    family = load_task_config(task)["family"]
    # VMAS renders any env on request; the others choose their render mode at build
    own = ("vmas", "lbforaging", "rware", "overcooked", "lbforaging_torch", "rware_torch", "smax")
    overrides = {} if family in own else {"render_mode": "rgb_array"}
    env = make_task(task, seed=0, **overrides)
    try:
        env.rollout(STEPS.get(task, 5))
        return env.base_env.render()
    finally:
        env.close()


def main(names: list[str]) -> None:
    for filename in names or list(FIGURES):
        tasks = FIGURES[filename]
        if len(tasks) == 1:
            image = frame(tasks[0])
            matplotlib.image.imsave(HERE / filename, image)
        else:
            fig, axes = plt.subplots(1, len(tasks), figsize=(3.2 * len(tasks), 3.4))
            for ax, task in zip(axes, tasks):
                ax.imshow(frame(task))
                ax.set_title(task, fontsize=10)
                ax.axis("off")
            fig.tight_layout()
            fig.savefig(HERE / filename, dpi=100)
            plt.close(fig)
        print(f"{', '.join(tasks)} -> {HERE / filename}")


if __name__ == "__main__":
    main(sys.argv[1:])
