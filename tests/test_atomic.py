"""marl.atomic: a writer stopped at any point leaves the old file or the new one, whole."""

import json
import os
import subprocess
import sys
import threading

import pytest

from marl.atomic import (
    atomic_path,
    atomic_write,
    atomic_write_json,
    atomic_write_text,
    is_temp_name,
)
from marl.experiment.checkpoint import CheckpointManager


def _names(folder):
    return sorted(p.name for p in folder.iterdir())


@pytest.mark.parametrize("where", ["block", "before_replace"])
def test_an_error_leaves_the_old_file_and_no_temp_file(tmp_path, where):
    path = tmp_path / "results.json"
    atomic_write_json(path, {"old": True})

    def fail():
        raise OSError("disk went away")

    with (
        pytest.raises(OSError, match="disk went away"),
        atomic_write(path, "w", before_replace=fail if where == "before_replace" else None) as f,
    ):
        f.write('{"new": tr')  # half a file
        if where == "block":
            fail()
    assert json.loads(path.read_text()) == {"old": True}
    assert _names(tmp_path) == ["results.json"]


def test_a_killed_writer_leaves_the_old_file_and_a_temp_file_its_owner_removes(tmp_path):
    folder = tmp_path / "checkpoints"
    folder.mkdir()
    path = folder / "latest.pt"
    path.write_bytes(b"old")
    code = (
        "import os, sys\n"
        "from marl.atomic import atomic_write\n"
        "with atomic_write(sys.argv[1], 'wb') as f:\n"
        "    f.write(b'half of the new')\n"
        "    f.flush()\n"
        "    os._exit(9)  # killed before the rename\n"
    )
    result = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True)
    assert result.returncode == 9, result.stderr.decode()
    assert path.read_bytes() == b"old"
    temps = [n for n in _names(folder) if n != "latest.pt"]
    assert len(temps) == 1 and is_temp_name(temps[0]), temps
    CheckpointManager(folder)  # the folder's owner cleans what a killed writer left
    assert _names(folder) == ["latest.pt"]


def test_concurrent_writers_never_mix_their_files(tmp_path):
    """Writers in one process share a pid: each still gets a temp file of its own."""
    path = tmp_path / "reports.jsonl"
    texts = [f"{i}\n" * 20_000 for i in range(8)]
    barrier = threading.Barrier(len(texts))

    def write(text):
        barrier.wait()
        atomic_write_text(path, text, fsync=False)

    threads = [threading.Thread(target=write, args=(t,)) for t in texts]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert path.read_text() in texts
    assert _names(tmp_path) == ["reports.jsonl"]


def test_atomic_path_keeps_the_suffix_and_replaces_only_at_the_end(tmp_path):
    path = tmp_path / "curves.png"
    path.write_bytes(b"old figure")
    with atomic_path(path) as tmp:
        assert tmp.suffix == ".png" and is_temp_name(tmp.name) and tmp.exists()
        tmp.write_bytes(b"new figure")
        assert path.read_bytes() == b"old figure"
    assert path.read_bytes() == b"new figure" and _names(tmp_path) == ["curves.png"]


def test_json_files_are_readable_by_all_and_folders_are_made(tmp_path):
    old = os.umask(0o077)
    try:
        path = atomic_write_json(tmp_path / "a" / "b.json", [1, 2])
    finally:
        os.umask(old)
    assert json.loads(path.read_text()) == [1, 2]
    assert path.stat().st_mode & 0o777 == 0o644


def test_bad_mode_is_refused_before_anything_is_written(tmp_path):
    with pytest.raises(ValueError, match="mode must be 'w' or 'wb', got 'a'"):
        atomic_write(tmp_path / "x", "a").__enter__()
    assert _names(tmp_path) == []
