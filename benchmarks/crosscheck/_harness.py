"""Shared machinery of the TorchRL cross-check: tolerances, the result table, parameter pairing.

Runs in the cross-check venv (torch 2.14.1, torchrl 0.14, tensordict 0.14), never in marl's.
Each check builds marl's networks once, hands TorchRL deep copies, then overwrites every
TorchRL parameter (online and target) with marl's values, so both losses see the same
parameters. Gradients are taken with ``torch.autograd.grad`` per loss term, so nothing
accumulates in ``.grad`` and each term's gradient is compared on its own.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import torch
from torch import nn

TOL = 1e-5


def install_tensordict_shim() -> None:
    """Make ``marl.modules`` importable with tensordict 0.14 (TorchRL 0.14 pins it below 0.15).

    marl imports ``tensordict.nn.interaction_type``, which tensordict 0.14 exposes only as
    ``tensordict.nn.probabilistic.interaction_type``. Nothing of marl changes; the alias
    exists in this process only.
    """
    import tensordict.nn as tdnn

    if not hasattr(tdnn, "interaction_type"):
        from tensordict.nn.probabilistic import interaction_type

        tdnn.interaction_type = interaction_type


# -- differences ---------------------------------------------------------------------


@dataclass(frozen=True)
class Difference:
    """A place where marl deliberately differs from TorchRL, and how the check aligns it."""

    key: str
    loss: str
    what: str
    marl: str
    torchrl: str
    reason: str
    aligned_by: str


# -- comparing -----------------------------------------------------------------------


def diff(a: torch.Tensor, b: torch.Tensor) -> tuple[float, float, float]:
    """``(max |a - b|, max |a - b| / max |b|, max |b|)`` over all elements (b: TorchRL's)."""
    a = torch.as_tensor(a).detach().double().flatten()
    b = torch.as_tensor(b).detach().double().flatten()
    if a.numel() != b.numel():
        raise ValueError(f"element counts differ: marl {a.numel()} vs torchrl {b.numel()}")
    if a.numel() == 0:
        return 0.0, 0.0, 0.0
    both_inf = torch.isinf(a) & torch.isinf(b) & (torch.sign(a) == torch.sign(b))
    d = torch.where(both_inf, torch.zeros_like(a), (a - b).abs())
    max_abs = float(d.max()) if not torch.isnan(d).any() else math.inf
    scale = float(b.abs().max())
    max_rel = max_abs / scale if scale > 0 else (0.0 if max_abs == 0 else math.inf)
    return max_abs, max_rel, scale


def within_tol(max_abs: float, scale: float) -> bool:
    """Absolute 1e-5, relative to the TorchRL magnitude when that is above 1."""
    return math.isfinite(max_abs) and max_abs <= TOL * max(1.0, scale)


@dataclass
class Row:
    loss: str
    case: str
    term: str
    max_abs: float
    max_rel: float
    status: str
    note: str = ""


@dataclass
class Report:
    rows: list[Row] = field(default_factory=list)
    differences: dict[str, Difference] = field(default_factory=dict)

    def note_difference(self, d: Difference) -> None:
        self.differences[d.key] = d

    def add(
        self,
        loss: str,
        case: str,
        term: str,
        a: torch.Tensor | None,
        b: torch.Tensor | None,
        expected: str | None = None,
        note: str = "",
    ) -> Row:
        """Compare one quantity. ``expected`` names the ``Difference`` that explains a mismatch.

        Status: ``ok`` (agrees), ``diff:<key>`` (differs, explained), ``FAIL`` (differs,
        unexplained), ``STALE:<key>`` (was expected to differ but agrees: the explanation is
        out of date, which also fails the run).
        """
        if a is None or b is None:
            missing = "marl" if a is None else "torchrl"
            row = Row(loss, case, term, math.nan, math.nan, "FAIL", f"no {missing} value")
            self.rows.append(row)
            return row
        try:
            max_abs, max_rel, scale = diff(a, b)
        except ValueError as err:
            status = f"diff:{expected}" if expected else "FAIL"
            row = Row(loss, case, term, math.nan, math.nan, status, str(err))
            self.rows.append(row)
            return row
        ok = within_tol(max_abs, scale)
        if expected is None:
            status = "ok" if ok else "FAIL"
        else:
            status = f"STALE:{expected}" if ok else f"diff:{expected}"
        row = Row(loss, case, term, max_abs, max_rel, status, note)
        self.rows.append(row)
        return row

    @property
    def failed(self) -> list[Row]:
        return [r for r in self.rows if r.status == "FAIL" or r.status.startswith("STALE")]


# -- parameters ----------------------------------------------------------------------


def _flat_td(params) -> dict[str, torch.Tensor]:
    out = {}
    for key, value in params.items(True, True):
        name = ".".join(key) if isinstance(key, tuple) else key
        out[name] = value
    return out


def _named(module: nn.Module) -> dict[str, torch.Tensor]:
    return dict(module.named_parameters())


@dataclass
class ParamPair:
    """One TorchRL tensor and the marl tensor(s) it holds (stacked when TorchRL vmaps N nets)."""

    name: str
    marl: list[torch.Tensor]
    torchrl: torch.Tensor

    def marl_value(self) -> torch.Tensor:
        return self.marl[0] if len(self.marl) == 1 else torch.stack(self.marl)


def pair_module(
    name: str, marl_modules: nn.Module | Sequence[nn.Module], torchrl_params, strip: str = ""
) -> list[ParamPair]:
    """Pair ``loss.<x>_params`` (a TensorDict of TorchRL) with marl module(s) of the same shape.

    ``strip`` is a prefix of TorchRL's names that marl's lack (TorchRL wraps a Q-network in a
    ``QValueModule`` sequence, a mixer in a ``TensorDictModule``).
    """
    single = isinstance(marl_modules, nn.Module) and not isinstance(marl_modules, nn.ModuleList)
    mods = [marl_modules] if single else list(marl_modules)
    named = [_named(m) for m in mods]
    pairs = []
    flat = _flat_td(torchrl_params)
    for tr_key, tensor in flat.items():
        if not tr_key.startswith(strip):
            raise KeyError(f"{name}: TorchRL parameter {tr_key!r} lacks the prefix {strip!r}")
        key = tr_key[len(strip) :]
        if not all(key in n for n in named):
            raise KeyError(f"{name}: TorchRL parameter {key!r} has no marl counterpart")
        pairs.append(ParamPair(f"{name}.{key}", [n[key] for n in named], tensor))
    missing = set(named[0]) - {k[len(strip) :] for k in flat}
    if missing:
        raise KeyError(f"{name}: marl parameters {sorted(missing)} have no TorchRL counterpart")
    return pairs


def sync(pairs: Iterable[ParamPair]) -> None:
    """Copy marl's values into TorchRL's tensors."""
    with torch.no_grad():
        for p in pairs:
            p.torchrl.data.copy_(p.marl_value())


def perturb_targets(marl_loss: nn.Module, scale: float = 0.05) -> None:
    """Move marl's target networks away from the online ones, so that a loss using the
    wrong set of parameters in its bootstrap cannot agree by accident."""
    with torch.no_grad():
        for _online, target in marl_loss.target_pairs():
            for p in target.parameters():
                p.add_(scale * torch.randn_like(p))


def grads(term: torch.Tensor, tensors: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """d term / d tensor for each tensor; zeros where the term does not depend on it."""
    leaves = [t for t in tensors]
    if not term.requires_grad:
        return [torch.zeros_like(t) for t in leaves]
    wanted = [t.requires_grad for t in leaves]
    idx = [i for i, w in enumerate(wanted) if w]
    got = torch.autograd.grad(term, [leaves[i] for i in idx], retain_graph=True, allow_unused=True)
    out = [torch.zeros_like(t) for t in leaves]
    for i, g in zip(idx, got):
        if g is not None:
            out[i] = g
    return out


def compare_grads(
    report: Report,
    loss: str,
    case: str,
    term: str,
    marl_term: torch.Tensor,
    tr_term: torch.Tensor,
    pairs: Sequence[ParamPair],
    expected: str | None = None,
    verbose: bool = False,
) -> None:
    """One row: the largest gradient difference over every parameter (named in the note)."""
    marl_flat = [t for p in pairs for t in p.marl]
    g_marl = grads(marl_term, marl_flat)
    g_tr = grads(tr_term, [p.torchrl for p in pairs])
    worst, worst_name, worst_scale, any_grad = -1.0, "", 0.0, False
    i = 0
    g_marl_paired = []
    for p in pairs:
        n = len(p.marl)
        gm = g_marl[i] if n == 1 else torch.stack(g_marl[i : i + n])
        i += n
        g_marl_paired.append(gm)
    for p, gm, gt in zip(pairs, g_marl_paired, g_tr):
        max_abs, _, scale = diff(gm, gt)
        any_grad = any_grad or bool(gt.abs().max() > 0) or bool(gm.abs().max() > 0)
        if verbose:  # a parameter the term does not reach agrees whatever the difference
            reached = bool(gt.abs().max() > 0) or bool(gm.abs().max() > 0)
            report.add(loss, case, f"  d{term}/d{p.name}", gm, gt, expected if reached else None)
        if max_abs / max(1.0, scale) > worst / max(1.0, worst_scale):
            worst, worst_name, worst_scale = max_abs, p.name, scale
    all_m = torch.cat([g.flatten() for g in g_marl_paired]) if pairs else torch.zeros(1)
    all_t = torch.cat([g.flatten() for g in g_tr]) if pairs else torch.zeros(1)
    g_max = float(all_t.abs().max()) if pairs else 0.0
    if not any_grad:
        note = f"{len(pairs)} tensors, no gradient on either side"
    elif worst > 0:
        note = f"{len(pairs)} tensors, max |g| {g_max:.1e}, worst {worst_name}"
    else:
        note = f"{len(pairs)} tensors, max |g| {g_max:.1e}, all equal"
    report.add(loss, case, f"grad {term}", all_m, all_t, expected, note)


def seeded(seed: int) -> Callable[[], None]:
    def reset() -> None:
        torch.manual_seed(seed)

    return reset


def compare_losses(
    report: Report,
    loss: str,
    case: str,
    out_marl,
    out_torchrl,
    terms: dict[str, str],
    pairs: Sequence[ParamPair],
    expected: dict[str, str] | None = None,
    verbose: bool = False,
) -> None:
    """Compare the mapped output terms, then the gradient of every ``loss_*`` term.

    Args:
        terms: marl term -> TorchRL term (the names differ for DQN/QMIX: ``loss``).
        expected: term (or ``"grad <term>"``) -> key of the ``Difference`` explaining it;
            a gradient inherits its term's entry unless it has its own.
    """
    expected = expected or {}
    for m, t in terms.items():
        label = m if m == t else f"{m} ~ {t}"
        report.add(
            loss, case, label, out_marl.get(m, None), out_torchrl.get(t, None), expected.get(m)
        )
    for m, t in terms.items():
        if not m.startswith("loss_"):
            continue
        exp = expected.get(f"grad {m}", expected.get(m))
        compare_grads(report, loss, case, m, out_marl[m], out_torchrl[t], pairs, exp, verbose)
