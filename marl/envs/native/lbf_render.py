"""A numpy drawing of one Level-Based Foraging grid (:meth:`marl.envs.native.LBFEnv.render`).

Plain numpy, so that rendering needs no window, display or plotting package (the
package's own renderer opens a pyglet window).
"""

from __future__ import annotations

import numpy as np

__all__ = ["draw_frame"]

_FOOD = (230, 120, 40)
_PLAYER = (40, 90, 200)


def draw_frame(
    pos: np.ndarray,
    level: np.ndarray,
    food_pos: np.ndarray,
    food_level: np.ndarray,
    field_size: tuple[int, int],
    cell: int = 32,
) -> np.ndarray:
    """An RGB frame ``[rows * cell, cols * cell, 3]`` uint8.

    Grid lines in grey, food as orange boxes, players as blue boxes (players sharing
    a cell share a box); each box shows its level as that many white dots, in rows
    of three.

    Args:
        pos: ``[n, 2]`` player ``(row, col)``.
        level: ``[n]`` player levels.
        food_pos: ``[F, 2]`` food ``(row, col)``.
        food_level: ``[F]`` food levels (0: no food).
        field_size: ``(rows, cols)``.
        cell: pixels per cell.

    Examples:
        >>> img = draw_frame(np.array([[0, 0]]), np.array([2]), np.array([[2, 2]]),
        ...                  np.array([3]), (4, 5), cell=16)
        >>> img.shape, str(img.dtype), img[8, 40].tolist(), img[40, 40].tolist()
        ((64, 80, 3), 'uint8', [255, 255, 255], [230, 120, 40])
    """
    rows, cols = field_size
    img = np.full((rows * cell, cols * cell, 3), 255, np.uint8)
    img[::cell], img[:, ::cell] = 200, 200
    items = [(p, lv, _FOOD) for p, lv in zip(food_pos, food_level) if lv > 0]
    items += [(p, lv, _PLAYER) for p, lv in zip(pos, level)]
    pad = dot = max(cell // 8, 1)
    for (r, c), lvl, color in items:
        y, x = int(r) * cell, int(c) * cell
        img[y + pad : y + cell - pad, x + pad : x + cell - pad] = color
        for k in range(int(lvl)):
            dy, dx = y + 2 * pad + (k // 3) * 2 * dot, x + 2 * pad + (k % 3) * 2 * dot
            img[dy : dy + dot, dx : dx + dot] = 255
    return img
