"""Trained group policies as standalone artifacts: ``torch.export`` (``.pt2``) and ONNX.

A group's policy in marl reads and writes a TensorDict. For deployment it becomes
a function of plain tensors: the group's observation (and action mask, where the
env has one) in, the deterministic action out, batched over a leading dimension of
any size. :func:`export_policies` writes one artifact per group and format, plus a
``manifest.json`` that names each input, its shape and dtype, and the action.

The artifacts need neither marl nor tensordict: a ``.pt2`` file loads with
``torch.export.load`` alone, an ``.onnx`` file runs in ``onnxruntime`` (no torch at
all). Every export is checked before it is kept: the artifact and the eager policy
must choose the same actions on ``check_samples`` random observations (1,000 by
default), or :class:`ExportMismatchError` names the group, the format and the
disagreement.

Examples:
    >>> import torch
    >>> from marl.algorithms import Algorithm
    >>> from marl.export import tensor_policy
    >>> from marl.testing import MultiAgentFakeEnv
    >>> algo = Algorithm("ppo").build(MultiAgentFakeEnv(num_envs=2))
    >>> policy = tensor_policy(algo, "walker")
    >>> [(i.name, i.shape) for i in policy.signature.inputs]
    [('observation', (2, 6))]
    >>> policy(torch.zeros(5, 2, 6)).shape  # 5 observations of the walker group's 2 agents
    torch.Size([5, 2, 2])

    ``export_policies(algo, "exported")`` writes ``exported/walker.pt2``,
    ``exported/walker.onnx``, the same for ``picker``, and ``exported/manifest.json``.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
from tensordict import TensorDict
from tensordict.nn import InteractionType, TensorDictModuleBase, set_interaction_type
from tensordict.utils import NestedKey
from torch import nn

from marl.algorithms import Algorithm, is_recurrent
from marl.extras import require
from marl.specs import Bounded, Categorical, Composite, OneHot

__all__ = [
    "FORMATS",
    "MANIFEST_FILENAME",
    "ExportMismatchError",
    "PolicyInput",
    "PolicySignature",
    "TensorPolicy",
    "export_policies",
    "load_manifest",
    "random_inputs",
    "tensor_policy",
]

FORMATS = ("pt2", "onnx")
"""``pt2``: a ``torch.export`` program (``torch.export.load``); ``onnx``: an ONNX model."""
MANIFEST_FILENAME = "manifest.json"


class ExportMismatchError(RuntimeError):
    """An exported policy chose other actions than the eager policy it came from."""


@dataclass(frozen=True)
class PolicyInput:
    """One input of an exported policy.

    Attributes:
        name: the input's name in the ONNX model (the last part of ``key``).
        key: the TensorDict key the policy reads (``("agents", "observation")``).
        shape: the shape of one row, without the leading batch dimension
            (``(n_agents, *features)`` for a group).
        dtype: the torch dtype's name (``"float32"``, ``"bool"``, ...).
    """

    name: str
    key: tuple[str, ...]
    shape: tuple[int, ...]
    dtype: str


@dataclass(frozen=True)
class PolicySignature:
    """What an exported group policy takes and returns.

    Attributes:
        group: the group's label (``"root"`` for a single-agent env).
        algorithm: the algorithm that trained it.
        inputs: the inputs, in call order.
        action_shape: the shape of one row of actions, without the batch dimension.
        action_dtype: the action's dtype name.
        action_space: ``"continuous"`` or ``"discrete"``.
        action_encoding: ``"box"`` (continuous values), ``"index"`` (integer action
            indices) or ``"one_hot"``.
        action_low: lower bounds of a bounded continuous action (one row), else ``None``.
        action_high: upper bounds, likewise.
        n_actions: the number of discrete actions, else ``None``.
    """

    group: str
    algorithm: str
    inputs: tuple[PolicyInput, ...]
    action_shape: tuple[int, ...]
    action_dtype: str
    action_space: str
    action_encoding: str
    action_low: list[Any] | None = None
    action_high: list[Any] | None = None
    n_actions: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (what ``manifest.json`` holds per group)."""
        out = asdict(self)
        out["inputs"] = [dict(asdict(i), key=list(i.key)) for i in self.inputs]
        return out


