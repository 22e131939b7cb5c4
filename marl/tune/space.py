"""Search spaces of ``marl-tune``: a YAML file of ``marl-run`` overrides and distributions.

A space file::

    description: mappo on vmas/navigation, learning rate and entropy bonus
    overrides:                      # marl-run overrides that every member gets
      - task=vmas/navigation
      - algorithm=mappo
      - experiment.total_frames=60000
    space:                          # marl-run keys -> distributions
      algorithm.lr: {loguniform: [1.0e-5, 1.0e-3]}
      algorithm.entropy_coef: {choice: [0.0, 0.01]}
    tune:                           # TuneSettings fields (marl-tune's flags override them)
      scheduler: pbt
      members: 8
      interval: 12000

A key is any field of the config ``marl-run <overrides>`` composes: ``algorithm.*``,
``model.*``, ``experiment.*``, ``task_overrides.*``, ``seed``, and per group
``algorithm.groups.<group>.<field>`` when the overrides choose one algorithm per group
(``+algorithm@algorithm.groups.adversary=mappo``). Distributions: ``choice``,
``uniform``, ``loguniform``, ``randint`` (``[low, high)``).
"""

from __future__ import annotations

import dataclasses
import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

__all__ = [
    "DISTRIBUTIONS",
    "SCHEDULERS",
    "SPACES_DIR",
    "Distribution",
    "SearchSpace",
    "TuneSettings",
    "load_space",
]

SPACES_DIR = Path(__file__).resolve().parent / "spaces"
"""The spaces shipped with marl (``marl-tune navigation_mappo`` finds them by name)."""

DISTRIBUTIONS = ("choice", "uniform", "loguniform", "randint")
SCHEDULERS = ("pbt", "asha", "random")

# Population-based training copies weights between members: these must agree.
_PBT_FIXED_PREFIXES = ("task", "task_overrides", "model", "seed")
_PBT_FIXED_FIELDS = (
    "name",
    "num_envs",
    "frames_per_batch",
    "init_random_frames",
    "evaluation_deterministic",
    "total_frames",
)


