"""Atomic file writes: a writer killed at any moment leaves the old file or the new one.

Every file marl replaces in place (checkpoints and ``latest.pt``, ``results.json`` and
the other report files, ``curves.png``, videos, a truncated ``scalars.csv``, ``run.json``,
a tuning member's reports) is written to a temporary file in the same folder, then
renamed over its final name: ``os.replace`` is atomic on POSIX, so a reader sees the
whole old file or the whole new one, never half of either. This module is the one place
that does it (``tests/test_layering.py`` checks that no other module calls
``os.replace``); it imports nothing of marl, so every layer may use it.

The temporary file of ``<folder>/<name>`` is ``<folder>/.<name>.tmp-<pid>`` (``-<k>``
appended when that name is taken, the suffix of ``<name>`` appended for
:func:`atomic_path` with ``keep_suffix``): a hidden file that :func:`is_temp_name`
recognises, so that a folder's owner can delete the temp files a
killed writer left (:class:`~marl.experiment.checkpoint.CheckpointManager` does).

- :func:`atomic_write`: a context manager yielding the temp file, open for writing.
- :func:`atomic_path`: the same, yielding the temp file's path, for a library that
  opens the file itself (matplotlib's ``savefig``, imageio's writers).
- :func:`atomic_write_text`, :func:`atomic_write_json`: a whole file at once.
- :func:`replace`: rename an existing file over another one (a hard link made under a
  temp name, a damaged file moved aside).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

__all__ = [
    "atomic_path",
    "atomic_write",
    "atomic_write_json",
    "atomic_write_text",
    "is_temp_name",
    "replace",
]

_TEMP_NAME = re.compile(r"^\..+\.tmp-\d+(?:-\d+)?(?:\.[A-Za-z0-9]+)?$")
"""The names of the temp files this module makes (``.<name>.tmp-<pid>[-<k>][<suffix>]``)."""


def is_temp_name(name: str) -> bool:
    """Whether ``name`` (a file name, no folder) is one of this module's temp files.

    Examples:
        >>> is_temp_name(".checkpoint_800.pt.tmp-4242"), is_temp_name(".curves.png.tmp-7.png")
        (True, True)
        >>> is_temp_name("checkpoint_800.pt"), is_temp_name(".hydra")
        (False, False)
    """
    return _TEMP_NAME.match(name) is not None


def _temp_name(path: str | os.PathLike[str], k: int = 0, *, keep_suffix: bool = False) -> Path:
    """The ``k``-th candidate temp name for ``path`` (the file is not created).

    Args:
        path: the file to be written.
        k: ``0`` for the first candidate, ``1, 2, ...`` for those used when it is taken.
        keep_suffix: end the name with ``path``'s suffix (for a library that infers the
            format from it).

    Examples:
        >>> import os
        >>> _temp_name("run/latest.pt").name == f".latest.pt.tmp-{os.getpid()}"
        True
        >>> _temp_name("run/curves.png", 2, keep_suffix=True).name == (
        ...     f".curves.png.tmp-{os.getpid()}-2.png")
        True
    """
    path = Path(path)
    suffix = path.suffix if keep_suffix else ""
    return path.with_name(f".{path.name}.tmp-{os.getpid()}{f'-{k}' if k else ''}{suffix}")


def _reserve(path: Path, keep_suffix: bool) -> tuple[Path, int]:
    """Create a fresh temp file next to ``path`` (``O_EXCL``: never one another writer
    holds); returns it and its open descriptor."""
    for k in itertools.count():
        tmp = _temp_name(path, k, keep_suffix=keep_suffix)
        try:
            return tmp, os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        except FileExistsError:
            continue
    raise AssertionError("unreachable")  # pragma: no cover


def replace(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> Path:
    """Rename ``src`` over ``dst`` atomically (``os.replace``); returns ``dst``.

    Both must be on one file system. ``dst``, if it exists, is replaced whole; a reader
    that opened it before keeps reading the old file.

    Examples:
        >>> import tempfile
        >>> folder = Path(tempfile.mkdtemp())
        >>> _ = (folder / "new").write_text("new"), (folder / "old").write_text("old")
        >>> replace(folder / "new", folder / "old").read_text()
        'new'
        >>> (folder / "new").exists()
        False

        Two links to one file: the source name goes, as with any other rename.

        >>> os.link(folder / "old", folder / "link")
        >>> replace(folder / "link", folder / "old").read_text(), (folder / "link").exists()
        ('new', False)
    """
    os.replace(src, dst)
    # POSIX rename() does nothing when both names are links to one file (latest.pt
    # linked again to the checkpoint it already names): src would stay behind
    with contextlib.suppress(FileNotFoundError):
        if os.path.samefile(src, dst):
            os.unlink(src)
    return Path(dst)


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextlib.contextmanager
def _replace_when_done(
    tmp: Path, path: Path, before_replace: Callable[[], Any] | None
) -> Iterator[None]:
    # The one ending of every atomic writer: the block completes the temp file, then
    # it goes over ``path``; any error (interrupts included) removes it instead.
    try:
        yield
        if before_replace is not None:
            before_replace()
        replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


@contextlib.contextmanager
def atomic_write(
    path: str | os.PathLike[str],
    mode: str = "wb",
    *,
    fsync: bool = True,
    encoding: str | None = None,
    newline: str | None = None,
    permissions: int | None = None,
    before_replace: Callable[[], Any] | None = None,
) -> Iterator[IO[Any]]:
    """Write ``path`` atomically: yields a temp file in the same folder, open in ``mode``.

    When the block ends normally the file is flushed (and ``fsync``-ed), closed, and
    renamed over ``path``. When the block (or the flush, or ``before_replace``) raises,
    the temp file is removed, ``path`` is left as it was, and the error goes on. A
    process killed in between leaves ``path`` as it was and the temp file behind, named
    so that :func:`is_temp_name` recognises it.

    Args:
        path: the file to write (its folder must exist).
        mode: ``"wb"`` (bytes) or ``"w"`` (text).
        fsync: flush the file to disk before the rename (so that a machine that loses
            power after it does not leave an empty file under the new name).
        encoding: text mode: as for :func:`open` (the locale's when ``None``).
        newline: text mode: as for :func:`open` (``""`` for :mod:`csv`).
        permissions: ``chmod`` the file to these bits (by default a new file's, as
            :func:`open` makes it: ``0o666`` less the umask).
        before_replace: called after the temp file is complete and closed, right
            before the rename (a test's fault point, for example).

    Raises:
        ValueError: for another ``mode``.

    Examples:
        >>> import tempfile
        >>> path = Path(tempfile.mkdtemp()) / "notes.txt"
        >>> with atomic_write(path, "w") as f:
        ...     _ = f.write("all or nothing")
        >>> path.read_text()
        'all or nothing'
        >>> with atomic_write(path, "w") as f:
        ...     _ = f.write("half a")
        ...     raise RuntimeError("interrupted")
        Traceback (most recent call last):
        ...
        RuntimeError: interrupted
        >>> path.read_text(), [p.name for p in path.parent.iterdir()]
        ('all or nothing', ['notes.txt'])
    """
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_write: mode must be 'w' or 'wb', got {mode!r}")
    path = Path(path)
    tmp, fd = _reserve(path, keep_suffix=False)
    with _replace_when_done(tmp, path, before_replace):
        try:
            if permissions is not None:
                os.fchmod(fd, permissions)
            f = os.fdopen(fd, mode, encoding=encoding, newline=newline)
        except BaseException:
            os.close(fd)
            raise
        with f:
            yield f
            f.flush()
            if fsync:
                os.fsync(f.fileno())


@contextlib.contextmanager
def atomic_path(
    path: str | os.PathLike[str],
    *,
    keep_suffix: bool = True,
    fsync: bool = True,
    before_replace: Callable[[], Any] | None = None,
) -> Iterator[Path]:
    """Write ``path`` atomically through a library that takes a file name: yields the
    name of a temp file in the same folder, renamed over ``path`` when the block ends.

    The temp file exists (empty) when the block starts; write it under that name
    (overwriting it, or removing it first, e.g. to make it a hard link). Otherwise as
    :func:`atomic_write`: on an error the temp file is removed and ``path`` left alone.

    Args:
        path: the file to write (its folder must exist).
        keep_suffix: end the temp name with ``path``'s suffix (``.png``, ``.mp4``), for
            a library that infers the format from the name.
        fsync: flush the written file to disk before the rename.
        before_replace: called right before the rename.

    Examples:
        >>> import tempfile
        >>> path = Path(tempfile.mkdtemp()) / "table.csv"
        >>> with atomic_path(path) as tmp:
        ...     tmp.suffix, tmp.name.startswith(".table.csv.tmp-")
        ...     _ = tmp.write_text("a,b\\n1,2\\n")
        ('.csv', True)
        >>> path.read_text()
        'a,b\\n1,2\\n'
    """
    path = Path(path)
    tmp, fd = _reserve(path, keep_suffix)
    os.close(fd)
    with _replace_when_done(tmp, path, before_replace):
        yield tmp
        if fsync:
            _fsync(tmp)


def atomic_write_text(
    path: str | os.PathLike[str],
    text: str,
    *,
    fsync: bool = True,
    encoding: str | None = None,
    newline: str | None = None,
) -> Path:
    """Write ``text`` to ``path`` atomically (:func:`atomic_write`); returns ``path``.

    Examples:
        >>> import tempfile
        >>> atomic_write_text(Path(tempfile.mkdtemp()) / "x.txt", "hello\\n").read_text()
        'hello\\n'
    """
    with atomic_write(path, "w", fsync=fsync, encoding=encoding, newline=newline) as f:
        f.write(text)
    return Path(path)


def atomic_write_json(
    path: str | os.PathLike[str], data: Any, *, indent: int | None = 2, fsync: bool = True
) -> Path:
    """Write ``data`` as JSON to ``path`` atomically; returns ``path``.

    The folder is created when missing; the file is readable by all (``0o644``).

    Examples:
        >>> import json, tempfile
        >>> path = atomic_write_json(Path(tempfile.mkdtemp()) / "sub" / "x.json", {"a": [1, 2]})
        >>> json.loads(path.read_text())
        {'a': [1, 2]}
        >>> oct(path.stat().st_mode & 0o777)
        '0o644'
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_write(path, "w", fsync=fsync, permissions=0o644) as f:
        json.dump(data, f, indent=indent)
    return path
