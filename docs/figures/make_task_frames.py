"""Render one frame of an LBF and an RWARE catalogue task into ``docs/figures/`` (PNG).

Run ``python docs/figures/make_task_frames.py`` (needs ``marl[lbforaging,rware]``
and matplotlib). The frames come from the wrappers' ``render()``, which draws
with pyglet headless (EGL) when there is no display; the PNGs are committed.
"""

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.image

from marl.envs import make_task

HERE = Path(__file__).resolve().parent
FRAMES = {"lbforaging/8x8-2p-2f-coop": "lbforaging_frame.png", "rware/tiny-4ag": "rware_frame.png"}


def main() -> None:
    for task, filename in FRAMES.items():
        env = make_task(task, seed=0)
        env.rollout(5)  # a few random steps from the seeded start
        frame = env.base_env.render()
        matplotlib.image.imsave(HERE / filename, frame)
        print(f"{task}: {frame.shape} -> {HERE / filename}")


if __name__ == "__main__":
    main()