@dataclass(frozen=True)
class Distribution:
    """One searched key: ``kind`` (see :data:`DISTRIBUTIONS`) over ``values``.

    Examples:
        >>> d = Distribution.parse("algorithm.lr", {"loguniform": [1e-4, 1e-2]})
        >>> d.kind, d.values
        ('loguniform', (0.0001, 0.01))
        >>> 1e-4 <= d.sample(random.Random(0)) <= 1e-2
        True
        >>> Distribution.parse("algorithm.lr", {"normal": [0, 1]})
        Traceback (most recent call last):
        ...
        ValueError: space: algorithm.lr: unknown distribution 'normal'; expected one of ['choice', 'uniform', 'loguniform', 'randint'], e.g. {loguniform: [1.0e-5, 1.0e-3]}
    """

    kind: str
    values: tuple[Any, ...]

    @classmethod
    def parse(cls, key: str, spec: Any) -> Distribution:
        """A distribution from its YAML form ``{kind: [args]}`` (a bare list means choice)."""
        if isinstance(spec, (list, tuple)):
            spec = {"choice": list(spec)}
        example = "{loguniform: [1.0e-5, 1.0e-3]}"
        if not isinstance(spec, Mapping) or len(spec) != 1:
            raise ValueError(
                f"space: {key}: expected one {{distribution: [args]}}, e.g. {example}, got {spec!r}"
            )
        ((kind, args),) = spec.items()
        if kind not in DISTRIBUTIONS:
            raise ValueError(
                f"space: {key}: unknown distribution {kind!r}; expected one of "
                f"{list(DISTRIBUTIONS)}, e.g. {example}"
            )
        if not isinstance(args, (list, tuple)) or not args:
            raise ValueError(f"space: {key}: {kind} needs a non-empty list, got {args!r}")
        if kind != "choice":
            numbers = all(isinstance(a, (int, float)) and not isinstance(a, bool) for a in args)
            if len(args) != 2 or not numbers or not args[0] < args[1]:
                raise ValueError(
                    f"space: {key}: {kind} needs [low, high] with low < high, got {args!r}"
                )
            if kind == "loguniform" and args[0] <= 0:
                raise ValueError(f"space: {key}: loguniform needs low > 0, got {args!r}")
            if kind == "randint" and not all(isinstance(a, int) for a in args):
                raise ValueError(f"space: {key}: randint needs integers [low, high), got {args!r}")
        return cls(kind, tuple(args))

    def sample(self, rng: random.Random) -> Any:
        """One value (Ray samples the real runs; this one checks the key's type)."""
        low, high = self.values[0], self.values[-1]
        if self.kind == "choice":
            return rng.choice(self.values)
        if self.kind == "uniform":
            return rng.uniform(low, high)
        if self.kind == "loguniform":
            return math.exp(rng.uniform(math.log(low), math.log(high)))
        return rng.randrange(low, high)

    def perturb(
        self,
        value: Any,
        rng: random.Random,
        factors: Sequence[float],
        resample_probability: float,
    ) -> Any:
        """PBT's explore of a copied value, as Ray Tune's PBT does it (the vectorized backend).

        A ``choice`` moves to a neighbouring value (clamped at the ends), a number is
        multiplied by one of ``factors`` (rounded for ``randint``); with probability
        ``resample_probability`` (or for a choice value not in the list) it is sampled anew.

        Examples:
            >>> d = Distribution("choice", (0.0, 0.01, 0.1))
            >>> d.perturb(0.01, random.Random(1), (1.2, 0.8), 0.0) in (0.0, 0.1)
            True
            >>> Distribution("loguniform", (1e-4, 1e-2)).perturb(1e-3, random.Random(0), (2.0,), 0.0)
            0.002
        """
        if self.kind == "choice":
            if rng.random() < resample_probability or value not in self.values:
                return rng.choice(self.values)
            index = self.values.index(value) + rng.choice((-1, 1))
            return self.values[min(max(index, 0), len(self.values) - 1)]
        if rng.random() < resample_probability:
            return self.sample(rng)
        new = value * rng.choice(list(factors))
        return round(new) if self.kind == "randint" else new

    def ray(self) -> Any:
        """The Ray Tune domain."""
        from ray import tune

        if self.kind == "choice":
            return tune.choice(list(self.values))
        if self.kind == "uniform":
            return tune.uniform(*self.values)
        if self.kind == "loguniform":
            return tune.loguniform(*self.values)
        return tune.randint(*self.values)


@dataclass
class TuneSettings:
    """How a tuning run searches (the ``tune:`` section of a space; marl-tune's flags).

    Examples:
        >>> TuneSettings(scheduler="pbt2").validate()
        Traceback (most recent call last):
        ...
        ValueError: tune.scheduler: unknown scheduler 'pbt2'; expected one of ['pbt', 'asha', 'random']
    """

    scheduler: str = "pbt"
    """``pbt`` (population-based training), ``asha`` (early stopping) or ``random``."""
    members: int = 8
    """Population size (PBT) or number of sampled configurations (ASHA, random)."""
    metric: str = "eval/episode_reward"
    """A logged scalar to maximize or minimize (reported every ``interval`` frames)."""
    mode: str = "max"
    """``max`` or ``min``."""
    interval: int | None = None
    """Frames between reports (each with an evaluation and a checkpoint): PBT's exploit
    interval, ASHA's rungs (``None``: ``experiment.evaluation_interval``)."""
    quantile_fraction: float = 0.25
    """PBT: the worst fraction of members copies the best fraction."""
    perturbation_factors: list[float] = field(default_factory=lambda: [1.2, 0.8])
    """PBT: a copied continuous value is multiplied by one of these."""
    resample_probability: float = 0.25
    """PBT: probability that a copied value is sampled anew instead of perturbed."""
    synch: bool = False
    """PBT: exploit in rounds, once every member reached the interval (members wait for the
    slowest and are restarted each round: slower), instead of as each member reports."""
    reduction_factor: int = 2
    """ASHA: keep 1 in ``reduction_factor`` configurations at each rung."""
    max_concurrent: int | None = None
    """Members trained at once (``None``: as many as the CPUs allow)."""
    cpus_per_member: float = 1.0
    """Ray CPUs reserved per member (0.5: two members share a core)."""
    gpus_per_member: float = 0.0
    """Ray GPUs reserved per member (with ``experiment=gpu`` in the overrides)."""
    seed: int = 0
    """Seeds the sampling of configurations and PBT's perturbations."""
    address: str | None = None
    """An existing Ray cluster (``auto``); ``None``: a local Ray instance."""

    def validate(self) -> TuneSettings:
        """Check every field; return ``self``."""
        from marl.experiment.config import check_types

        check_types(self, "tune")

        def need(ok: bool, name: str, expected: str) -> None:
            if not ok:
                raise ValueError(f"tune.{name}: expected {expected}, got {getattr(self, name)!r}")

        if self.scheduler not in SCHEDULERS:
            raise ValueError(
                f"tune.scheduler: unknown scheduler {self.scheduler!r}; expected one of "
                f"{list(SCHEDULERS)}"
            )
        need(self.members >= 1, "members", "an integer >= 1")
        need(self.mode in ("max", "min"), "mode", "'max' or 'min'")
        need(self.interval is None or self.interval >= 1, "interval", "None or an integer >= 1")
        need(0 < self.quantile_fraction <= 0.5, "quantile_fraction", "a fraction in (0, 0.5]")
        need(0 <= self.resample_probability <= 1, "resample_probability", "a probability")
        need(self.reduction_factor >= 2, "reduction_factor", "an integer >= 2")
        need(
            self.max_concurrent is None or self.max_concurrent >= 1,
            "max_concurrent",
            "None or an integer >= 1",
        )
        need(self.cpus_per_member > 0, "cpus_per_member", "> 0")
        need(self.gpus_per_member >= 0, "gpus_per_member", ">= 0")
        return self


