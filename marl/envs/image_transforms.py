"""``ResizeImages``: pixel observations shrunk (and made grey) before anything stores them.

Pixel tasks return large frames: PettingZoo's pistonball gives each of its 20 pistons a
457x120 RGB view, cooperative pong each paddle a 280x480 one. A batch of 100 steps of
pistonball then holds 2.6 GB of observations (``"next"`` included), and a CNN spends its
time on pixels that carry no more than a small frame would. The usual cure, the one
PettingZoo's own pistonball tutorials apply with SuperSuit (``color_reduction_v0``,
``resize_v1(84, 84)``), is to shrink the frames at the env: this transform does it for
every image observation of every group, as ``uint8``, so buffers keep a byte per pixel.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from tensordict import TensorDictBase

from marl.envs.transforms import EnvSpecs, Transform
from marl.specs import Bounded, NestedKey

__all__ = ["ResizeImages"]

# ITU-R BT.601 luma weights: the grey of an RGB pixel, as image libraries compute it
_LUMA = (0.299, 0.587, 0.114)
# float32 values converted at once (8 MB): see ResizeImages._resize
_CHUNK_FLOATS = 2**21


def _is_image(shape: Sequence[int], lead: int, dtype: torch.dtype) -> bool:
    """A ``uint8`` leaf whose last three dims (after ``lead`` batch/agent dims) are
    ``[H, W, C]`` with 1, 3 or 4 channels."""
    dims = tuple(shape)[lead:]
    return dtype == torch.uint8 and len(dims) == 3 and dims[-1] in (1, 3, 4)


class ResizeImages(Transform):
    """Resize every ``uint8`` ``[H, W, C]`` observation to ``size``, optionally to grey.

    Each image is averaged over the source pixels that fall in each target pixel
    (``area`` interpolation, which keeps thin objects such as a ball visible where
    nearest-neighbour sampling can drop them), then rounded back to ``uint8``. Grey is the
    BT.601 luma of the RGB channels (an alpha channel is dropped). Channels stay last.

    Args:
        size: ``(height, width)`` of the output images.
        grayscale: one grey channel instead of the colours.
        in_keys: the observation keys to resize; by default every ``uint8`` leaf whose
            last three dims are ``[H, W, C]`` with ``C`` in 1, 3, 4.

    Raises:
        ValueError: on a bad size, or when there is no image to resize (the message lists
            the observations found).

    Examples:
        >>> from marl.envs import TransformedEnv
        >>> from marl.envs.libs.pettingzoo import PettingZooEnv
        >>> env = TransformedEnv(
        ...     PettingZooEnv("cooperative_pong_v6", parallel=True, seed=0, group_map="by_prefix"),
        ...     ResizeImages((42, 42), grayscale=True))
        >>> env.reset()["paddle", "observation"].shape
        torch.Size([2, 42, 42, 1])
    """

    def __init__(
        self,
        size: Sequence[int],
        grayscale: bool = False,
        in_keys: Sequence[NestedKey] | None = None,
    ) -> None:
        super().__init__()
        size = tuple(size)
        if len(size) != 2 or not all(
            isinstance(s, int) and not isinstance(s, bool) and s >= 1 for s in size
        ):
            raise ValueError(f"ResizeImages: size must be (height, width) ints >= 1, got {size}")
        self.size = size
        self.grayscale = bool(grayscale)
        self._in_keys = None if in_keys is None else list(in_keys)
        self._keys: list[tuple[NestedKey, int]] = []  # (key, its lead dims)

    def transform_specs(self, specs: EnvSpecs) -> EnvSpecs:
        spec = specs.observation
        found = []
        for key, leaf in spec.items(include_nested=True, leaves_only=True):
            lead = len(leaf.shape) - 3
            wanted = self._in_keys is None or key in self._in_keys
            if wanted and lead >= 0 and _is_image(leaf.shape, lead, leaf.dtype):
                found.append((key, lead))
        if not found:
            shapes = {
                k: (tuple(s.shape), str(s.dtype).replace("torch.", ""))
                for k, s in spec.items(include_nested=True, leaves_only=True)
            }
            raise ValueError(
                "ResizeImages found no uint8 [H, W, C] image observation"
                + (f" among in_keys {self._in_keys}" if self._in_keys is not None else "")
                + f"; the observations are {shapes}"
            )
        channels = 1 if self.grayscale else None
        for key, lead in found:
            leaf = spec[key]
            c = channels or int(leaf.shape[-1])
            shape = (*leaf.shape[:lead], *self.size, c)
            spec[key] = Bounded(0, 255, shape=shape, dtype=torch.uint8, device=leaf.device)
        self._keys = found
        return specs

    def _resize(self, image: torch.Tensor, lead: int) -> torch.Tensor:
        batch = image.shape[:lead]
        x = image.reshape(-1, *image.shape[lead:])  # [N, H, W, C]
        # a few images at a time: the float copies of a whole step's frames (53 MB for 4
        # pistonball envs) are above glibc's largest heap allocation (32 MB), so each was
        # a fresh mmap whose pages the kernel zeroed on first touch (4,000 page faults a
        # step, measured); chunks of at most 8 MB reuse the same heap memory
        per_chunk = max(1, _CHUNK_FLOATS // max(1, x[0].numel()))
        out = torch.cat([self._resize_images(c) for c in x.split(per_chunk)])
        return out.reshape(*batch, *out.shape[1:])

    def _resize_images(self, x: torch.Tensor) -> torch.Tensor:
        """``[N, H, W, C]`` uint8 images to ``[N, *size, C']`` uint8."""
        if self.grayscale:
            # the luma accumulated channel by channel into one float image, each channel
            # converted as it is added: no float copy of all three channels is made.
            # Pistonball's 80 457x120 views of a 4-env step: 28 ms, against 43 ms for a
            # matrix-vector product over the float channels-last pixels and 70 ms for a
            # weighted sum of three float channel views (one thread, measured)
            if x.shape[-1] >= 3:
                grey = x[..., 0].float().mul_(_LUMA[0])
                grey.add_(x[..., 1].float(), alpha=_LUMA[1])
                grey.add_(x[..., 2].float(), alpha=_LUMA[2])
                x = grey.unsqueeze(1)  # [N, 1, H, W]
            else:
                x = x[..., :1].float().movedim(-1, 1)
        else:
            x = x.movedim(-1, 1).float()  # [N, C, H, W]
        if tuple(x.shape[-2:]) != self.size:
            x = F.interpolate(x, size=self.size, mode="area")
        return x.round_().clamp_(0, 255).to(torch.uint8).movedim(1, -1)

    def call(self, td: TensorDictBase) -> TensorDictBase:
        for key, lead in self._keys:
            image = td.get(key, None)
            if image is not None:
                # data may carry more batch dims than the spec (a time dim): keep them
                extra = image.dim() - (lead + 3)
                td.set(key, self._resize(image, lead + extra))
        return td
