"""Issue 47.1, round eight: a run keeps its logs open (one open per file, not per line), and what an open per
line protected stays protected.

- the call log, the request journal, the transcripts and the events are each opened once for a run;
- a log deleted mid-run is made again, one replaced by a link is refused at the next line (the file it points
  to untouched), a folder on the way swapped for a link is refused;
- a killed process loses no line it wrote (each line is one write to the kernel, nothing buffered);
- the run closes what it kept open;
- a transcript entry built as a mapping writes the bytes the model wrote."""

from __future__ import annotations

import asyncio
import errno
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from decoevo.rundir import files
from decoevo.rundir.files import AppendFiles, UnsafeRunPath, dumps_line
from decoevo.rundir.records import CallLine
from decoevo.rundir.requests import RequestLog
from decoevo.rundir.transcripts import TranscriptEntry, read_transcripts, transcript_member
from decoevo.rundir.writer import RunWriter
from tests.engine_helpers import toy_engine
from tests.fd_helpers import descriptors_under


def _line(n: int = 0) -> CallLine:
    return CallLine(role="solve", model="m", key=f"k{n}", cached=False, prompt_tokens=3, completion_tokens=4)


def _entry(n: int = 0) -> dict[str, object]:
    return {"key": f"k{n}", "role": "solve", "model": "m", "phase": "step 1",
            "messages": [{"role": "user", "content": f"question {n}"}],
            "params": {"temperature": 0.7, "max_tokens": 64, "sample_index": 0}, "structured": False,
            "reply": f"answer {n}"}


