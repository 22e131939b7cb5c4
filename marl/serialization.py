"""Loading torch files as data: checkpoints that cannot run code when they are read.

``torch.load(weights_only=False)`` unpickles whatever a file names, so a downloaded
checkpoint or run folder can run any code. :func:`load` reads with
``weights_only=True``: tensors, numbers, strings and the plain containers only.

What marl writes needs nothing more: TensorDicts are saved as plain nested dicts of
tensors (:func:`td_to_plain`) and NumPy's RNG state as tensors and ints. Files
written before that (marl commit 2619eaf and earlier) also name NumPy arrays
(``numpy.ndarray``, ``numpy.dtype``, ``numpy._core.multiarray._reconstruct``), the
pickle of a TensorDict (``tensordict._td.TensorDict`` and
``tensordict._reductions._make_td``, which makes the object and sets its attributes,
no more than ``weights_only`` itself does for an allowed class) and the unset-slot
marker of a ``ListStorage``. Those, and only those, are allowed for such a file, for
the length of the one load (:func:`torch.serialization.safe_globals`); every
TensorDict read from it is then rebuilt from its tensors, so nothing of the pickled
object's own attributes survives. Nothing is registered for the whole process.

A file that names anything else is refused with :class:`UntrustedCheckpointError`,
naming the file and the globals. Load a file you trust (you wrote it) with
``trusted=True``, or with ``MARL_TRUST_CHECKPOINTS=1`` in the environment (which
reaches ``marl-run``, ``marl-tune`` and ``marl-bench``): that unpickles it in full.

A file that cannot be read raises :class:`CheckpointError` naming it and what is wrong
(empty, truncated, not a torch file).
"""

from __future__ import annotations

import io
import os
import pickle
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

__all__ = [
    "TRUST_ENV",
    "CheckpointError",
    "UntrustedCheckpointError",
    "load",
    "td_from_plain",
    "td_to_plain",
    "trusted_by_env",
]

TRUST_ENV = "MARL_TRUST_CHECKPOINTS"
"""With ``MARL_TRUST_CHECKPOINTS=1``, every checkpoint is unpickled in full (trusted files only)."""

_ZIP_MAGIC = b"PK\x03\x04"

# names of globals that files written by earlier marl versions hold, and that are data
_LEGACY_NUMPY = (
    "numpy.ndarray",
    "numpy.dtype",
    "numpy._core.multiarray._reconstruct",
    "numpy.core.multiarray._reconstruct",  # written with NumPy < 2
)
_LEGACY_TENSORDICT = ("tensordict._td.TensorDict", "tensordict._reductions._make_td")
LEGACY_GLOBALS = _LEGACY_NUMPY + _LEGACY_TENSORDICT
"""The globals allowed (for that one load) in a file written by an earlier marl. Modules
that pickled objects of their own pass those as ``load(..., extra_globals=...)`` (e.g.
:data:`marl.data.list_storage.LEGACY_GLOBALS`): this module imports none of marl's."""


class CheckpointError(ValueError):
    """A checkpoint that cannot be loaded: damaged, or (subclass) refused as unsafe.

    Attributes:
        path: the file.
        damaged: whether the file itself is damaged (empty, truncated, corrupt).
    """

    def __init__(
        self, message: str, path: str | os.PathLike[str] | None = None, *, damaged: bool = False
    ):
        super().__init__(message)
        self.path = Path(path) if path is not None else None
        self.damaged = damaged


class UntrustedCheckpointError(CheckpointError):
    """A file whose unpickling would call something other than data constructors."""