class TensorPolicy(nn.Module):
    """A group's deterministic policy as a function of plain tensors.

    ``policy(*inputs)`` takes the tensors of :attr:`signature` ``.inputs``, each
    ``[batch, *shape]``, and returns the group's actions ``[batch, *action_shape]``:
    the mode of the policy's distribution (the greedy, legal action for Q-learning),
    with no exploration.

    Args:
        module: the group learner's policy module (it reads ``in_keys``).
        signature: its inputs and action.
        action_key: the key the module writes the action to.
    """

    def __init__(
        self, module: TensorDictModuleBase, signature: PolicySignature, action_key: NestedKey
    ) -> None:
        super().__init__()
        self.module = module
        self.signature = signature
        self._keys = [i.key if len(i.key) > 1 else i.key[0] for i in signature.inputs]
        self._action_key = action_key

    def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
        if len(inputs) != len(self._keys):
            names = [i.name for i in self.signature.inputs]
            raise TypeError(f"expected {len(names)} inputs {names}, got {len(inputs)}")
        td = TensorDict(dict(zip(self._keys, inputs)), batch_size=inputs[0].shape[:1])
        with set_interaction_type(InteractionType.DETERMINISTIC):
            return self.module(td).get(self._action_key)


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _action_description(spec: Any, batch_dims: int) -> dict[str, Any]:
    shape = tuple(spec.shape[batch_dims:])
    out: dict[str, Any] = {"action_shape": shape, "action_dtype": _dtype_name(spec.dtype)}
    if isinstance(spec, OneHot):
        out.update(action_space="discrete", action_encoding="one_hot", n_actions=spec.n)
    elif isinstance(spec, Categorical):
        out.update(action_space="discrete", action_encoding="index", n_actions=spec.n)
    else:
        out.update(action_space="continuous", action_encoding="box")
        if isinstance(spec, Bounded):
            index = (0,) * batch_dims
            out.update(action_low=spec.low[index].tolist(), action_high=spec.high[index].tolist())
    return out


def tensor_policy(algorithm: Algorithm, group: str | None = None) -> TensorPolicy:
    """The deterministic, tensor-in tensor-out policy of one group of a built algorithm.

    Args:
        algorithm: a built :class:`~marl.algorithms.Algorithm`.
        group: the group's label (see ``algorithm.learners``); may be omitted when
            there is one group.

    Raises:
        KeyError: when ``group`` is not one of the algorithm's groups.
        ValueError: when ``group`` is omitted and there are several, or when the
            policy reads something that is not an observation of the env (a
            recurrent state, for instance), which a stateless artifact cannot carry.
    """
    learners = dict(algorithm.group_learners())
    if group is None:
        if len(learners) != 1:
            raise ValueError(f"the algorithm has groups {sorted(learners)}: name one")
        group = next(iter(learners))
    if group not in learners:
        raise KeyError(f"no group {group!r}; the algorithm's groups are {sorted(learners)}")
    learner = learners[group]
    if is_recurrent(learner.policy):
        raise ValueError(
            f"the {group!r} policy is recurrent ({learner.config.network}): its action depends "
            "on a hidden state carried from step to step and reset at episode starts, which a "
            "stateless artifact (observation in, action out) cannot carry; train with "
            "model.network=mlp to export"
        )
    info = learner.info
    observations: Composite = info.env_observation_spec
    inputs = []
    for key in learner.policy.in_keys:
        key_tuple = (key,) if isinstance(key, str) else tuple(key)
        spec = observations.get(key_tuple) if observations is not None else None
        if spec is None or isinstance(spec, Composite):
            raise ValueError(
                f"the {group!r} policy reads {key_tuple}, which is not an observation of "
                "the env: only policies of observations (and action masks) export to a "
                f"stateless artifact; its inputs are {list(learner.policy.in_keys)}"
            )
        inputs.append(
            PolicyInput(
                name=key_tuple[-1],
                key=key_tuple,
                shape=tuple(spec.shape[info.batch_dims :]),
                dtype=_dtype_name(spec.dtype),
            )
        )
    names = [i.name for i in inputs]
    if len(set(names)) != len(names):
        raise ValueError(f"the {group!r} policy's inputs have clashing names {names}")
    action_key: NestedKey = "action" if info.name is None else (info.name, "action")
    signature = PolicySignature(
        group=group,
        algorithm=learner.algorithm,
        inputs=tuple(inputs),
        **_action_description(info.action_spec, info.batch_dims),
    )
    return TensorPolicy(learner.policy, signature, action_key).eval()


