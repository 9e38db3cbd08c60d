"""`requests.jsonl`: the write-ahead record of each paid request of a run (lm/journal.py says why).

A line `{"sent": ID, "key", "role", "model", "prompt_tokens", "max_tokens"}` is appended before the
request leaves; the request is complete when a line of `calls.jsonl` names the same `request` id (an
answer, or an estimate for one that never came) or when `{"settled": ID}` is appended here (it ended with
nothing to bill). Appended without an fsync, like the call log: a written line survives the death of the
process (kill -9, the OOM killer); both files are flushed to disk at each checkpoint.

Several processes (or sessions of one process: `decoevo reproduce` grades a run's transfer, dynamics and
alignment at once) may keep records in one directory (`RUN/eval/`). Each `RequestLog` holds an exclusive
`flock` on its own file in `.live/` for as long as it is open, and the kernel drops it when the process
dies: settling bills only the unanswered requests of sessions whose lock is free (dead), never those of
a session still waiting for its answers.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import itertools
import json
import os
import time
import uuid
from pathlib import Path
from typing import Any

from .files import AppendFiles, RunReadError, dumps_json_line, make_parent
from .records import MAX_TOKENS_RECORDED, REQUESTS, CallLine


def _token_count(record: dict[str, Any], field: str, path: Path, lineno: int) -> int:
    """A count past MAX_TOKENS_RECORDED (or negative, fractional, not finite, missing) is no record this
    code wrote, and billing it would put an absurd number in the ledger: refused, naming the line."""
    value = record.get(field)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_TOKENS_RECORDED:
        raise RunReadError(f"{path}: line {lineno}: field '{field}' is {value!r}, not a token count from 0 to "
                           f"{MAX_TOKENS_RECORDED:.0e}; this file was edited or damaged: restore it, or remove "
                           "that line to bill nothing for it")
    return value


LIVE = ".live"  # one lock file per open RequestLog, named by its session; the folder itself: the settle lock
STALE_LIVE_S = 60.0  # a dead session's lock file older than this is removed (never a just-created one)


def _session_of(request_id: str) -> str:
    return request_id.rsplit("-", 1)[0]


class RequestLog:
    """The `RequestJournal` of one directory, for one session (ids are unique across resumes and across
    sessions writing the directory at once). `close()` ends the session; a process's death ends it too."""

    def __init__(self, root: Path | str) -> None:
        self.root = Path(root)
        self.path = self.root / REQUESTS
        self._session = uuid.uuid4().hex[:8]
        self._numbers = itertools.count()
        self._live: int | None = None  # held from the first request on: before it there is nothing to settle
        self._log = AppendFiles(self.root)  # requests.jsonl, opened once for the session (files.py: what is checked)

    def _hold(self, path: Path) -> int:
        """The session's lock file, locked before it appears under its name: made and locked under a dotted
        name, then renamed. Made under its own name, it was there unlocked for an instant, and a session
        starting beside (`live_sessions`) took it then for a dead one and billed its first request as lost,
        which was then answered too (the same request billed twice)."""
        make_parent(self.root, path)
        making = path.with_name(f".{path.name}")
        fd = os.open(making, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)  # a new, uniquely named file: nobody else holds it for long
            os.rename(making, path)
        except BaseException:
            os.close(fd)
            with contextlib.suppress(OSError):
                making.unlink()
            raise
        return fd

    @property
    def session(self) -> str:
        return self._session

    def close(self) -> None:
        self._log.close()
        if self._live is not None:
            with contextlib.suppress(OSError):
                (self.root / LIVE / self._session).unlink()
            os.close(self._live)  # releases the lock
            self._live = None

    def sent(self, key: str, role: str, model: str, prompt_tokens: int, max_tokens: int) -> str:
        if self._live is None:
            self._live = self._hold(self.root / LIVE / self._session)
        request_id = f"{self._session}-{next(self._numbers)}"
        self._append({"sent": request_id, "key": key, "role": role, "model": model,
                      "prompt_tokens": prompt_tokens, "max_tokens": max_tokens})
        return request_id

    def settled(self, request_id: str) -> None:
        self._append({"settled": request_id})

    def _append(self, record: dict[str, Any]) -> None:
        """One line, not fsynced (flushed at each checkpoint, with the call log)."""
        self._log.line(self.path, dumps_json_line(record))


def _not_a_number(path: Path, line: int, name: str) -> Any:
    """JSON's Infinity and NaN: never written by us, and a bill of infinite tokens cannot be settled."""
    raise RunReadError(f"{path}: line {line}: holds {name}, which is not a token count; this file was edited or "
                       "damaged: restore it, or remove that line to bill nothing for it")


def live_sessions(root: Path) -> set[str]:
    """The sessions of `root` whose RequestLog is open now (in this process or another)."""
    live: set[str] = set()
    folder = root / LIVE
    if not folder.is_dir():
        return live
    for path in folder.iterdir():
        making = path.name.startswith(".")  # a lock file being made (`RequestLog._hold`): nothing sent yet
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if not making:
                live.add(path.name)
        else:  # free: the session ended without closing (killed); its file is litter once it is old
            with contextlib.suppress(OSError):
                if time.time() - os.fstat(fd).st_mtime > STALE_LIVE_S:
                    path.unlink()
        finally:
            os.close(fd)
    return live


def unanswered(root: Path, calls: list[CallLine], live: set[str] | None = None,
               journal: bytes | None = None) -> list[CallLine]:
    """The requests recorded as sent that neither an answer nor a settlement completed (the process died
    while they were in flight), as estimated call lines: prompt tokens at their recorded bound, completion
    tokens at the whole `max_tokens` allowance. A token count that is not one (negative, not finite, past
    `MAX_TOKENS_RECORDED`) is a RunReadError naming the line: nothing is billed from an edited record.
    The requests of `live` sessions are still in flight, not unanswered: they are left alone. `journal`: the
    journal's bytes as read before `live` was found (`resume._settle`), else it is read now."""
    path = root / REQUESTS
    if journal is None:
        if not path.is_file():
            return []
        journal = path.read_bytes()
    sent: dict[str, dict[str, Any]] = {}
    done = {c.request for c in calls if c.request is not None}
    for lineno, line in enumerate(journal.splitlines(), 1):
        try:
            record = json.loads(line, parse_constant=functools.partial(_not_a_number, path, lineno))
        except ValueError:
            continue  # a torn line was cut before this is read; anything else unreadable is not a record
        if not isinstance(record, dict):
            continue
        if isinstance(record.get("sent"), str):
            for field in ("prompt_tokens", "max_tokens"):
                _token_count(record, field, path, lineno)
            sent[record["sent"]] = record
        elif isinstance(record.get("settled"), str):
            done.add(record["settled"])
    out = []
    for request_id, r in sent.items():
        if request_id in done or (live is not None and _session_of(request_id) in live):
            continue
        try:
            out.append(
                CallLine(
                    role=str(r["role"]),
                    model=str(r["model"]),
                    key=str(r["key"]),
                    cached=False,
                    prompt_tokens=int(r["prompt_tokens"]),
                    completion_tokens=int(r["max_tokens"]),
                    phase="in flight at an interruption",
                    request=request_id,
                    estimated=True,
                )
            )
        except (KeyError, TypeError, ValueError):
            continue
    return out