def trusted_by_env() -> bool:
    """Whether ``MARL_TRUST_CHECKPOINTS`` asks to unpickle every checkpoint in full."""
    return os.environ.get(TRUST_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def _legacy_objects(names: set[str]) -> list[Any]:
    out: list[Any] = []
    if names & set(_LEGACY_NUMPY):
        import numpy as np

        try:
            from numpy._core.multiarray import _reconstruct
        except ImportError:  # NumPy < 2
            from numpy.core.multiarray import _reconstruct  # type: ignore[no-redef]
        out += [np.ndarray, np.dtype]
        # the classes of the dtypes built from those pickles (BUILD needs them allowed)
        out += sorted({type(np.dtype(c)) for c in "?bhilqBHILQefdgFDG"}, key=str)
        out += [(_reconstruct, n) for n in _LEGACY_NUMPY[2:]]
    if names & set(_LEGACY_TENSORDICT):
        from tensordict._reductions import _make_td
        from tensordict._td import TensorDict

        out += [(TensorDict, _LEGACY_TENSORDICT[0]), (_make_td, _LEGACY_TENSORDICT[1])]
    return out


def _damaged(path: Path, what: str) -> CheckpointError:
    return CheckpointError(f"{path} cannot be loaded: {what}", path, damaged=True)


def _unsafe_globals(path: Path) -> set[str] | None:
    """The globals ``path``'s pickle names beyond torch's own ``weights_only`` allowlist
    (``None``: the pickle uses opcodes that the scan does not read; the load then decides).

    Raises:
        CheckpointError: when the file is empty, truncated or not a torch file.
    """
    from torch import _weights_only_unpickler as wo

    size = path.stat().st_size
    if size == 0:
        raise _damaged(
            path,
            "empty file (0 bytes): its write never finished (the disk filled up, or the "
            "process or machine stopped while saving)",
        )
    with open(path, "rb") as f:
        head = f.read(4)
    if head != _ZIP_MAGIC:
        raise _damaged(
            path,
            f"not a torch file (it does not start as torch.save's zip format; {size} bytes "
            "of something else, or a file damaged at its start)",
        )
    import zipfile

    try:
        with zipfile.ZipFile(path) as archive:
            names = [n for n in archive.namelist() if n.endswith("data.pkl")]
            if not names:
                raise _damaged(path, "not a torch checkpoint (a zip file without data.pkl)")
            data = archive.read(min(names, key=len))  # checks its CRC-32
    except CheckpointError:
        raise
    except (zipfile.BadZipFile, EOFError, OSError, ValueError) as err:
        what = "damaged" if "CRC" in str(err) else "truncated or not a torch file"
        raise _damaged(
            path,
            f"{what} ({size} bytes; {err}): its write was cut short (a full disk, a killed "
            "copy) or it was damaged since",
        ) from err
    try:
        found = wo.get_globals_in_pkl(io.BytesIO(data))
    except EOFError as err:
        raise _damaged(path, "truncated pickle (data.pkl ends early): the file is corrupt") from err
    except pickle.UnpicklingError:
        return None
    return set(found) - set(wo._get_allowed_globals())


def _first_line(err: BaseException) -> str:
    lines = [line for line in str(err).splitlines() if line.strip()]
    return lines[0].strip() if lines else type(err).__name__


def _refusal(path: Path, names: list[str], what: str) -> UntrustedCheckpointError:
    return UntrustedCheckpointError(
        f"refusing to load {what} {path}: its pickle names {', '.join(names)}, which is not "
        "data (unpickling it could run code). Files written by marl need nothing of the "
        "kind; load a file you trust (you wrote it yourself) with trusted=True, or with "
        f"{TRUST_ENV}=1 in the environment (marl-run, marl-tune, marl-bench).",
        path,
    )


def load(
    path: str | os.PathLike[str],
    *,
    trusted: bool = False,
    what: str = "checkpoint",
    extra_globals: Sequence[tuple[Any, str]] = (),
) -> Any:
    """``torch.load`` ``path`` to the CPU as data only (see the module docstring).

    Args:
        path: the file.
        trusted: unpickle it in full (only for a file you trust: it can run code).
            ``MARL_TRUST_CHECKPOINTS=1`` does the same for every load.
        what: how messages name the file.
        extra_globals: ``(object, "module.name")`` pairs that are data too (a caller's
            own objects that earlier versions pickled), allowed when the file names them.

    Raises:
        FileNotFoundError: naming the path.
        UntrustedCheckpointError: when it names globals that are not data.
        CheckpointError: when it is damaged.

    Examples:
        >>> import tempfile
        >>> path = Path(tempfile.mkdtemp()) / "x.pt"
        >>> torch.save({"step": 3, "w": torch.ones(2)}, path)
        >>> load(path)["step"]
        3
        >>> torch.save({"f": print}, path)
        >>> load(path)
        Traceback (most recent call last):
        ...
        marl.serialization.UntrustedCheckpointError: refusing to load checkpoint .../x.pt: its pickle names builtins.print, which is not data ...
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no {what} at {path}")
    trusted = trusted or trusted_by_env()
    found = _unsafe_globals(path)
    legacy: set[str] = set()
    if found is not None and not trusted:
        legacy = found & (set(LEGACY_GLOBALS) | {name for _, name in extra_globals})
        others = sorted(found - legacy)
        if others:
            raise _refusal(path, others, what)
    try:
        if trusted:
            state = torch.load(path, map_location="cpu", weights_only=False)
        else:
            extra = [pair for pair in extra_globals if pair[1] in legacy]
            with torch.serialization.safe_globals(_legacy_objects(legacy) + extra):
                state = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as err:
        text = str(err)
        import re

        names = re.findall(r"GLOBAL ([\w.]+)|got <class '([\w.]+)'>", text)
        if "Weights only load failed" in text and names:
            raise _refusal(path, sorted({a or b for a, b in names}), what) from err
        detail = text.split("WeightsUnpickler error:")[-1].strip().splitlines()[0]
        raise _damaged(path, f"corrupt pickle ({detail})") from err
    except (EOFError, RuntimeError) as err:
        raise _damaged(
            path, f"truncated or corrupt torch file (torch: {_first_line(err)})"
        ) from err
    return _rebuilt(state) if legacy & set(_LEGACY_TENSORDICT) else state


# ---------------------------------------------------------------- TensorDicts
def td_to_plain(td: Any) -> dict[str, Any]:
    """A TensorDict as ``{"batch_size": [...], "tensors": {key: tensor | nested}}``.

    What ``weights_only`` loads; :func:`td_from_plain` makes the TensorDict again.

    Raises:
        TypeError: on a leaf that is not a tensor (a checkpoint holds tensors only).

    Examples:
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"a": torch.ones(2, 3), "n": {"b": torch.zeros(2)}}, [2])
        >>> plain = td_to_plain(td)
        >>> plain["batch_size"], sorted(plain["tensors"])
        ([2], ['a', 'n'])
        >>> (td_from_plain(plain) == td).all()
        True
    """
    from tensordict import TensorDictBase

    tensors: dict[str, Any] = {}
    for key, value in td.items():
        if isinstance(value, TensorDictBase):
            tensors[key] = td_to_plain(value)
        elif type(value) is torch.Tensor or isinstance(value, torch.nn.Parameter):
            tensors[key] = value
        elif isinstance(value, torch.Tensor):  # a subclass (MemoryMappedTensor, ...)
            tensors[key] = value.as_subclass(torch.Tensor)
        else:
            raise TypeError(f"a checkpoint holds tensors only: {key!r} is a {type(value).__name__}")
    return {"batch_size": list(td.batch_size), "tensors": tensors}


def td_from_plain(plain: Mapping[str, Any]) -> Any:
    """The TensorDict of :func:`td_to_plain`."""
    from tensordict import TensorDict

    if not isinstance(plain, Mapping) or set(plain) != {"batch_size", "tensors"}:
        raise ValueError(f"not a saved TensorDict: {type(plain).__name__}")
    out = TensorDict({}, batch_size=[int(b) for b in plain["batch_size"]])
    for key, value in plain["tensors"].items():
        if isinstance(value, Mapping):
            out.set(key, td_from_plain(value))
        elif isinstance(value, torch.Tensor):
            out.set(key, value)
        else:
            raise ValueError(f"not a saved TensorDict: {key!r} is a {type(value).__name__}")
    return out


def _legacy_td(td: Any) -> Any:
    """A TensorDict unpickled from a legacy file, rebuilt from its tensors alone."""
    from tensordict import TensorDict

    fields = vars(td)
    leaves, batch_size = fields.get("_tensordict"), fields.get("_batch_size")
    if type(td) is not TensorDict or not isinstance(leaves, dict):
        raise ValueError(f"a saved TensorDict without its tensors: {type(td).__name__}")
    out = TensorDict({}, batch_size=[int(b) for b in batch_size])
    for key, value in leaves.items():
        if type(value) is TensorDict:
            out.set(key, _legacy_td(value))
        elif isinstance(value, torch.Tensor):
            out.set(key, value.as_subclass(torch.Tensor))
        else:
            raise ValueError(
                f"a saved TensorDict holds {type(value).__name__} at {key!r}, not a tensor"
            )
    return out


def _rebuilt(value: Any) -> Any:
    from tensordict import TensorDict

    if type(value) is TensorDict:
        return _legacy_td(value)
    if isinstance(value, dict):
        return type(value)((k, _rebuilt(v)) for k, v in value.items())
    if isinstance(value, list):
        return [_rebuilt(v) for v in value]
    if isinstance(value, tuple) and not hasattr(value, "_fields"):
        return tuple(_rebuilt(v) for v in value)
    return value
