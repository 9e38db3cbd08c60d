"""decoevo.fileio, the one whole-file writer and the one file hash: what each promises, checked directly
(the mutation bench found these promises guarded only by tests of other modules, or not at all)."""

from __future__ import annotations

import errno
import hashlib
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from decoevo import fileio
from decoevo.fileio import atomic_write_text, sha256_file


@pytest.fixture
def umask_022() -> Iterator[None]:
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def test_an_atomic_write_makes_missing_folders_and_a_file_others_can_read(tmp_path: Path, umask_022: None) -> None:
    path = tmp_path / "a" / "b" / "summary.json"
    atomic_write_text(path, "{}\n")
    assert path.read_text() == "{}\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o644


def test_an_atomic_write_flushes_and_fsyncs_the_whole_text_only_when_asked(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The fsync must see every byte in the file (Python's buffer flushed first), and `fsync=False` (the
    report, a sweep's status) skips it."""
    synced: list[int] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        synced.append(os.fstat(fd).st_size)
        real_fsync(fd)

    monkeypatch.setattr(fileio.os, "fsync", fsync)
    text = "x" * 300
    atomic_write_text(tmp_path / "synced.txt", text)
    assert synced == [len(text)]
    atomic_write_text(tmp_path / "unsynced.txt", text, fsync=False)
    assert synced == [len(text)] and (tmp_path / "unsynced.txt").read_text() == text


def test_a_failed_atomic_write_leaves_no_temp_file_and_names_its_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A disk filling up mid-write: the error names the file (a failed write names none) and the temp
    file beside it is gone; an older file under the name is untouched."""
    path = tmp_path / "summary.json"
    path.write_text("old\n")

    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(fileio.os, "fsync", full)
    with pytest.raises(OSError) as caught:
        atomic_write_text(path, "new\n")
    assert caught.value.errno == errno.ENOSPC and caught.value.filename == str(path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["summary.json"] and path.read_text() == "old\n"


def test_the_file_hash_covers_every_block_of_a_file_larger_than_one_read(tmp_path: Path) -> None:
    data = os.urandom(3 << 20) + b"tail"  # three 1 MiB reads and a short fourth
    path = tmp_path / "big.bin"
    path.write_bytes(data)
    assert sha256_file(path) == hashlib.sha256(data).hexdigest()
    path.write_bytes(data[:-1] + b"!")  # the last byte changed
    assert sha256_file(path) == hashlib.sha256(data[:-1] + b"!").hexdigest() != hashlib.sha256(data).hexdigest()
