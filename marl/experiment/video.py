"""Evaluation videos: one rendered episode, written as an mp4.

VMAS draws with pyglet. Headless (no ``DISPLAY``), pyglet needs its shadow
window turned off before it is imported; :func:`prepare_headless_rendering`
does that and, where ``Xvfb`` is installed, starts a virtual display through
``pyvirtualdisplay`` when one is available. The rendering of VMAS 1.5 in
``rgb_array`` mode then works with no screen (tested in CI).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tensordict import TensorDictBase

from marl.atomic import atomic_path
from marl.envs.common import EnvBase
from marl.envs.episodes import play_episodes
from marl.extras import require

__all__ = ["prepare_headless_rendering", "record_episode", "write_video"]


def prepare_headless_rendering() -> None:
    """Let pyglet (VMAS's renderer) draw off-screen when there is no display."""
    if os.environ.get("DISPLAY"):
        return
    try:
        import pyglet
    except ImportError:
        return
    pyglet.options["shadow_window"] = False
    pyglet.options["headless"] = True


def _frame(env: EnvBase) -> np.ndarray:
    base = getattr(env, "base_env", env)
    render = getattr(base, "render", None)
    if render is None:
        raise RuntimeError(f"{type(base).__name__} cannot render")
    if base.batch_size.numel() > 1 or len(base.batch_size) > 0:
        frame = render(mode="rgb_array", env_index=0)
    else:
        frame = render()
    if isinstance(frame, (list, tuple)):  # vector envs render every sub-env
        frame = frame[0]
    frame = np.asarray(frame)
    if frame.ndim != 3 or frame.shape[-1] not in (3, 4):
        raise RuntimeError(f"expected an [H, W, 3] frame from render, got shape {frame.shape}")
    return frame[..., :3].astype(np.uint8)


def record_episode(
    env: EnvBase,
    policy: Callable[[TensorDictBase], TensorDictBase],
    max_steps: int = 1000,
    deterministic: bool = True,
) -> list[np.ndarray]:
    """Run one episode of the first sub-env and return its rendered frames.

    The episode runs in :func:`marl.envs.episodes.play_episodes`, the loop evaluation
    uses, with the first sub-env's share set to this one episode.

    Args:
        env: an env that renders (VMAS, or a task built with ``render_mode="rgb_array"``).
        policy: ``td -> td`` writing every action.
        max_steps: cap on the episode length.
        deterministic: act with the policy's mode.

    Returns:
        ``[H, W, 3]`` uint8 frames, the first one after reset.
    """
    frames: list[np.ndarray] = []

    def nothing_to_sum(td: TensorDictBase) -> torch.Tensor:  # a video needs only the frames
        return td.get(("next", "done")).reshape(1, -1)

    play_episodes(
        env,
        policy,
        1,
        nothing_to_sum,
        max_steps=max_steps,
        deterministic=deterministic,
        observe=lambda td: frames.append(_frame(env)),
    )
    return frames


def write_video(frames: list[np.ndarray], path: str | os.PathLike[str], fps: int = 20) -> Path:
    """Write frames to an mp4 file (H.264 through imageio-ffmpeg).

    Raises:
        ImportError: naming ``pip install "marl[video]"`` when imageio is missing.
        ValueError: when there are no frames.
    """
    if not frames:
        raise ValueError("write_video: no frames to write")
    imageio = require("imageio.v2", "videos", "video", what="imageio and imageio-ffmpeg")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path, fsync=False) as tmp:  # imageio infers mp4 from the suffix
        # macro_block_size=1: VMAS frames (700x700) are not multiples of 16
        writer: Any = imageio.get_writer(tmp, fps=fps, codec="libx264", macro_block_size=1)
        try:
            for frame in frames:
                writer.append_data(frame)
        finally:
            writer.close()
    return path
