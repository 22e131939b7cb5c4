"""Range checks of algorithm hyperparameters, by field name, when a config is read.

A learning rate of ``-1`` trains by gradient ascent to a run that says "complete", and
a ``nan`` one fails a batch later with an error about NaN actions: neither names the
setting. Every algorithm config is checked here when it is made
(:meth:`~marl.algorithms.AlgorithmSpec.make_config`), before anything is built, and a
bad value is refused with its key, what was expected and what was given.

The rules go by field name, so that one table covers every algorithm (and a new
algorithm whose fields reuse these names is checked too); every float, whatever its
name, must be finite.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

__all__ = ["RULES", "check_config_values"]

_POSITIVE = "a finite number > 0"
_NON_NEGATIVE = "a finite number >= 0"
_FRACTION = "a number in [0, 1]"
_COUNT = "an integer >= 1"
_FRAMES = "an integer >= 0"

RULES: dict[str, str] = {
    # a learning rate of 0 is allowed: it freezes a group (a fixed opponent, a baseline);
    # gnn_radius is checked where the network is built, with the group named
    **dict.fromkeys(("lr", "actor_lr", "critic_lr", "alpha_lr"), _NON_NEGATIVE),
    **dict.fromkeys(
        ("clip_epsilon", "alpha_init", "utd_ratio", "max_grad_norm", "hypernet_init_scale"),
        _POSITIVE,
    ),
    **dict.fromkeys(
        ("gamma", "lmbda", "eps_init", "eps_end", "priority_alpha", "priority_beta", "tau"),
        _FRACTION,
    ),
    **dict.fromkeys(
        (
            "entropy_coef",
            "critic_coef",
            "exploration_sigma",
            "exploration_sigma_end",
            "policy_noise",
            "noise_clip",
            "clip_value",
        ),
        _NON_NEGATIVE,
    ),
    **dict.fromkeys(
        ("learning_starts", "eps_annealing_frames", "exploration_annealing_frames"), _FRAMES
    ),
    **dict.fromkeys(
        (
            "batch_size",
            "buffer_size",
            "epochs",
            "minibatch_size",
            "embed_dim",
            "hypernet_embed",
            "mixing_embed_dim",
            "n_blocks",
            "n_heads",
            "num_qvalue_nets",
            "policy_delay",
            "sequence_length",
            "target_update_period",
        ),
        _COUNT,
    ),
    **dict.fromkeys(("cells", "actor_cells", "critic_cells"), "integers >= 1"),
}
"""Field name -> what its value must be (``None`` is always accepted where the field's
type allows it: it means "not set" or "the default")."""


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _ok(rule: str, value: Any) -> bool:
    if rule == "integers >= 1":
        return isinstance(value, (tuple, list)) and all(
            isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in value
        )
    if rule in (_COUNT, _FRAMES):
        low = 1 if rule == _COUNT else 0
        return isinstance(value, int) and not isinstance(value, bool) and value >= low
    if not _number(value) or not math.isfinite(value):
        return False
    if rule == _POSITIVE:
        return value > 0
    if rule == _NON_NEGATIVE:
        return value >= 0
    return 0 <= value <= 1  # _FRACTION


def check_config_values(config: Any, algorithm: str, prefix: str = "algorithm") -> None:
    """Refuse out-of-range hyperparameters of an algorithm config (a dataclass).

    Args:
        config: the config instance.
        algorithm: the algorithm's name, for the message.
        prefix: how the command line names the config (``algorithm`` or
            ``algorithm.groups.<group>``).

    Raises:
        ValueError: naming the key, what it must be and what it is.

    Examples:
        >>> from marl.algorithms import get_algorithm
        >>> check_config_values(get_algorithm("mappo").config_cls(), "mappo")
        >>> check_config_values(get_algorithm("mappo").config_cls(lr=-1.0), "mappo")
        Traceback (most recent call last):
        ...
        ValueError: algorithm.lr: mappo expects a finite number >= 0, got -1.0
        >>> check_config_values(get_algorithm("iql").config_cls(gamma=float("nan")), "iql")
        Traceback (most recent call last):
        ...
        ValueError: algorithm.gamma: iql expects a number in [0, 1], got nan
    """
    for field in dataclasses.fields(config):
        if not field.init:
            continue
        value = getattr(config, field.name)
        if value is None:
            continue
        rule = RULES.get(field.name)
        if rule is None:
            if isinstance(value, float) and not math.isfinite(value):
                rule = "a finite number"
            else:
                continue
        elif _ok(rule, value):
            continue
        raise ValueError(f"{prefix}.{field.name}: {algorithm} expects {rule}, got {value!r}")