@dataclass
class SearchSpace:
    """A parsed space file: base ``overrides``, searched ``keys`` and ``settings``.

    Examples:
        >>> space = SearchSpace.from_dict({
        ...     "overrides": ["task=vmas/navigation", "algorithm=mappo"],
        ...     "space": {"algorithm.lr": {"choice": [0.0, 3e-4]}},
        ...     "tune": {"members": 4}})
        >>> space.keys["algorithm.lr"].values, space.settings.members
        ((0.0, 0.0003), 4)
        >>> SearchSpace.from_dict({"space": {"algorithm.lrr": [1e-3]}}).check()
        Traceback (most recent call last):
        ...
        ValueError: space: unknown field 'algorithm.lrr': algorithm (mappo) has no field 'lrr'; valid: [...]
    """

    overrides: list[str] = field(default_factory=list)
    keys: dict[str, Distribution] = field(default_factory=dict)
    settings: TuneSettings = field(default_factory=TuneSettings)
    description: str = ""
    source: str = "<dict>"

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], source: str = "<dict>") -> SearchSpace:
        """Parse the YAML form (see the module docstring)."""
        if not isinstance(data, Mapping):
            raise ValueError(
                f"{source}: expected a mapping with overrides/space/tune, got {data!r}"
            )
        known = {"description", "overrides", "space", "tune"}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"{source}: unknown section(s) {unknown}; valid: {sorted(known)}")
        overrides = data.get("overrides") or []
        if not isinstance(overrides, list) or not all(isinstance(o, str) for o in overrides):
            raise ValueError(
                f"{source}: overrides must be a list of marl-run overrides, got {overrides!r}"
            )
        space = data.get("space") or {}
        if not isinstance(space, Mapping) or not space:
            raise ValueError(
                f"{source}: space must map marl-run keys to distributions, got {space!r}"
            )
        from marl.experiment.config import config_from_dict

        settings = config_from_dict(TuneSettings, data.get("tune"), "tune")
        return cls(
            overrides=list(overrides),
            keys={str(k): Distribution.parse(str(k), v) for k, v in space.items()},
            settings=settings.validate(),
            description=str(data.get("description") or ""),
            source=source,
        )

    def with_settings(self, **changes: Any) -> SearchSpace:
        """A copy with these :class:`TuneSettings` fields changed (``None`` values ignored)."""
        from marl.experiment.config import config_from_dict

        merged = {
            **dataclasses.asdict(self.settings),
            **{k: v for k, v in changes.items() if v is not None},
        }
        settings = config_from_dict(TuneSettings, merged, "tune").validate()
        return dataclasses.replace(self, settings=settings)

    def check(self, extra_overrides: Sequence[str] = ()) -> Any:
        """Compose the base config and check every key and a sampled value of each.

        Returns:
            The composed base config (``marl-run <overrides>``).

        Raises:
            ValueError: naming an unknown key and the valid fields where it points, or
                a key that PBT cannot change between members.
        """
        from marl.experiment.cli import compose_config

        overrides = [*self.overrides, *extra_overrides]
        base = compose_config(overrides)
        for key in self.keys:
            _check_key(base, key)
            if self.settings.scheduler == "pbt":
                _check_pbt_key(key)
        sample = self.sample(random.Random(self.settings.seed))
        try:
            compose_config([*overrides, *override_strings(sample)])
        except Exception as err:  # hydra's type errors name the key and value
            raise ValueError(f"space: a sampled value does not fit its field: {err}") from None
        return base

    def sample(self, rng: random.Random) -> dict[str, Any]:
        """One configuration ``{key: value}``."""
        return {key: d.sample(rng) for key, d in self.keys.items()}


