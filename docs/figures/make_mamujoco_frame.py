"""Render one frame of ``mamujoco/humanoid_9_8`` into ``docs/figures/`` (PNG).

Run ``MUJOCO_GL=egl python docs/figures/make_mamujoco_frame.py`` (needs
``marl[mamujoco]`` and matplotlib). MuJoCo renders offscreen with EGL on a
machine without a display; the PNG is committed.
"""

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.image

from marl.envs import make_task

HERE = Path(__file__).resolve().parent
TASK, FILENAME = "mamujoco/humanoid_9_8", "mamujoco_frame.png"


def main() -> None:
    env = make_task(TASK, seed=0, render_mode="rgb_array")
    env.rollout(10)  # a few random steps from the seeded start
    frame = env.base_env.render()
    matplotlib.image.imsave(HERE / FILENAME, frame)
    print(f"{TASK}: {frame.shape} -> {HERE / FILENAME}")


if __name__ == "__main__":
    main()
