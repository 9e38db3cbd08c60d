"""Loading a run to continue it: the only code that changes a run directory while reading it.

A kill can leave a torn last line in either log; the event log may also hold events written after the
last checkpoint (a step that was cut short), which the resumed run writes again, so it is cut back.
The call log is never cut: a call paid after the checkpoint was paid, and the ledger gets it back. A
request recorded as sent (requests.jsonl) that no answer completed was in flight when the process died:
a provider billed it, so it is completed now with an estimated call line, and the ledger gets it too.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .files import UnsafeRunPath, truncate
from .reader import RunReader, RunReadError, parse_call_lines
from .records import CALLS, CHECKPOINT, EVENTS, LEDGER, REQUESTS, CallLine, Checkpoint
from .requests import unanswered
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


def prepare_resume(path: Path | str) -> ResumePoint:
    root = Path(path)
    if root.is_symlink():  # the run's own directory too: its writes would land wherever the link points
        raise UnsafeRunPath(f"{root}: is a symbolic link to {root.resolve()}; resume the run there by its own path")
    _refuse_links(root)
    for rel in (CALLS, EVENTS, REQUESTS):
        _cut_torn_tail(root, rel)
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
    lost = unanswered(root, parse_call_lines(data, calls_path))
    if lost:  # completed once, here: the next resume finds them answered by these lines
        writer = RunWriter(root)
        for line in lost:
            writer.record_call(line)
        data = calls_path.read_bytes()
    before = parse_call_lines(data[:cut], calls_path)
    after = parse_call_lines(data[cut:], calls_path)
    paid_after = tuple(c for c in after if not c.cached)
    # An estimated line is a bill without an answer: its key was not obtained, a later hit on it is not own.
    own = frozenset(c.key for c in (*before, *paid_after) if not c.estimated)
    return ResumePoint(checkpoint, own, paid_after)
