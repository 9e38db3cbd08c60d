"""decoevo.rundir.files: no write path of a run directory goes through a symbolic link (a linked folder
on the way, or the file itself), none leaves a descriptor open, and a new log file is readable by others."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path

import pytest

from decoevo.rundir import files
from decoevo.rundir.files import UnsafeRunPath, append_line, atomic_write, sync, truncate
from tests.fd_helpers import descriptors_under

Write = Callable[[Path, Path], object]
WRITES: dict[str, Write] = {
    "atomic write": lambda root, path: atomic_write(root, path, "{}\n"),
    "append": lambda root, path: append_line(root, path, "{}"),
    "sync": lambda root, path: sync(root, path),
    "truncate": lambda root, path: truncate(root, path, 0),
}


def _tree(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() if p.is_file() else b"/" for p in folder.rglob("*")}


@pytest.mark.parametrize("how", sorted(WRITES))
@pytest.mark.parametrize("linked", ["folder", "file"])
def test_every_write_path_refuses_a_link_inside_the_run(tmp_path: Path, how: str, linked: str) -> None:
    """RUN/audits -> elsewhere, or RUN/audits/calls.jsonl -> elsewhere/calls.jsonl: refused by name, and
    nothing elsewhere changes (no byte, no new folder)."""
    run, elsewhere = tmp_path / "run", tmp_path / "elsewhere"
    (elsewhere / "sub").mkdir(parents=True)
    (elsewhere / "sub" / "calls.jsonl").write_text("precious\n")
    run.mkdir()
    if linked == "folder":
        (run / "audits").symlink_to(elsewhere, target_is_directory=True)
    else:
        (run / "audits" / "sub").mkdir(parents=True)
        (run / "audits" / "sub" / "calls.jsonl").symlink_to(elsewhere / "sub" / "calls.jsonl")
    before = _tree(elsewhere)
    with pytest.raises(UnsafeRunPath, match="symbolic link"):
        WRITES[how](run, run / "audits" / "sub" / "calls.jsonl")
    assert _tree(elsewhere) == before


def test_a_write_under_a_linked_folder_makes_no_folder_where_the_link_points(tmp_path: Path) -> None:
    """The check runs before `mkdir -p`: RUN/audits -> elsewhere and a write to RUN/audits/new/x.json
    must not leave elsewhere/new behind (the check after the mkdir alone would refuse only once made)."""
    run, elsewhere = tmp_path / "run", tmp_path / "elsewhere"
    elsewhere.mkdir()
    run.mkdir()
    (run / "audits").symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(UnsafeRunPath):
        atomic_write(run, run / "audits" / "new" / "x.json", "{}")
    assert list(elsewhere.iterdir()) == []


def test_sync_fsyncs_an_appended_log_and_skips_a_missing_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    synced: list[int] = []
    monkeypatch.setattr(files.os, "fsync", lambda fd: synced.append(os.fstat(fd).st_size))
    append_line(tmp_path, tmp_path / "calls.jsonl", "{}", fsync=False)
    assert synced == []
    sync(tmp_path, tmp_path / "calls.jsonl")
    assert synced == [3]
    sync(tmp_path, tmp_path / "not_yet.jsonl")  # a log not written yet: nothing to flush, no error
    assert synced == [3]


def test_a_new_log_file_is_readable_by_others(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        append_line(tmp_path, tmp_path / "calls.jsonl", "{}")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "calls.jsonl").stat().st_mode) == 0o644


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="counts descriptors in /proc")
def test_no_write_path_leaves_a_descriptor_open(tmp_path: Path) -> None:
    """A run appends thousands of lines and truncates its logs on resume: a descriptor a call would run
    a long run out of them."""
    path = tmp_path / "calls.jsonl"
    for _ in range(3):
        append_line(tmp_path, path, "{}")
        sync(tmp_path, path)
        truncate(tmp_path, path, 3)
        atomic_write(tmp_path, tmp_path / "summary.json", "{}")
    assert descriptors_under(tmp_path) == []


@pytest.mark.parametrize("log", ["calls.jsonl", "transcripts.jsonl.gz"])
@pytest.mark.parametrize("change", ["replaced by a link", "deleted"])
def test_a_log_replaced_by_a_link_mid_run_is_refused_and_a_deleted_one_is_made_again(
        tmp_path: Path, log: str, change: str) -> None:
    """Each appended line opens its log anew (with O_NOFOLLOW): a log swapped for a link between two lines
    is refused at the next line, the file it points to untouched; a deleted one is made again (no line goes
    to a descriptor of a file no longer in the run)."""
    from decoevo.rundir.transcripts import TranscriptEntry, append_transcript, read_transcripts

    run, elsewhere = tmp_path / "run", tmp_path / "elsewhere.txt"
    run.mkdir()
    elsewhere.write_text("precious\n")

    def write() -> None:
        if log == "calls.jsonl":
            append_line(run, run / log, "{}", fsync=False)
        else:
            append_transcript(run, TranscriptEntry(key="k", role="solve", model="m"))

    write()
    (run / log).unlink()
    if change == "deleted":
        write()
        lines = (run / log).read_text().splitlines() if log == "calls.jsonl" else read_transcripts(run / log)
        assert len(lines) == 1
        return
    (run / log).symlink_to(elsewhere)
    with pytest.raises(UnsafeRunPath, match=f"{log}: is a symbolic link"):
        write()
    assert elsewhere.read_text() == "precious\n"


def test_appending_lines_makes_the_folder_once_not_on_every_line(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """A run appends thousands of lines: its folder is made when a log's open finds it missing, not with a
    `mkdir -p` before every line (issue 47: 5,497 mkdirs for 2,152 calls)."""
    made: list[Path] = []
    mkdir = Path.mkdir

    def counted(self: Path, *args: object, **kwargs: object) -> None:
        made.append(self)
        mkdir(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Path, "mkdir", counted)
    run = tmp_path / "run"
    for _ in range(5):
        append_line(run, run / "calls.jsonl", "{}", fsync=False)
        append_line(run, run / "eval" / "calls.jsonl", "{}", fsync=False)
    assert len((run / "eval" / "calls.jsonl").read_text().splitlines()) == 5
    assert len(made) == 2, made  # RUN (with the first line) and RUN/eval (with its first line)


def test_an_appended_line_is_fsynced_when_asked_and_only_then(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """events.jsonl survives a power loss (fsync per line); the call log is flushed at checkpoints instead."""
    synced: list[int] = []
    monkeypatch.setattr(files.os, "fsync", lambda fd: synced.append(os.fstat(fd).st_size))
    append_line(tmp_path, tmp_path / "calls.jsonl", "{}", fsync=False)
    assert synced == []
    append_line(tmp_path, tmp_path / "events.jsonl", "{}")
    assert synced == [3]
