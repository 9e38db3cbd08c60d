"""The one writer of a run directory (docs/architecture.md lists the files).

Whole files are replaced atomically; the two logs are appended line by line and fsynced. Nothing here
follows a symbolic link, and nothing is written with a secret this process holds in it (`decoevo.redact`).
The engine owns one `RunWriter` per run, under the run's lock.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..domain import Skill
from ..redact import mask_secrets
from .events import RunEvent, make_event
from .files import AppendFiles, UnsafeRunPath, atomic_write, dumps_indented, dumps_json_line, dumps_line, sync
from .records import (
    CALLS,
    CHECKPOINT,
    EVENTS,
    FORMAT_VERSION,
    LEDGER,
    REQUESTS,
    SUMMARY,
    CallLine,
    Checkpoint,
    Summary,
)
from .skills import skill_markdown, skill_path
from .transcripts import TRANSCRIPTS, MemberPacker, TranscriptEntry, transcript_member


class RunWriter:
    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        # the directory it writes in too (RUN/eval, OUT/pilot): a link there was not made by the run, and
        # every file written below it would land in the folder it points to
        if self.path.is_symlink():
            raise UnsafeRunPath(f"{self.path}: is a symbolic link (to {self.path.resolve()}); decoevo does not "
                                "write through links it did not make; replace it with a directory")
        self._calls, self._events = self.path / CALLS, self.path / EVENTS  # made once: a line each call
        self._transcripts = self.path / TRANSCRIPTS
        self._packer = MemberPacker()  # one deflate stream for the run's transcript members (transcripts.py)
        self._logs = AppendFiles(self.path)  # the logs, each opened once (files.py says what is still checked)

    def close(self) -> None:
        """Close the logs kept open (the run's end); a later line opens its file again."""
        self._logs.close()

    # ---- whole files -----------------------------------------------------------------------------
    def write_text(self, rel: str, text: str) -> None:
        atomic_write(self.path, self.path / rel, mask_secrets(text))

    def write_json(self, rel: str, obj: Any) -> None:
        text = dumps_indented(obj)
        self.write_text(rel, text.encode("utf-8", "backslashreplace").decode("utf-8") + "\n")

    def write_jsonl(self, rel: str, records: list[dict[str, Any]]) -> None:
        self.write_text(rel, "".join(dumps_line(r) + "\n" for r in records))

    def write_model(self, rel: str, record: Any) -> None:
        """A pydantic record (records.py) as indented JSON."""
        self.write_json(rel, record.model_dump(mode="json"))

    # ---- logs ------------------------------------------------------------------------------------
    def emit(self, event: RunEvent) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        line = mask_secrets(dumps_json_line(event.model_dump(mode="json")))
        self._logs.line(self._events, line, fsync=True)

    def event(self, kind: str, **data: Any) -> RunEvent:
        """Validate `data` as the `kind` event, append it, and return the typed event."""
        event = make_event(kind, **data)
        self.emit(event)
        return event

    def record_call(self, line: CallLine) -> None:
        text = mask_secrets(dumps_json_line(line.model_dump(mode="json")))
        self._logs.line(self._calls, text)  # fsynced at checkpoints

    def record_transcript(self, entry: TranscriptEntry | Mapping[str, Any]) -> None:
        """Not fsynced: a transcript is for reading; the call log is the record."""
        self._logs.append(self._transcripts, transcript_member(entry, self._packer))

    # ---- skills ----------------------------------------------------------------------------------
    def save_skill(self, skill: Skill, parent: Skill | None) -> None:
        base = skill_path(skill.kind, skill.version)
        self.write_text(base, skill_markdown(skill))
        if parent is not None:
            diff = difflib.unified_diff(parent.text.splitlines(), skill.text.splitlines(),
                                        f"v{parent.version:03d}", f"v{skill.version:03d}", lineterm="")
            self.write_text(base.removesuffix(".md") + ".diff", "\n".join(diff) + "\n")

    def save_candidate(self, skill: Skill, label: str) -> None:
        self.write_text(f"candidates/{skill.kind}_{label}.md", skill_markdown(skill))

    # ---- checkpoint and summary ------------------------------------------------------------------
    def _size(self, rel: str) -> int:
        path = self.path / rel
        return path.stat().st_size if path.exists() else 0

    def checkpoint(self, state: dict[str, Any], ledger: dict[str, Any], identity: Mapping[str, Any] | None = None
                   ) -> None:
        """`identity`: the run's method, seed and run_id, which a resume checks the checkpoint against."""
        sync(self.path, self.path / REQUESTS)  # so are the requests sent and not yet answered
        sync(self.path, self.path / CALLS)  # the calls this checkpoint counts are on disk before it is
        self.write_json(LEDGER, ledger)
        self.write_model(CHECKPOINT, Checkpoint(state=state, ledger=ledger, events_offset=self._size(EVENTS),
                                                calls_offset=self._size(CALLS), format_version=FORMAT_VERSION,
                                                **(identity or {})))

    def summary(self, summary: Summary) -> None:
        self.write_model(SUMMARY, summary)
