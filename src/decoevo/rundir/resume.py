"""Loading a run to continue it: the only code that changes a run directory while reading it.

A kill can leave a torn last line in either log; the event log may also hold events written after the
last checkpoint (a step that was cut short), which the resumed run writes again, so it is cut back.
The call log is never cut: a call paid after the checkpoint was paid, and the ledger gets it back. A
request recorded as sent (requests.jsonl) that no answer completed was in flight when the process died:
a provider billed it, so it is completed now with an estimated call line, and the ledger gets it too.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from .files import UnsafeRunPath, _check_no_links, truncate
from .reader import RunReader, RunReadError, parse_call_lines
from .records import CALLS, CHECKPOINT, EVENTS, LEDGER, REQUESTS, CallLine, Checkpoint
from .requests import LIVE, live_sessions, unanswered
from .writer import RunWriter


@dataclass(frozen=True)
class ResumePoint:
    checkpoint: Checkpoint | None  # None: no step completed; the run starts over (its paid calls are kept)
    own_keys: frozenset[str]  # requests this run obtained itself before the kill (replays are its own hits)
    paid_after: tuple[CallLine, ...]  # paid after the checkpoint: missing from the checkpoint's ledger


def _cut_torn_tail(root: Path, rel: str) -> None:
    path = root / rel
    if path.is_file():
        data = path.read_bytes()
        if data and not data.endswith(b"\n"):
            truncate(root, path, data.rfind(b"\n") + 1)


def _refuse_links(root: Path) -> None:
    """A resumed run writes to its files again: none of them may be a link to somewhere else."""
    links = [p for p in root.rglob("*") if p.is_symlink()]
    if links:
        raise UnsafeRunPath(f"{links[0]}: is a symbolic link; decoevo does not write through links inside a run "
                            f"directory ({len(links)} found); replace them with regular files to resume")


def checkpoint_to_resume(path: Path | str) -> Checkpoint | None:
    """The checkpoint a resume starts from, read without writing anything (None: no step completed).
    Something else in its place (a directory, a link, a file that does not parse or has a wrong field) is
    a RunReadError naming it: a resume that took it for "no checkpoint" would pay for every step again."""
    for rel in (CHECKPOINT, CALLS, EVENTS, REQUESTS, LEDGER):  # read, then appended to or replaced
        file = Path(path) / rel
        if file.is_symlink() or (file.exists() and not file.is_file()):
            kind = "a symbolic link" if file.is_symlink() else "a directory" if file.is_dir() else "not a regular file"
            raise RunReadError(f"{file}: is {kind}, not the run's {rel}; put the run's own file back to resume it")
    return RunReader(path).checkpoint()


def settle_interrupted(root: Path) -> tuple[CallLine, ...]:
    """Make the call log of a directory whose process may have been killed (a run, RUN/eval/, a pilot's
    calls) whole again: cut the torn last line of `calls.jsonl` and `requests.jsonl`, and complete each
    request recorded as sent but never answered with an estimated call line (billed: the provider got it).
    Completed once: the next call finds them answered by these lines. The requests of a session still
    open (another evaluation of the run, now) are in flight, not lost, and are left to it. Returns the
    lines added."""
    with _settling(root):  # two sessions starting at once would each bill the same lost request
        return _settle(root)


@contextlib.contextmanager
def _settling(root: Path) -> Iterator[None]:
    """An exclusive flock on the directory's `.live/` (where the sessions' own locks are) while settling."""
    if not (root / REQUESTS).is_file():  # no record of any request: nothing another settler could bill
        yield
        return
    folder = root / LIVE
    _check_no_links(root, folder)
    folder.mkdir(exist_ok=True)
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _settle(root: Path) -> tuple[CallLine, ...]:
    # In this order: the journal, then who is live, then the call log. A session that starts after the journal
    # is read has no request in what was read (the probe cannot know it, and would take it for dead); one with
    # a request in it had locked its file before writing it, so the probe sees it live while it runs; and a
    # session found dead wrote its last answer before the call log is read.
    journal_path = root / REQUESTS
    journal = journal_path.read_bytes() if journal_path.is_file() else b""
    live = live_sessions(root)
    if not live:  # a live session may be writing its last line now: a tail is torn only when none is
        for rel in (CALLS, REQUESTS):
            _cut_torn_tail(root, rel)
    calls_path = root / CALLS
    data = calls_path.read_bytes() if calls_path.is_file() else b""
    lost = unanswered(root, parse_call_lines(data, calls_path), live, journal=journal)
    if lost:
        writer = RunWriter(root)
        try:
            for line in lost:
                writer.record_call(line)
        finally:
            writer.close()
    return tuple(lost)


def settled_calls(root: Path) -> list[CallLine]:
    """The whole call log of a directory several sessions write (RUN/eval/, a pilot's): first settled
    (the requests of dead sessions billed), then read. What its directory-wide ledger is made from."""
    settle_interrupted(root)
    path = root / CALLS
    return parse_call_lines(path.read_bytes(), path) if path.is_file() else []


def prepare_resume(path: Path | str) -> ResumePoint:
    root = Path(path)
    if root.is_symlink():  # the run's own directory too: its writes would land wherever the link points
        raise UnsafeRunPath(f"{root}: is a symbolic link to {root.resolve()}; resume the run there by its own path")
    _refuse_links(root)
    _cut_torn_tail(root, EVENTS)
    settle_interrupted(root)
    reader = RunReader(root)
    checkpoint = reader.checkpoint()
    events = root / EVENTS
    offset = checkpoint.events_offset if checkpoint is not None else 0
    if events.is_file() and events.stat().st_size > offset:
        truncate(root, events, offset)
    calls_path = root / CALLS
    if checkpoint is not None and checkpoint.calls_offset is None:  # format 1: every logged call is known
        return ResumePoint(checkpoint, frozenset(c.key for c in reader.calls(problems=[])), ())
    cut = checkpoint.calls_offset if checkpoint is not None else 0
    data = calls_path.read_bytes() if calls_path.is_file() else b""
    before = parse_call_lines(data[:cut], calls_path)
    after = parse_call_lines(data[cut:], calls_path)
    paid_after = tuple(c for c in after if not c.cached)
    # An estimated line is a bill without an answer: its key was not obtained, a later hit on it is not own.
    own = frozenset(c.key for c in (*before, *paid_after) if not c.estimated)
    return ResumePoint(checkpoint, own, paid_after)
