"""Numpy drawing of a :class:`~marl.envs.native.rware.RwareEnv` state (no pyglet)."""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["draw_warehouse"]

_CELL = 20
_BACKGROUND = (255, 255, 255)
_GRID = (200, 200, 200)
_GOAL = (60, 60, 60)
_SHELF = (72, 61, 139)
_REQUESTED = (0, 128, 128)
_AGENT = (255, 140, 0)
_LOADED = (255, 0, 0)
_MARK = (30, 30, 30)


def draw_warehouse(
    grid_size: tuple[int, int], goals: list[tuple[int, int]], state: dict[str, Any]
) -> np.ndarray:
    """An RGB frame ``[H * 20, W * 20, 3]`` uint8 of one env's state (numpy arrays).

    Args:
        grid_size: ``(height, width)`` in cells.
        goals: goal cells ``(x, y)``.
        state: one env's :meth:`RwareEnv.get_state` entries as numpy arrays.
    """
    h, w = grid_size
    img = np.empty((h * _CELL, w * _CELL, 3), dtype=np.uint8)
    img[:] = _BACKGROUND

    def fill(x: int, y: int, color: tuple[int, int, int], margin: int = 1) -> None:
        img[y * _CELL + margin : (y + 1) * _CELL - margin,
            x * _CELL + margin : (x + 1) * _CELL - margin] = color  # fmt: skip

    img[::_CELL, :] = _GRID
    img[:, ::_CELL] = _GRID
    for x, y in goals:
        fill(x, y, _GOAL)
    requested = set(state["request_queue"].tolist())
    for i, (x, y) in enumerate(state["shelf_pos"].tolist()):
        fill(x, y, _REQUESTED if i in requested else _SHELF, 2)
    for (x, y), d, c in zip(
        state["agent_pos"].tolist(), state["agent_dir"].tolist(), state["carrying"].tolist()
    ):
        fill(x, y, _LOADED if c >= 0 else _AGENT, 5)
        # a mark on the side the robot faces (Direction: up, down, left, right)
        cx, cy, q = x * _CELL + _CELL // 2, y * _CELL + _CELL // 2, _CELL // 4
        dx, dy = ((0, -1), (0, 1), (-1, 0), (1, 0))[d]
        mx, my = cx + dx * q, cy + dy * q
        img[my - 2 : my + 2, mx - 2 : mx + 2] = _MARK
    return img
