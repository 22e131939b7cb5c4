"""`RwareEnv`: the multi-robot warehouse (the ``rware`` package), agents stacked.

Robots fetch requested shelves, carry them to the goal cells and bring them
back. See :class:`RwareEnv`.
"""

from __future__ import annotations

from typing import Any

from marl.envs.libs._tuple_agents import TupleAgentsEnv

__all__ = ["RwareEnv"]

_REWARD_TYPES = ("individual", "global", "two_stage")


class RwareEnv(TupleAgentsEnv):
    """A multi-robot warehouse env (``rware`` 2.x), unbatched.

    Keys, with the default single group ``"agents"`` of ``n`` robots:

    - ``("agents", "observation")`` ``[n, obs]`` float32: the flattened
      observation of the robot and its sensor range (71 with range 1);
    - ``("agents", "action")`` ``[n]`` (index) or ``[n, 5]`` (one-hot): NOOP,
      FORWARD, LEFT, RIGHT, TOGGLE_LOAD. RWARE has no action masks;
    - ``("next", "agents", "reward")`` ``[n, 1]``: 1 for a requested shelf
      delivered, per robot (``reward_type="individual"``, the registered
      default), to every robot (``"global"``) or split between the delivery
      and the return (``"two_stage"``);
    - root ``done``/``terminated``/``truncated`` ``[1]``: RWARE episodes only
      end on a step limit (``max_steps``, or ``max_inactivity_steps`` without a
      delivery), so an ended episode is ``truncated``, never ``terminated``.

    Args:
        env_id: a registered id, e.g. ``"rware-tiny-2ag-v2"``
            (``tiny``/``small``/``medium``/``large``; ``-easy``/``-hard``).
        env: an existing ``Warehouse`` (instead of ``env_id``).
        group_map: ``None`` (one group ``"agents"``), a constructor name, a dict
            or a ``GroupMap`` over ``agent_0 ... agent_{n-1}``.
        seed: optional seed, used at the next reset.
        reward_type: ``"individual"``, ``"global"`` or ``"two_stage"`` (the
            registered one when None).
        categorical_actions: actions as indices (True) or one-hot (False).
        device: device of the tensors.
        keep_float64: keep float64 rewards (False: float32).
        check_actions: check every action before the env sees it.
        **kwargs: ``Warehouse`` arguments replacing the registered ones
            (``max_steps``, ``max_inactivity_steps``, ``sensor_range``, ...).

    Raises:
        ImportError: naming ``pip install "marl[rware]"`` when the package is missing.
        ValueError: on an unknown id, argument or reward type.

    Examples:
        >>> env = RwareEnv("rware-tiny-2ag-v2", seed=0, max_steps=10)
        >>> td = env.rollout(4)
        >>> td["agents", "observation"].shape, td["next", "agents", "reward"].shape
        (torch.Size([4, 2, 71]), torch.Size([4, 2, 1]))
    """

    package = "rware"
    extra = "rware"
    example_id = "rware-tiny-2ag-v2"

    def __init__(
        self,
        env_id: str | None = None,
        env: Any = None,
        group_map: Any = None,
        seed: int | None = None,
        *,
        reward_type: str | None = None,
        categorical_actions: bool = True,
        device: Any = None,
        keep_float64: bool = False,
        check_actions: bool = False,
        **kwargs: Any,
    ) -> None:
        if reward_type is not None:
            if reward_type not in _REWARD_TYPES:
                raise ValueError(
                    f"reward_type must be one of {list(_REWARD_TYPES)}, got {reward_type!r}"
                )
            if env is not None:
                raise ValueError("reward_type= needs env_id=, not env=")
            rware = self._import_package()
            kwargs["reward_type"] = rware.RewardType[reward_type.upper()]
        super().__init__(
            env_id,
            env,
            group_map,
            seed,
            categorical_actions=categorical_actions,
            device=device,
            keep_float64=keep_float64,
            check_actions=check_actions,
            **kwargs,
        )

    def _time_limit_reached(self) -> bool:
        return True

    @property
    def rware_env(self) -> Any:
        """The underlying ``Warehouse``."""
        return self._env