def random_inputs(
    signature: PolicySignature, n: int, generator: torch.Generator | None = None
) -> tuple[torch.Tensor, ...]:
    """``n`` random rows of every input: standard normal observations, and action
    masks (bool inputs named ``action_mask``) with at least one legal action per row.

    Examples:
        >>> sig = PolicySignature("g", "qmix", (PolicyInput("observation", ("g", "observation"),
        ...     (3, 4), "float32"), PolicyInput("action_mask", ("g", "action_mask"), (3, 5),
        ...     "bool")), (3,), "int64", "discrete", "index", n_actions=5)
        >>> obs, mask = random_inputs(sig, 100, torch.Generator().manual_seed(0))
        >>> obs.shape, bool(mask.any(-1).all())
        (torch.Size([100, 3, 4]), True)
    """
    out = []
    for spec in signature.inputs:
        dtype = getattr(torch, spec.dtype)
        shape = (n, *spec.shape)
        if dtype == torch.bool:
            x = torch.rand(shape, generator=generator) < 0.5
            if spec.name == "action_mask" and spec.shape:
                # a row with no legal action is not an observation any env produces
                pick = torch.randint(0, spec.shape[-1], shape[:-1], generator=generator)
                x.scatter_(-1, pick.unsqueeze(-1), True)
        elif dtype.is_floating_point:
            x = torch.randn(shape, generator=generator).to(dtype)
        else:
            x = torch.randint(0, 2, shape, generator=generator).to(dtype)
        out.append(x)
    return tuple(out)


@contextlib.contextmanager
def _tracing() -> Iterator[None]:
    """No distribution argument checks (a host-side ``.all()`` that tracing cannot keep),
    no parameter gradients, and the exporters' chatter kept off the console."""
    validate = torch.distributions.Distribution._validate_args
    torch.distributions.Distribution.set_default_validate_args(False)
    # the ONNX exporter logs every optimization pass at INFO (marl-run logs INFO), and
    # warns about torchvision ops it cannot register; what matters is checked after
    loggers = [logging.getLogger(name) for name in ("onnxscript", "onnx_ir", "torch.onnx")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.ERROR)
    try:
        with (
            torch.no_grad(),
            warnings.catch_warnings(),
            contextlib.redirect_stdout(io.StringIO()),
        ):
            warnings.simplefilter("ignore")
            yield
    finally:
        torch.distributions.Distribution.set_default_validate_args(validate)
        for lg, level in zip(loggers, levels):
            lg.setLevel(level)


def _example(signature: PolicySignature) -> tuple[torch.Tensor, ...]:
    # A batch of 2: torch.export specializes a dimension of size 1 to a constant.
    return random_inputs(signature, 2, torch.Generator().manual_seed(0))


def _dynamic_shapes(signature: PolicySignature) -> tuple[tuple[dict[int, Any], ...]]:
    batch = torch.export.Dim("batch", min=1)
    return (tuple({0: batch} for _ in signature.inputs),)


def _export_pt2(policy: TensorPolicy, path: Path) -> Any:
    with _tracing():
        program = torch.export.export(
            policy, _example(policy.signature), dynamic_shapes=_dynamic_shapes(policy.signature)
        )
    torch.export.save(program, str(path))
    return program.module()


def _require_onnx() -> Any:
    what = "onnx, onnxscript and onnxruntime"
    for module in ("onnx", "onnxscript"):
        require(module, "ONNX export", "export", what=what)
    return require("onnxruntime", "ONNX export", "export", what=what)


def _export_onnx(policy: TensorPolicy, path: Path) -> Any:
    ort = _require_onnx()
    with _tracing():
        torch.onnx.export(
            policy,
            _example(policy.signature),
            str(path),
            dynamo=True,
            dynamic_shapes=_dynamic_shapes(policy.signature),
            input_names=[i.name for i in policy.signature.inputs],
            output_names=["action"],
            external_data=False,  # one self-contained file
            verbose=False,
        )
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])

    def run(*inputs: torch.Tensor) -> torch.Tensor:
        feed = {i.name: x.numpy() for i, x in zip(policy.signature.inputs, inputs)}
        return torch.from_numpy(session.run(["action"], feed)[0])

    return run


