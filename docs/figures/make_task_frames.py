"""Render one frame of an LBF, an RWARE and a MAgent2 catalogue task into ``docs/figures/`` (PNG).

Run ``python docs/figures/make_task_frames.py [task ...]`` (needs
``marl[lbforaging,rware,magent2]`` and matplotlib; name tasks to draw only those).
The frames come from the wrappers' ``render()``: LBF and RWARE draw with pyglet
headless (EGL) when there is no display, MAgent2 with pygame into an array
(``render_mode="rgb_array"``, no display needed). The PNGs are committed.
"""

import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.image

from marl.envs import make_task

HERE = Path(__file__).resolve().parent
FRAMES = {
    "lbforaging/8x8-2p-2f-coop": "lbforaging_frame.png",
    "rware/tiny-4ag": "rware_frame.png",
    "magent2/battle": "magent2_battle_frame.png",
}
# task -> (build arguments, random steps before the frame)
SETTINGS = {"magent2/battle": ({"render_mode": "rgb_array"}, 30)}


def main(tasks: list[str]) -> None:
    for task, filename in FRAMES.items():
        if tasks and task not in tasks:
            continue
        kwargs, steps = SETTINGS.get(task, ({}, 5))
        env = make_task(task, seed=0, **kwargs)
        env.rollout(steps)  # a few random steps from the seeded start
        frame = env.base_env.render()
        matplotlib.image.imsave(HERE / filename, frame)
        print(f"{task}: {frame.shape} -> {HERE / filename}")


if __name__ == "__main__":
    main(sys.argv[1:])
