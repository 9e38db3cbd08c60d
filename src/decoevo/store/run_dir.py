"""One run = one directory a person can read:

  config.yaml            the resolved configuration (every hyperparameter; no secrets)
  events.jsonl           append-only event log: steps, gate decisions, outer rounds, errors
  calls.jsonl            every answered model request (paid or cache hit), the spend record
  skills/solver/v003.md  every accepted skill version, with v003.diff against its parent
  candidates/            rejected candidate skills, for inspection
  audits/outer_000/      audit records and the verification of each outer round
  ledger.json            usage per role and model
  checkpoint.json        the loop state after the last completed step (resume starts here)
  summary.json           written when the run ends

Writes of whole files are atomic (temp file + rename); appends are flushed and fsynced line by line,
and a torn last line left by a kill is cut off on resume.
"""

from __future__ import annotations

import difflib
import json
import os
import time
from pathlib import Path
from typing import Any

from ..domain import Skill
from ..lm.client import CallRecord


def _atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _append_line(path: Path, obj: dict[str, Any]) -> None:
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(obj, ensure_ascii=False) + "\n")
        f.flush()
        os.fsync(f.fileno())


def _cut_torn_tail(path: Path) -> None:
    """Drop a last line without its newline (a write interrupted by a kill)."""
    if not path.exists():
        return
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        with open(path, "r+b") as f:
            f.truncate(data.rfind(b"\n") + 1)


def skill_markdown(skill: Skill) -> str:
    parent = "none" if skill.parent is None else f"v{skill.parent:03d}"
    return (f"<!-- kind: {skill.kind}; version: v{skill.version:03d}; parent: {parent} -->\n"
            f"<!-- reason: {skill.reason.replace('--', '- -')} -->\n\n{skill.text.strip()}\n")


class RunDir:
    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)

    # ---- files ---------------------------------------------------------------------------------
    def file(self, rel: str) -> Path:
        return self.path / rel

    def exists(self) -> bool:
        return (self.path / "config.yaml").is_file()

    def write_text(self, rel: str, text: str) -> None:
        _atomic_write(self.path / rel, text)

    def write_json(self, rel: str, obj: Any) -> None:
        _atomic_write(self.path / rel, json.dumps(obj, indent=2, ensure_ascii=False, default=str) + "\n")

    def write_jsonl(self, rel: str, records: list[dict[str, Any]]) -> None:
        _atomic_write(self.path / rel, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))

    def read_json(self, rel: str) -> Any:
        return json.loads((self.path / rel).read_text(encoding="utf-8"))

    def read_jsonl(self, rel: str) -> list[dict[str, Any]]:
        p = self.path / rel
        if not p.exists():
            return []
        return [json.loads(line) for line in p.read_text(encoding="utf-8").split("\n") if line.strip()]

    # ---- logs ----------------------------------------------------------------------------------
    def event(self, kind: str, **data: Any) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        _append_line(self.path / "events.jsonl", {"t": round(time.time(), 3), "event": kind, **data})

    def events(self) -> list[dict[str, Any]]:
        return self.read_jsonl("events.jsonl")

    def record_call(self, record: CallRecord) -> None:
        _append_line(self.path / "calls.jsonl", {
            "role": record.role, "model": record.model, "key": record.key, "cached": record.cached,
            "prompt_tokens": record.prompt_tokens, "completion_tokens": record.completion_tokens,
        })

    # ---- skills --------------------------------------------------------------------------------
    def save_skill(self, skill: Skill, parent: Skill | None) -> None:
        base = f"skills/{skill.kind}/v{skill.version:03d}"
        self.write_text(f"{base}.md", skill_markdown(skill))
        if parent is not None:
            diff = difflib.unified_diff(parent.text.splitlines(), skill.text.splitlines(),
                                        f"v{parent.version:03d}", f"v{skill.version:03d}", lineterm="")
            self.write_text(f"{base}.diff", "\n".join(diff) + "\n")

    def save_candidate(self, skill: Skill, label: str) -> None:
        self.write_text(f"candidates/{skill.kind}_{label}.md", skill_markdown(skill))

    # ---- checkpoint ----------------------------------------------------------------------------
    def checkpoint(self, state: dict[str, Any], ledger: dict[str, Any]) -> None:
        events = self.path / "events.jsonl"
        offset = events.stat().st_size if events.exists() else 0
        self.write_json("ledger.json", ledger)
        self.write_json("checkpoint.json", {"state": state, "ledger": ledger, "events_offset": offset})

    def load_checkpoint(self) -> dict[str, Any] | None:
        """The last checkpoint, with the event log cut back to it so a resumed step is not logged twice."""
        _cut_torn_tail(self.path / "calls.jsonl")
        events = self.path / "events.jsonl"
        _cut_torn_tail(events)
        cp_path = self.path / "checkpoint.json"
        if not cp_path.exists():
            if events.exists():
                events.write_bytes(b"")
            return None
        cp: dict[str, Any] = json.loads(cp_path.read_text(encoding="utf-8"))
        if events.exists() and events.stat().st_size > cp["events_offset"]:
            with open(events, "r+b") as f:
                f.truncate(cp["events_offset"])
        return cp