def _check(
    policy: TensorPolicy, exported: Any, fmt: str, samples: int, generator: torch.Generator
) -> None:
    inputs = random_inputs(policy.signature, samples, generator)
    with _tracing():
        expected = policy(*inputs)
        got = exported(*inputs)
    where = f"group {policy.signature.group!r}, {fmt}"
    if got.shape != expected.shape or got.dtype != expected.dtype:
        raise ExportMismatchError(
            f"{where}: the artifact returns {got.dtype} {tuple(got.shape)}, the policy "
            f"{expected.dtype} {tuple(expected.shape)}"
        )
    if expected.dtype.is_floating_point and policy.signature.action_encoding == "box":
        close = torch.isclose(got, expected, rtol=1e-4, atol=1e-5)
        bad = int((~close).reshape(samples, -1).any(1).sum())
        if bad:
            err = float((got - expected).abs().max())
            raise ExportMismatchError(
                f"{where}: {bad} of {samples} random observations give other actions "
                f"(largest difference {err:.3g})"
            )
    else:
        bad = int((got != expected).reshape(samples, -1).any(1).sum())
        if bad:
            raise ExportMismatchError(
                f"{where}: {bad} of {samples} random observations give other discrete actions"
            )


def export_policies(
    algorithm: Algorithm,
    folder: str | Path,
    formats: Sequence[str] = FORMATS,
    groups: Sequence[str] | None = None,
    check_samples: int = 1000,
    seed: int = 0,
) -> dict[str, dict[str, Path]]:
    """Export each group's deterministic policy, check it, and write a manifest.

    Args:
        algorithm: a built (usually trained) :class:`~marl.algorithms.Algorithm`.
        folder: where to write ``<group>.pt2``, ``<group>.onnx`` and ``manifest.json``
            (created if missing; existing artifacts of the same groups are replaced).
        formats: any of :data:`FORMATS`.
        groups: the groups to export (default: all).
        check_samples: random observations on which the artifact must choose the
            eager policy's actions (``0`` skips the check).
        seed: seeds those observations.

    Returns:
        ``{group: {format: path}}``.

    Raises:
        ValueError: an unknown format, or a policy that cannot be exported
            (see :func:`tensor_policy`).
        ImportError: ONNX requested without ``onnx``/``onnxscript``/``onnxruntime``.
        ExportMismatchError: an artifact disagrees with its policy.
    """
    unknown = sorted(set(formats) - set(FORMATS))
    if unknown or not formats:
        raise ValueError(f"export formats must be among {list(FORMATS)}, got {list(formats)}")
    if "onnx" in formats:
        _require_onnx()
    labels = [label for label, _ in algorithm.group_learners()]
    chosen = list(labels if groups is None else groups)
    missing = [g for g in chosen if g not in labels]
    if missing:
        raise KeyError(f"no group(s) {missing}; the algorithm's groups are {labels}")
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    generator = torch.Generator().manual_seed(seed)
    written: dict[str, dict[str, Path]] = {}
    manifest: dict[str, Any] = {"formats": list(formats), "groups": {}}
    for group in chosen:
        policy = tensor_policy(algorithm, group)
        written[group] = {}
        for fmt in formats:
            path = folder / f"{group}.{fmt}"
            exporter = _export_pt2 if fmt == "pt2" else _export_onnx
            exported = exporter(policy, path)
            if check_samples:
                _check(policy, exported, fmt, check_samples, generator)
            written[group][fmt] = path
        manifest["groups"][group] = dict(
            policy.signature.to_dict(),
            files={fmt: p.name for fmt, p in written[group].items()},
            checked_on=check_samples,
        )
    manifest["torch"] = torch.__version__
    (folder / MANIFEST_FILENAME).write_text(json.dumps(manifest, indent=2) + "\n")
    return written


def load_manifest(folder: str | Path) -> dict[str, Any]:
    """The ``manifest.json`` of an export folder (see :func:`export_policies`).

    Raises:
        FileNotFoundError: when the folder holds no manifest.
    """
    path = Path(folder) / MANIFEST_FILENAME
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found: export with marl.export.export_policies")
    return json.loads(path.read_text())
