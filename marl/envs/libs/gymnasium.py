"""`GymnasiumEnv`: single-agent Gymnasium envs, one or vectorized.

The layout is the single-agent one of DESIGN.md: ``observation`` (a
sub-TensorDict for ``Dict`` spaces), ``action``, ``("next", "reward")`` and the
root ``done``/``terminated``/``truncated`` flags, ``[*B, 1]``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from tensordict import TensorDict, TensorDictBase

from marl.envs.common import EnvBase
from marl.envs.libs._spaces import space_to_spec, to_numpy_action
from marl.extras import require
from marl.specs import Composite, OneHot, Unbounded

__all__ = ["GymnasiumEnv"]


class GymnasiumEnv(EnvBase):
    """A Gymnasium env (batch size ``[]``) or vector env (batch size ``[num_envs]``).

    With ``num_envs``, the env is a gymnasium vector env built without
    autoreset (``AutoresetMode.DISABLED``): an episode's final observation is
    the ``"next"`` observation of its last step, and sub-envs restart only
    through ``reset`` with a ``"_reset"`` mask (which ``step_and_maybe_reset``
    and collectors send). A vector env passed in with
    ``AutoresetMode.SAME_STEP`` also works: its final observation is taken from
    ``info["final_obs"]`` and the reset observation is kept for the next reset.

    float64 observations and actions (MuJoCo's HalfCheetah) become float32
    specs and data, and rewards are float32, unless ``keep_float64=True``:
    policies and losses compute in float32. Actions go back to the env in its
    own dtype.

    Args:
        env_id: a registered id such as ``"CartPole-v1"``.
        env: an existing ``gymnasium.Env`` or ``gymnasium.vector.VectorEnv``
            (instead of ``env_id``).
        num_envs: build a vector env with this many sub-envs (``env_id`` only).
        seed: optional seed, used at the next reset.
        categorical_action_encoding: ``Discrete`` actions as an index (True) or
            one-hot (False).
        vectorization_mode: ``"sync"`` or ``"async"`` (with ``num_envs``).
        device: device of the tensors.
        keep_float64: keep float64 observations, actions and rewards (False:
            convert them to float32).
        check_actions: check every action before gymnasium sees it (NaN/inf,
            out-of-range or non-integer discrete actions; see
            :mod:`marl.envs.action_checks`). Off by default.
        **kwargs: passed to ``gymnasium.make`` / ``make_vec``.

    Raises:
        ImportError: when gymnasium is not installed.
        ValueError: on a bad combination of arguments, or a vector env in
            ``NEXT_STEP`` autoreset mode.

    Examples:
        >>> env = GymnasiumEnv("CartPole-v1", num_envs=2, seed=0)
        >>> td = env.rollout(3)
        >>> td["observation"].shape, td["next", "reward"].shape
        (torch.Size([2, 3, 4]), torch.Size([2, 3, 1]))
    """

    def __init__(
        self,
        env_id: str | None = None,
        env: Any = None,
        num_envs: int | None = None,
        seed: int | None = None,
        categorical_action_encoding: bool = True,
        *,
        vectorization_mode: str = "sync",
        device: Any = None,
        keep_float64: bool = False,
        check_actions: bool = False,
        **kwargs: Any,
    ) -> None:
        gym = require("gymnasium", "GymnasiumEnv", "gymnasium")
        from gymnasium.vector import AutoresetMode, VectorEnv

        if (env_id is None) == (env is None):
            raise ValueError("GymnasiumEnv needs exactly one of env_id= or env=")
        if env is None:
            if num_envs is None:
                env = gym.make(env_id, **kwargs)
            else:
                if not isinstance(num_envs, int) or num_envs < 1:
                    raise ValueError(f"num_envs must be a positive int or None, got {num_envs!r}")
                if vectorization_mode not in ("sync", "async"):
                    raise ValueError(
                        f'vectorization_mode must be "sync" or "async", got {vectorization_mode!r}'
                    )
                env = gym.make_vec(
                    env_id,
                    num_envs=num_envs,
                    vectorization_mode=vectorization_mode,
                    vector_kwargs={"autoreset_mode": AutoresetMode.DISABLED},
                    **kwargs,
                )
        elif kwargs:
            raise ValueError(f"arguments {sorted(kwargs)} need env_id=, not env=")
        self.vectorized = isinstance(env, VectorEnv)
        if self.vectorized:
            if num_envs is not None and num_envs != env.num_envs:
                raise ValueError(f"num_envs={num_envs} but the vector env has {env.num_envs}")
            mode = env.metadata.get("autoreset_mode", AutoresetMode.NEXT_STEP)
            if mode not in (AutoresetMode.DISABLED, AutoresetMode.SAME_STEP):
                raise ValueError(
                    f"vector envs in autoreset mode {mode} mix episodes in one step; build it "
                    "with autoreset_mode=AutoresetMode.DISABLED (or SAME_STEP)"
                )
            self._same_step = mode == AutoresetMode.SAME_STEP
            batch: tuple[int, ...] = (env.num_envs,)
            obs_space, act_space = env.single_observation_space, env.single_action_space
        else:
            if num_envs is not None:
                raise ValueError("num_envs needs env_id= (a single env was given)")
            if not isinstance(env, gym.Env):
                raise TypeError(
                    f"env must be a gymnasium Env or VectorEnv, got {type(env).__name__}"
                )
            self._same_step = False
            batch = ()
            obs_space, act_space = env.observation_space, env.action_space
        super().__init__(batch_size=batch, device=device)
        self._env = env
        self.env_id = env_id
        self.categorical_action_encoding = categorical_action_encoding
        self._act_space = act_space
        self.keep_float64 = keep_float64
        self.check_actions = check_actions
        self._reward_dtype = np.float64 if keep_float64 else np.float32
        d = self.device
        obs = space_to_spec(obs_space, batch, device=d, keep_float64=keep_float64)
        self._dict_obs = isinstance(obs, Composite)
        self.observation_spec = Composite({"observation": obs}, shape=batch, device=d)
        act = space_to_spec(
            act_space,
            batch,
            categorical=categorical_action_encoding,
            device=d,
            keep_float64=keep_float64,
        )
        self._one_hot = isinstance(act, OneHot)
        self.action_spec = Composite({"action": act}, shape=batch, device=d)
        reward_dtype = torch.float64 if keep_float64 else torch.float32
        self.reward_spec = Composite(
            {"reward": Unbounded((*batch, 1), dtype=reward_dtype, device=d)}, shape=batch, device=d
        )
        self._seed_next = seed
        self._pending: dict[int, Any] = {}
        self._last_obs: Any = None
        if seed is not None:
            self.set_seed(seed)

    # ------------------------------------------------------------ data
    def _obs_td(self, obs: Any) -> TensorDict:
        if self._dict_obs:
            value: Any = TensorDict(
                {k: self._tensor(v, ("observation", k)) for k, v in obs.items()},
                batch_size=self.batch_size,
            )
        else:
            value = self._tensor(obs, "observation")
        return TensorDict({"observation": value}, batch_size=self.batch_size, device=self.device)

    def _tensor(self, value: Any, key: Any) -> torch.Tensor:
        dtype = self.observation_spec[key].dtype
        t = torch.as_tensor(np.asarray(value), dtype=dtype)
        return t.to(self.device) if self.device.type != "cpu" else t

    def _flag(self, value: Any) -> torch.Tensor:
        return (
            torch.as_tensor(np.asarray(value, dtype=bool))
            .reshape(*self.batch_size, 1)
            .to(self.device)
        )

    # ------------------------------------------------------------ reset / step
    def _reset(self, td: TensorDictBase | None) -> TensorDictBase:
        seed, self._seed_next = self._seed_next, None
        mask = None if td is None else td.get("_reset", None)
        env = self._env
        if not self.vectorized or mask is None or bool(mask.all()):
            obs, _ = env.reset(seed=seed)
            self._pending.clear()
        else:
            flat = mask.reshape(-1).cpu().numpy()
            if self._same_step:
                missing = [i for i in np.flatnonzero(flat) if i not in self._pending]
                if missing:
                    raise RuntimeError(
                        f"sub-envs {missing} cannot be reset alone: a SAME_STEP vector env only "
                        "resets sub-envs that just ended (reset them all instead)"
                    )
                obs = self._splice(
                    self._last_obs, {i: self._pending.pop(i) for i in np.flatnonzero(flat)}
                )
            else:
                obs, _ = env.reset(seed=seed, options={"reset_mask": flat})
        self._last_obs = obs
        return self._obs_td(obs)

    def _step(self, td: TensorDictBase) -> TensorDictBase:
        action = to_numpy_action(td.get("action"), self._act_space, self._one_hot)
        if not self.vectorized and action.ndim == 0 and self.action_spec["action"].shape == ():
            action = action.item()
        obs, reward, term, trunc, info = self._env.step(action)
        if self._same_step:
            ended = np.flatnonzero(np.asarray(info.get("_final_obs", np.zeros(0, bool))))
            if len(ended):
                self._pending.update({int(i): _row(obs, i) for i in ended})
                obs = self._splice(obs, {int(i): info["final_obs"][i] for i in ended})
        self._last_obs = obs
        out = self._obs_td(obs)
        out.set(
            "reward",
            torch.as_tensor(np.asarray(reward, dtype=self._reward_dtype))
            .reshape(*self.batch_size, 1)
            .to(self.device),
        )
        term_t, trunc_t = self._flag(term), self._flag(trunc)
        out.set("terminated", term_t)
        out.set("truncated", trunc_t)
        out.set("done", term_t | trunc_t)
        return out

    def _splice(self, obs: Any, rows: dict[int, Any]) -> Any:
        """A copy of batched ``obs`` with some rows replaced."""
        if isinstance(obs, dict):
            return {k: self._splice(v, {i: r[k] for i, r in rows.items()}) for k, v in obs.items()}
        obs = np.array(obs, copy=True)
        for i, r in rows.items():
            obs[i] = r
        return obs

    def _set_seed(self, seed: int | None) -> None:
        self._seed_next = seed
        if seed is not None:
            self._env.action_space.seed(seed)

    # ------------------------------------------------------------ extras
    @property
    def gymnasium_env(self) -> Any:
        """The underlying gymnasium env or vector env."""
        return self._env

    def render(self) -> Any:
        """Render with the gymnasium env's own ``render`` (set ``render_mode`` at build)."""
        return self._env.render()

    def close(self) -> None:
        self._env.close()
        super().close()


def _row(obs: Any, i: int) -> Any:
    if isinstance(obs, dict):
        return {k: _row(v, i) for k, v in obs.items()}
    return np.array(obs[i], copy=True)