def test_a_writer_opens_each_log_once_for_many_lines(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 47.1: a paid call opened and closed three files (8,056 opens in a 2,409-call run); now each log
    is opened once for the writer's life."""
    opened: list[str] = []
    real_open = os.open

    def counted(path: object, *args: object, **kwargs: object) -> int:
        opened.append(os.path.basename(os.fspath(path)))  # type: ignore[arg-type]
        return real_open(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(files.os, "open", counted)
    run = tmp_path / "run"
    run.mkdir()
    writer, journal = RunWriter(run), RequestLog(run)
    for n in range(20):
        request = journal.sent(f"k{n}", "solve", "m", 3, 8)
        writer.record_call(_line(n).model_copy(update={"request": request}))
        writer.record_transcript(_entry(n))
        writer.event("finish", method="m", seed=0, steps_done=n, solver_version=0, generator_version=0)
    logs = ["calls.jsonl", "events.jsonl", "requests.jsonl", "transcripts.jsonl.gz"]
    assert sorted(name for name in opened if name in logs) == logs
    assert len((run / "calls.jsonl").read_text().splitlines()) == 20
    assert len((run / "requests.jsonl").read_text().splitlines()) == 20
    assert len((run / "events.jsonl").read_text().splitlines()) == 20
    assert [t.key for t in read_transcripts(run / "transcripts.jsonl.gz")] == [f"k{n}" for n in range(20)]
    writer.close()
    journal.close()
    assert descriptors_under(run) == []


@pytest.mark.parametrize("log", ["calls.jsonl", "transcripts.jsonl.gz", "requests.jsonl", "events.jsonl"])
@pytest.mark.parametrize("change", ["replaced by a link", "deleted", "renamed, a link in its place"])
def test_a_kept_open_log_replaced_by_a_link_is_refused_and_a_deleted_one_is_made_again(
        tmp_path: Path, log: str, change: str) -> None:
    """Guards what an open per line gave (passes on df0097a too): the descriptor kept open never writes to a
    file no longer in the run, and a link put where the log was is refused at the next line."""
    run, elsewhere = tmp_path / "run", tmp_path / "elsewhere.txt"
    run.mkdir()
    elsewhere.write_text("precious\n")
    writer, journal = RunWriter(run), RequestLog(run)

    def write(n: int) -> None:
        if log == "calls.jsonl":
            writer.record_call(_line(n))
        elif log == "transcripts.jsonl.gz":
            writer.record_transcript(_entry(n))
        elif log == "requests.jsonl":
            journal.sent(f"k{n}", "solve", "m", 3, 8)
        else:
            writer.event("finish", method="m", seed=0, steps_done=n, solver_version=0, generator_version=0)

    def count() -> int:
        if log == "transcripts.jsonl.gz":
            return len(read_transcripts(run / log))
        return len((run / log).read_text().splitlines())

    write(0)
    if change == "renamed, a link in its place":
        (run / log).rename(tmp_path / "moved")
    else:
        (run / log).unlink()
    if change == "deleted":
        write(1)
        assert count() == 1  # made again, with the line written after the deletion
        assert not [t for t in descriptors_under(tmp_path) if "(deleted)" in t]  # the old descriptor closed, not leaked
        writer.close()
        journal.close()
        return
    (run / log).symlink_to(elsewhere)
    with pytest.raises(UnsafeRunPath, match=f"{log}: is a symbolic link"):
        write(1)
    assert elsewhere.read_text() == "precious\n"
    if change == "renamed, a link in its place":  # the descriptor kept open wrote nothing more to the moved file
        moved = tmp_path / "moved"
        lines = read_transcripts(moved) if log == "transcripts.jsonl.gz" else moved.read_text().splitlines()
        assert len(lines) == 1
    writer.close()
    journal.close()


@pytest.mark.parametrize("target", ["elsewhere", "the moved folder"])
def test_a_kept_open_log_in_a_folder_swapped_for_a_link_is_refused(tmp_path: Path, target: str) -> None:
    """RUN/eval/calls.jsonl kept open, then RUN/eval moved away and a link put in its place: the next line is
    refused, as with an open per line (the folders on the way are checked every line), even when the link
    leads back to the very file the descriptor holds."""
    run, elsewhere, moved = tmp_path / "run", tmp_path / "elsewhere", tmp_path / "moved"
    elsewhere.mkdir()
    logs = AppendFiles(run)
    logs.append(run / "eval" / "calls.jsonl", b"{}\n")
    (run / "eval").rename(moved)
    (run / "eval").symlink_to(elsewhere if target == "elsewhere" else moved, target_is_directory=True)
    with pytest.raises(UnsafeRunPath, match="eval: is a symbolic link"):
        logs.append(run / "eval" / "calls.jsonl", b"{}\n")
    assert list(elsewhere.iterdir()) == []
    assert (moved / "calls.jsonl").read_bytes() == b"{}\n"
    assert descriptors_under(tmp_path) == []  # the refused file's descriptor closed at the refusal, not kept
    logs.close()
    assert descriptors_under(tmp_path) == []


def test_the_events_are_fsynced_line_by_line_and_the_call_log_is_not(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Guards the kept-open writer's fsyncs (as `append_line`'s): events.jsonl survives a power loss line by
    line; the call log, the journal and the transcripts are flushed at each checkpoint instead."""
    synced: list[str] = []
    def fsync(fd: int) -> None:
        synced.append(os.path.basename(os.readlink(f"/proc/self/fd/{fd}")))

    monkeypatch.setattr(files.os, "fsync", fsync)
    writer, journal = RunWriter(tmp_path), RequestLog(tmp_path)
    journal.sent("k", "solve", "m", 3, 8)
    writer.record_call(_line())
    writer.record_transcript(_entry())
    assert synced == []
    writer.event("finish", method="m", seed=0, steps_done=1, solver_version=0, generator_version=0)
    writer.event("finish", method="m", seed=0, steps_done=2, solver_version=0, generator_version=0)
    assert synced == ["events.jsonl", "events.jsonl"]

    def failing(fd: int) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(files.os, "fsync", failing)  # a disk that fails: an error naming the file, not silence
    with pytest.raises(OSError, match=r"events\.jsonl"):
        writer.event("finish", method="m", seed=0, steps_done=3, solver_version=0, generator_version=0)
    writer.close()
    journal.close()


_KILLED = """
import os, sys
from pathlib import Path
from decoevo.rundir.records import CallLine
from decoevo.rundir.requests import RequestLog
from decoevo.rundir.writer import RunWriter
run = Path(sys.argv[1])
writer, journal = RunWriter(run), RequestLog(run)
for n in range(50):
    journal.sent(f"k{n}", "solve", "m", 3, 8)
    writer.record_call(CallLine(role="solve", model="m", key=f"k{n}", cached=False))
    writer.record_transcript({"key": f"k{n}", "role": "solve", "model": "m", "reply": "r"})
print("written", flush=True)
sys.stdin.readline()  # killed here, the descriptors still open
"""


def test_a_killed_process_loses_no_line_it_wrote(tmp_path: Path) -> None:
    """Guards "a kill loses at most the line being written" (passes on df0097a too): nothing is buffered in
    the process, so every line written before a SIGKILL is in the files."""
    run = tmp_path / "run"
    run.mkdir()
    proc = subprocess.Popen([sys.executable, "-c", _KILLED, str(run)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True)
    assert proc.stdout is not None and proc.stdout.readline() == "written\n"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert len((run / "calls.jsonl").read_text().splitlines()) == 50
    assert len((run / "requests.jsonl").read_text().splitlines()) == 50
    assert len(read_transcripts(run / "transcripts.jsonl.gz")) == 50


def test_a_run_closes_the_logs_it_kept_open(tmp_path: Path) -> None:
    engine, _ = toy_engine(tmp_path, "decoevo")
    asyncio.run(engine.run_async())
    assert (engine.run.path / "transcripts.jsonl.gz").stat().st_size > 0
    assert descriptors_under(engine.run.path) == []


def test_a_transcript_entry_as_a_mapping_writes_the_models_bytes() -> None:
    """The engine builds an entry as a mapping (no model per paid call): the member holds the same line as
    the `TranscriptEntry` it stands for, and reads back as it."""
    entry = _entry(3)
    model = TranscriptEntry.model_validate(entry)
    assert dumps_line(entry) == dumps_line(model.model_dump(mode="json"))
    assert transcript_member(entry) == transcript_member(model)


def test_the_engines_transcript_entry_is_a_transcript_entry_mapping() -> None:
    """engine/run.py's entry has a TranscriptEntry's fields in its order (the bytes of older runs)."""
    from decoevo.engine.run import transcript_entry
    from decoevo.lm.types import BackendRequest, CallRecord, GenParams, Message

    request = BackendRequest(model="m", messages=(Message("user", "q"),), params=GenParams(max_tokens=16))
    record = CallRecord(role="solve", model="m", key="k", cached=False, prompt_tokens=1, completion_tokens=1,
                        request=request, reply="r")
    entry = transcript_entry(record, "step 1")
    assert isinstance(entry, dict)
    assert list(entry) == list(TranscriptEntry.model_fields)
    assert dumps_line(entry) == dumps_line(TranscriptEntry.model_validate(entry).model_dump(mode="json"))


def test_a_dead_sessions_lock_file_is_removed_once_old_and_a_fresh_one_is_kept(tmp_path: Path) -> None:
    """Guards `live_sessions`' litter rule (a mutation survivor of rundir/requests.py, passes on df0097a): the
    lock file of a session that ended without closing is removed once older than STALE_LIVE_S, never a just
    made one (its session may be about to lock it); a live session's is kept whatever its age."""
    import time

    from decoevo.rundir.requests import LIVE, STALE_LIVE_S, live_sessions

    live = RequestLog(tmp_path)
    live.sent("k", "solve", "m", 1, 1)  # holds its lock file
    folder = tmp_path / LIVE
    old, fresh = folder / "deadbeef", folder / "cafebabe"
    old.write_text("")
    fresh.write_text("")
    past = time.time() - STALE_LIVE_S - 60
    for path in (old, folder / live.session):
        os.utime(path, (past, past))
    assert live_sessions(tmp_path) == {live.session}
    assert not old.exists()
    assert fresh.exists() and (folder / live.session).exists()
    live.close()


@pytest.mark.parametrize("where", ["top.jsonl", "made/with/its/folder.jsonl"])
def test_a_log_is_made_readable_by_whoever_reads_the_run(tmp_path: Path, where: str) -> None:
    """A log is created rw-r--r-- (under the usual umask) whether its folder existed or was made for it: a
    mode of 0 passes unnoticed for root, who ignores it, and locks every other user out of their own run."""
    old = os.umask(0o022)
    try:
        os.close(files.open_append(tmp_path, tmp_path / where))
    finally:
        os.umask(old)
    assert (tmp_path / where).stat().st_mode & 0o777 == 0o644
