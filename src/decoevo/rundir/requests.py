"""`requests.jsonl`: the write-ahead record of each paid request of a run (lm/journal.py says why).

A line `{"sent": ID, "key", "role", "model", "prompt_tokens", "max_tokens"}` is appended before the
request leaves; the request is complete when a line of `calls.jsonl` names the same `request` id (an
answer, or an estimate for one that never came) or when `{"settled": ID}` is appended here (it ended with
nothing to bill). Appended without an fsync, like the call log: a written line survives the death of the
process (kill -9, the OOM killer); both files are flushed to disk at each checkpoint.
"""

from __future__ import annotations

import functools
import itertools
import json
import uuid
from pathlib import Path
from typing import Any

from .files import RunReadError, append_line, dumps_line
from .records import REQUESTS, CallLine


class RequestLog:
    """The `RequestJournal` of one run directory (one per process: ids are unique across resumes)."""

    def __init__(self, root: Path | str) -> None:
        self.root = Path(root)
        self.path = self.root / REQUESTS
        self._session = uuid.uuid4().hex[:8]
        self._numbers = itertools.count()

    def sent(self, key: str, role: str, model: str, prompt_tokens: int, max_tokens: int) -> str:
        request_id = f"{self._session}-{next(self._numbers)}"
        append_line(
            self.root,
            self.path,
            dumps_line(
                {
                    "sent": request_id,
                    "key": key,
                    "role": role,
                    "model": model,
                    "prompt_tokens": prompt_tokens,
                    "max_tokens": max_tokens,
                }
            ),
            fsync=False,
        )
        return request_id

    def settled(self, request_id: str) -> None:
        append_line(self.root, self.path, dumps_line({"settled": request_id}), fsync=False)


def _not_a_number(path: Path, line: int, name: str) -> Any:
    """JSON's Infinity and NaN: never written by us, and a bill of infinite tokens cannot be settled."""
    raise RunReadError(f"{path}, line {line}: holds {name}, which is not a token count; remove that line "
                       "(or restore the file) and run again")


def unanswered(root: Path, calls: list[CallLine]) -> list[CallLine]:
    """The requests recorded as sent that neither an answer nor a settlement completed (the process died
    while they were in flight), as estimated call lines: prompt tokens at their recorded bound, completion
    tokens at the whole `max_tokens` allowance."""
    path = root / REQUESTS
    if not path.is_file():
        return []
    sent: dict[str, dict[str, Any]] = {}
    done = {c.request for c in calls if c.request is not None}
    for n, line in enumerate(path.read_bytes().splitlines(), 1):
        try:
            record = json.loads(line, parse_constant=functools.partial(_not_a_number, path, n))
        except ValueError:
            continue  # a torn line was cut before this is read; anything else unreadable is not a record
        if not isinstance(record, dict):
            continue
        if isinstance(record.get("sent"), str):
            sent[record["sent"]] = record
        elif isinstance(record.get("settled"), str):
            done.add(record["settled"])
    out = []
    for request_id, r in sent.items():
        if request_id in done:
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