def _check_key(base: Any, key: str) -> None:
    parts = key.split(".")
    node, where = base, []
    for part in parts:
        keys = list(node.keys()) if hasattr(node, "keys") else []
        if part not in keys:
            here = ".".join(where) or "the config"
            if where[:1] == ["algorithm"] and "name" in keys:
                here += f" ({node['name']})"
            hint = ""
            if where == ["algorithm", "groups"]:
                hint = (
                    " (choose a group's algorithm in the overrides first, e.g. "
                    f"+algorithm@algorithm.groups.{part}=mappo)"
                )
            valid = (
                sorted(k for k in keys if k != "groups")
                if where[:1] == ["algorithm"]
                else sorted(keys)
            )
            if where == ["algorithm", "groups"]:
                valid = sorted(keys)
            raise ValueError(
                f"space: unknown field {key!r}: {here} has no field {part!r}; valid: {valid}{hint}"
            )
        node, where = node[part], [*where, part]
    if hasattr(node, "keys"):
        raise ValueError(
            f"space: {key!r} is a section, not a field; its fields: {sorted(node.keys())}"
        )


def _check_pbt_key(key: str) -> None:
    parts = key.split(".")
    if (
        parts[0] in _PBT_FIXED_PREFIXES
        or parts[-1] in _PBT_FIXED_FIELDS
        or "cells" in parts[-1]
        or (parts[-1].startswith("share_"))
    ):
        raise ValueError(
            f"space: {key!r} cannot be searched by pbt: a member that is cut loads a better "
            "member's networks, so every member must share the task, model, algorithm, seed "
            "and the shape of the training data. Search it with --scheduler asha or random, "
            "or fix it in the overrides."
        )


def override_strings(values: Mapping[str, Any]) -> list[str]:
    """``{key: value}`` as hydra overrides (``algorithm.lr=0.001``).

    Examples:
        >>> override_strings({"algorithm.lr": 0.001, "model.actor_cells": [64, 64]})
        ['algorithm.lr=0.001', 'model.actor_cells=[64,64]']
    """
    out = []
    for key, value in values.items():
        if isinstance(value, (list, tuple)):
            text = "[" + ",".join(str(v) for v in value) + "]"
        elif isinstance(value, bool):
            text = str(value).lower()
        elif isinstance(value, float):
            text = repr(value)
        elif value is None:
            text = "null"
        else:
            text = str(value)
        out.append(f"{key}={text}")
    return out


def load_space(name_or_path: str | Path) -> SearchSpace:
    """A space from a YAML file, or by name from :data:`SPACES_DIR` (``navigation_mappo``).

    Raises:
        FileNotFoundError: with the shipped spaces, when there is no such file.
    """
    path = Path(name_or_path).expanduser()
    if not path.exists():
        shipped = SPACES_DIR / f"{Path(str(name_or_path)).stem}.yaml"
        if shipped.exists() and "/" not in str(name_or_path):
            path = shipped
        else:
            names = sorted(p.stem for p in SPACES_DIR.glob("*.yaml"))
            raise FileNotFoundError(
                f"no search space {str(name_or_path)!r}: give a YAML file or one of {names}"
            )
    return SearchSpace.from_dict(yaml.safe_load(path.read_text()), source=str(path))
