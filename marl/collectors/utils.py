"""Helpers shared by the collectors: trajectory splitting, exploration modes, errors.

Collected batches are ``[*env_batch, T]`` TensorDicts (time last). Each step
carries ``("collector", "traj_ids")``: the id of the trajectory the transition
belongs to, unique within a collector (and across the workers of a
multi-process or Ray collector). :func:`split_trajectories` turns a batch into
padded ``[num_trajs, max_len]`` trajectories with a ``("collector", "mask")``.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import Any, TypeVar

import torch
from tensordict import TensorDictBase
from tensordict.nn import InteractionType
from torch import nn

from marl.envs.batched import WorkerError
from marl.envs.common import EnvBase

__all__ = [
    "MASK_KEY",
    "TRAJ_IDS_KEY",
    "WORKER_ID_KEY",
    "CollectorWorkerError",
    "split_trajectories",
]

TRAJ_IDS_KEY = ("collector", "traj_ids")
MASK_KEY = ("collector", "mask")
WORKER_ID_KEY = ("collector", "worker_id")

_EXPLORATION = {
    "random": InteractionType.RANDOM,
    "mode": InteractionType.MODE,
    "deterministic": InteractionType.DETERMINISTIC,
    "mean": InteractionType.MEAN,
    "median": InteractionType.MEDIAN,
}


class CollectorWorkerError(WorkerError):
    """A worker of a multi-process or Ray collector raised or died.

    The message names the collector, the worker index and the original
    exception with its traceback. It subclasses
    :class:`marl.envs.WorkerError`, so one ``except`` catches worker failures
    of batched envs and of collectors alike.
    """


def interaction_type(exploration: str | InteractionType) -> InteractionType:
    """Map an exploration name to a ``tensordict.nn.InteractionType``.

    Args:
        exploration: ``"random"`` (sample the policy's distribution), ``"mode"``,
            ``"deterministic"``, ``"mean"`` or ``"median"``, or an
            ``InteractionType``.

    Returns:
        The ``InteractionType`` to use with ``tensordict.nn.set_interaction_type``.

    Raises:
        ValueError: for an unknown name.
    """
    if isinstance(exploration, InteractionType):
        return exploration
    if isinstance(exploration, str) and exploration.lower() in _EXPLORATION:
        return _EXPLORATION[exploration.lower()]
    raise ValueError(
        f"exploration must be one of {sorted(_EXPLORATION)} or an InteractionType, "
        f"got {exploration!r}"
    )


def round_frames_per_batch(frames_per_batch: int, env_numel: int, who: str) -> int:
    """Round ``frames_per_batch`` up to a multiple of the env batch numel (with a warning)."""
    if not isinstance(frames_per_batch, int) or isinstance(frames_per_batch, bool):
        raise TypeError(f"frames_per_batch must be an int, got {type(frames_per_batch).__name__}")
    if frames_per_batch < 1:
        raise ValueError(f"frames_per_batch must be >= 1, got {frames_per_batch}")
    steps = math.ceil(frames_per_batch / env_numel)
    rounded = steps * env_numel
    if rounded != frames_per_batch:
        warnings.warn(
            f"{who}: frames_per_batch={frames_per_batch} is not divisible by the env batch "
            f"numel {env_numel}; rounded up to {rounded} ({steps} steps per batch).",
            UserWarning,
            stacklevel=3,
        )
    return rounded


def round_total_frames(total_frames: int, frames_per_batch: int, who: str) -> int:
    """Round ``total_frames`` up to a multiple of ``frames_per_batch`` (with a warning).

    ``-1`` (or any negative value) means "never stop" and is returned as ``-1``.
    """
    if not isinstance(total_frames, int) or isinstance(total_frames, bool):
        raise TypeError(f"total_frames must be an int, got {type(total_frames).__name__}")
    if total_frames < 0:
        return -1
    if total_frames == 0:
        raise ValueError("total_frames must be positive, or -1 for an endless collector")
    batches = math.ceil(total_frames / frames_per_batch)
    rounded = batches * frames_per_batch
    if rounded != total_frames:
        warnings.warn(
            f"{who}: total_frames={total_frames} is not a multiple of frames_per_batch="
            f"{frames_per_batch}; the last batch is collected whole, so {rounded} frames "
            f"({batches} batches) will be collected.",
            UserWarning,
            stacklevel=3,
        )
    return rounded


def split_trajectories(
    td: TensorDictBase,
    *,
    traj_key: Any = TRAJ_IDS_KEY,
    mask_key: Any = MASK_KEY,
) -> TensorDictBase:
    """Split a ``[*env_batch, T]`` batch into padded trajectories ``[num_trajs, max_len]``.

    A trajectory is a run of consecutive steps of one env with the same
    ``traj_key`` id. Trajectories are ordered by env (row-major over the env
    batch dims), then by time. Padding is zeros, and ``mask_key`` is True on
    real steps.

    Args:
        td: collected data whose last batch dim is time and which holds
            ``traj_key`` (``[*env_batch, T]``).
        traj_key: the trajectory-id entry.
        mask_key: where to write the validity mask.

    Returns:
        A new TensorDict of batch size ``[num_trajs, max_len]``.

    Raises:
        KeyError: when ``td`` has no ``traj_key``.
        ValueError: when ``td`` has no batch dims.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict(
        ...     {"x": torch.arange(6.0).reshape(2, 3),
        ...      ("collector", "traj_ids"): torch.tensor([[0, 0, 2], [1, 1, 1]])},
        ...     batch_size=[2, 3])
        >>> out = split_trajectories(td)
        >>> out["x"]
        tensor([[0., 1., 0.],
                [2., 0., 0.],
                [3., 4., 5.]])
        >>> out["collector", "mask"]
        tensor([[ True,  True, False],
                [ True, False, False],
                [ True,  True,  True]])
    """
    if td.batch_dims < 1:
        raise ValueError("split_trajectories needs data with a time dim (batch dims [*B, T])")
    ids = td.get(traj_key, None)
    if ids is None:
        raise KeyError(
            f"split_trajectories needs the trajectory ids {traj_key!r}; collect with a marl "
            "collector or pass traj_key="
        )
    time = td.batch_size[-1]
    flat = td.reshape(-1, time)  # [E, T]
    ids = ids.reshape(-1, time)
    start = torch.ones_like(ids, dtype=torch.bool)
    start[:, 1:] = ids[:, 1:] != ids[:, :-1]
    start = start.reshape(-1)
    seg = start.cumsum(0) - 1  # segment index of every step, row-major over (env, time)
    n_seg = int(seg[-1]) + 1
    lengths = torch.bincount(seg, minlength=n_seg)
    seg_start = torch.nonzero(start).squeeze(-1)
    pos = torch.arange(seg.numel(), device=seg.device) - seg_start[seg]
    max_len = int(lengths.max())
    steps = flat.reshape(-1)
    out = torch.zeros_like(steps[0]).expand(n_seg, max_len).clone()
    out[seg, pos] = steps
    mask = torch.zeros((n_seg, max_len), dtype=torch.bool, device=ids.device)
    mask[seg, pos] = True
    out.set(mask_key, mask)
    return out


def finish_batch(
    td: TensorDictBase,
    *,
    split_trajs: bool,
    postproc: Any,
    replay_buffer: Any,
) -> TensorDictBase | None:
    """Split, post-process, and either return ``td`` or extend ``replay_buffer`` with it.

    ``td`` must already be a fresh copy (not a buffer the collector reuses).
    """
    if split_trajs:
        td = split_trajectories(td)
    if postproc is not None:
        td = postproc(td)
    if replay_buffer is not None:
        replay_buffer.extend(td)
        return None
    return td


_C = TypeVar("_C", bound="CollectorLifetime")


class CollectorLifetime:
    """What every collector does the same way with its batches and its lifetime: it is
    its own context manager (``with`` shuts it down), and a finished batch moves to
    ``storing_device`` before :func:`finish_batch`.

    A subclass sets ``storing_device``, ``split_trajs``, ``postproc`` and
    ``replay_buffer``, and defines ``shutdown``.
    """

    storing_device: Any
    split_trajs: bool
    postproc: Any
    replay_buffer: Any

    def shutdown(self) -> None:
        """Release what the collector holds (each collector says what)."""
        raise NotImplementedError

    def _finish(self, td: TensorDictBase) -> TensorDictBase | None:
        if self.storing_device is not None:
            td = td.to(self.storing_device)
        return finish_batch(
            td,
            split_trajs=self.split_trajs,
            postproc=self.postproc,
            replay_buffer=self.replay_buffer,
        )

    def __enter__(self: _C) -> _C:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()


def check_replay_buffer(replay_buffer: Any, who: str) -> None:
    """Raise a TypeError unless ``replay_buffer`` is None or has ``.extend(td)``."""
    if replay_buffer is not None and not callable(getattr(replay_buffer, "extend", None)):
        raise TypeError(
            f"{who}: replay_buffer must have an .extend(td) method, got {type(replay_buffer).__name__}"
        )


def plan_worker_frames(
    frames_per_batch: int, batch_sizes: list[tuple[int, ...]], sync: bool, who: str
) -> tuple[int, int, list[int]]:
    """Split ``frames_per_batch`` into whole steps of the workers' envs.

    Sync collectors yield the batches of all workers together, so
    ``frames_per_batch`` counts every worker; async collectors yield one
    worker's batch at a time. The rounding up warns, like :class:`Collector`.

    Args:
        frames_per_batch: requested frames per yielded batch.
        batch_sizes: the env batch size of each worker.
        sync: whether the workers' batches are yielded together.
        who: the collector's name, for messages.

    Returns:
        ``(frames_per_batch, steps_per_batch, frames_per_worker_batch)``.
    """
    if not isinstance(frames_per_batch, int) or frames_per_batch < 1:
        raise ValueError(
            f"{who}: frames_per_batch must be a positive int, got {frames_per_batch!r}"
        )
    if sync and len(set(batch_sizes)) > 1:
        raise ValueError(
            f"{who} stacks the workers' batches, so their envs need one batch size; got "
            f"{batch_sizes} (use an async collector for envs of different sizes)"
        )
    numels = [max(1, math.prod(b)) for b in batch_sizes]
    per = sum(numels) if sync else numels[0]
    steps = math.ceil(frames_per_batch / per)
    actual = steps * per
    if not sync and len(set(numels)) > 1:
        warnings.warn(
            f"{who}: the workers' envs have different batch numels {numels}; each batch has "
            f"{steps} steps, so batches hold different numbers of frames.",
            UserWarning,
            stacklevel=4,
        )
    if actual != frames_per_batch:
        whose = "all workers together" if sync else "one worker"
        warnings.warn(
            f"{who}: frames_per_batch={frames_per_batch} is not divisible by the env batch numel "
            f"of {whose} ({per}); rounded up to {actual} ({steps} steps per batch).",
            UserWarning,
            stacklevel=4,
        )
    return actual, steps, [steps * n for n in numels]


def make_env(env: EnvBase | Callable[[], EnvBase], who: str) -> EnvBase:
    """An env instance, built from ``env`` when it is a callable."""
    if isinstance(env, EnvBase):
        return env
    if callable(env):
        built = env()
        if not isinstance(built, EnvBase):
            raise TypeError(
                f"{who}: the env factory must return an EnvBase, got {type(built).__name__}"
            )
        return built
    raise TypeError(
        f"{who}: env must be an EnvBase or a callable returning one, got {type(env).__name__}"
    )


def policy_device_of(policy: Any) -> torch.device | None:
    if isinstance(policy, nn.Module):
        for p in policy.parameters():
            return p.device
        for b in policy.buffers():
            return b.device
    return None


def as_device(device: Any) -> torch.device | None:
    return None if device is None else torch.device(device)


def assign_traj_ids(
    done: torch.Tensor,
    start_ids: torch.Tensor,
    counter: torch.Tensor,
    stride: int = 1,
    offset: int = 0,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Trajectory ids of ``T`` steps of ``E`` sub-envs, from their ``done`` flags.

    A sub-env keeps its id until a step where it is done; from the next step
    on it has a new one. New local ids are handed out in the order (step,
    sub-env): ``counter, counter + 1, ...``, and ids are ``local * stride +
    offset``. Tensor operations only: nothing is read on the host.

    Args:
        done: ``[E, T]`` (or ``[E, T, 1]``) bool flags of the steps.
        start_ids: ``[E]`` the ids at the first step.
        counter: 0-dim long tensor, the number of local ids handed out so far.
        stride: see above.
        offset: see above.

    Returns:
        ``(ids [E, T], ids after the last step [E], the new counter)``.

    Examples:
        >>> import torch
        >>> done = torch.tensor([[False, True, False], [True, True, False]])
        >>> ids, last, counter = assign_traj_ids(done, torch.tensor([0, 1]), torch.tensor(2))
        >>> ids
        tensor([[0, 0, 3],
                [1, 2, 4]])
        >>> last, counter
        (tensor([3, 4]), tensor(5))
    """
    if done.dim() == 3:
        done = done.squeeze(-1)
    n_envs, steps = done.shape
    # the local id given to the trajectory that starts after step t of env e
    order = done.t().reshape(-1).long().cumsum(0).reshape(steps, n_envs).t()
    new_ids = (counter + order - 1) * stride + offset
    step_index = torch.arange(steps, device=done.device).expand(n_envs, steps)
    last = torch.where(done, step_index, torch.full_like(step_index, -1)).cummax(1).values
    # step t belongs to the trajectory that began after the last end before t
    before = torch.cat([torch.full_like(last[:, :1], -1), last], 1)  # [E, T + 1]
    picked = new_ids.gather(1, before.clamp_min(0))  # clamp: -1 -> any column, masked below
    all_ids = torch.where(before >= 0, picked, start_ids.unsqueeze(1))
    return all_ids[:, :-1], all_ids[:, -1], counter + done.sum()


def key_plan(keys: list[Any]) -> tuple[list[tuple[int, str]], list[tuple[int, str]]]:
    """Plan the lookup of nested ``keys``: each sub-TensorDict is fetched once per step.

    Returns ``(prefix_plan, leaf_plan)``: ``prefix_plan[i] = (parent, name)``
    fetches sub-TensorDict ``i + 1`` (0 is the root) and ``leaf_plan`` fetches
    the leaves, in the order of ``keys``.
    """
    index: dict[tuple[str, ...], int] = {(): 0}
    prefix_plan: list[tuple[int, str]] = []
    leaf_plan: list[tuple[int, str]] = []
    for key in keys:
        key = (key,) if isinstance(key, str) else tuple(key)
        for i in range(1, len(key)):
            prefix = key[:i]
            if prefix not in index:
                index[prefix] = len(index)
                prefix_plan.append((index[prefix[:-1]], prefix[-1]))
        leaf_plan.append((index[key[:-1]], key[-1]))
    return prefix_plan, leaf_plan


def env_state_owner(env: EnvBase) -> Any:
    """The object holding the env's state dict (the env itself or its transforms), or None."""
    if callable(getattr(env, "state_dict", None)) and callable(
        getattr(env, "load_state_dict", None)
    ):
        return env
    transform = getattr(env, "transform", None)
    if isinstance(transform, nn.Module):
        return transform
    return None
