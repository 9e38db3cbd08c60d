"""Read-only access to a run directory. Nothing here writes, truncates or creates a file: evaluating,
reporting or exporting a run (even a live one) leaves every byte of it as it was. A torn last log line
(a write cut by a kill) is skipped here; only the resume loader (`resume.py`) repairs it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from ..domain import Skill
from .evalfiles import COMPARE_PREFIX
from .events import EventError, ResumeEvent, RunEvent, StartEvent, parse_event
from .files import RunReadError, complete_lines, read_json, read_jsonl, read_text, read_yaml
from .records import (
    ALIGNMENT,
    AUDIT_LOGS,
    AUDITS_DIR,
    CALLS,
    CHECKPOINT,
    CONFIG,
    DYNAMICS,
    EVAL_DIR,
    EVAL_LEDGER,
    EVAL_LEDGER_PREFIX,
    EVENTS,
    FINAL_SKILL,
    LEDGER,
    SPLITS,
    SUMMARY,
    VERIFICATION,
    AlignmentFile,
    CallLine,
    Checkpoint,
    CompareFile,
    DynamicsFile,
    EvalFile,
    RunStatus,
    Summary,
)
from .skills import parse_skill_markdown, skill_path
from .transcripts import TRANSCRIPTS, TranscriptEntry, read_transcripts

M = TypeVar("M", bound=BaseModel)


def validate_record(model: type[M], data: Any, where: Path | str, prefix: str = "") -> M:
    """`data` as `model`; a RunReadError naming the file and the first bad field (under `prefix`, the
    field of the file that holds `data`) otherwise."""
    try:
        return model.model_validate(data)
    except ValidationError as e:
        first = e.errors()[0]
        field = ".".join([prefix] * bool(prefix) + [str(p) for p in first["loc"]])
        more = f" (and {e.error_count() - 1} more)" if e.error_count() > 1 else ""
        message = str(first["msg"]).removeprefix("Value error, ")
        if first["type"] == "finite_number":  # json.loads reads NaN and Infinity; decoevo never writes them
            message = f"{first.get('input')!r} is not a number a result holds: the file is damaged"
        named = f"field '{field}': " if field else ""
        raise RunReadError(f"{where}: {named}{message}{more}") from None


def parse_call_lines(data: bytes, where: Path) -> list[CallLine]:
    """The valid call records among the complete lines of `data` (a garbage line is skipped: the call
    log is an audit trail, and one damaged line must not make a run unreadable)."""
    out = []
    for raw in complete_lines(data):
        try:
            out.append(CallLine.model_validate_json(raw))
        except ValidationError:
            continue
    return out


@dataclass(frozen=True)
class AuditFolder:
    """One outer round's `audits/outer_NNN/`: its audit records as written (their writer validated them)
    and its verification.json as it is (None when the round stopped before verifying)."""

    index: int | None  # NNN; None when the folder's name has no number
    records: Mapping[str, list[dict[str, Any]]]  # by name, each of AUDIT_LOGS ([] when absent)
    verification: Any


class RunReader:
    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)

    # ---- raw files -------------------------------------------------------------------------------
    def exists(self) -> bool:
        return (self.path / CONFIG).is_file()

    def has(self, rel: str) -> bool:
        return (self.path / rel).is_file()

    def files(self, pattern: str) -> list[str]:
        """The run's files matching a glob `pattern` (relative to the run), as sorted relative paths."""
        return sorted(p.relative_to(self.path).as_posix() for p in self.path.glob(pattern) if p.is_file())

    def text(self, rel: str) -> str:
        return read_text(self.path / rel)

    def json(self, rel: str) -> Any:
        return read_json(self.path / rel)

    def yaml(self, rel: str) -> Any:
        return read_yaml(self.path / rel)

    def jsonl(self, rel: str, problems: list[str] | None = None, *, log: bool = True) -> list[dict[str, Any]]:
        """The records of a JSONL file ([] when absent); a torn last line of a `log` is left out. A bad
        line is an error naming its number or, when `problems` is given, is recorded there and skipped."""
        return read_jsonl(self.path / rel, problems, log=log)

    def model(self, model: type[M], rel: str) -> M:
        return validate_record(model, self.json(rel), self.path / rel)

    # ---- typed views -----------------------------------------------------------------------------
    def config_dict(self) -> dict[str, Any]:
        data = self.yaml(CONFIG)
        if not isinstance(data, dict):
            raise RunReadError(f"{self.path / CONFIG}: the top level must be a mapping")
        return data

    def split_ids(self) -> dict[str, list[str]]:
        data = self.json(SPLITS)
        if not isinstance(data, dict) or not all(isinstance(v, list) for v in data.values()):
            raise RunReadError(f"{self.path / SPLITS}: expected a mapping of split name to question ids")
        return {str(k): [str(i) for i in v] for k, v in data.items()}

    def events(self, problems: list[str] | None = None) -> list[RunEvent]:
        out: list[RunEvent] = []
        for n, record in enumerate(self.jsonl(EVENTS, problems), 1):
            try:
                out.append(parse_event(record))
            except EventError as e:
                if problems is None:
                    raise RunReadError(f"{self.path / EVENTS}: event {n}: {e}") from None
                problems.append(f"{self.path / EVENTS}: event {n}: {e}; skipped")
        return out

    def recorded_config(self) -> dict[str, Any] | None:
        """The configuration the run last started or resumed under (events.jsonl), or None for a run from
        before configurations were recorded there."""
        recorded = None
        for event in self.events(problems=[]):
            if isinstance(event, StartEvent | ResumeEvent) and event.config is not None:
                recorded = event.config
        return recorded

    def calls(self, problems: list[str] | None = None) -> list[CallLine]:
        out = []
        for n, record in enumerate(self.jsonl(CALLS, problems), 1):
            try:
                out.append(validate_record(CallLine, record, f"{self.path / CALLS}:{n}"))
            except RunReadError as e:
                if problems is None:
                    raise
                problems.append(f"{e}; skipped")
        return out

    def transcripts(self) -> list[TranscriptEntry]:
        """Each distinct request of the run and its reply (older runs have none: [])."""
        return read_transcripts(self.path / TRANSCRIPTS)

    def checkpoint(self) -> Checkpoint | None:
        return self.model(Checkpoint, CHECKPOINT) if self.has(CHECKPOINT) else None

    def summary(self) -> Summary | None:
        return self.model(Summary, SUMMARY) if self.has(SUMMARY) else None

    def ledger(self) -> dict[str, Any] | None:
        data = self.json(LEDGER) if self.has(LEDGER) else None
        if data is not None and not isinstance(data, dict):
            raise RunReadError(f"{self.path / LEDGER}: expected a JSON object")
        return data

    def status(self) -> RunStatus:
        """finished / budget_stop (summary.json), stopped (the last event is an error stop), or incomplete
        (killed, or still running)."""
        summary = self.summary()
        if summary is not None:
            return summary.run_status
        events = self.events(problems=[])
        return "stopped" if events and events[-1].event == "stopped" else "incomplete"

    # ---- evaluation files (RUN/eval/, docs/evaluation-files.md) -----------------------------------
    def eval_names(self) -> list[str]:
        """The gradings under eval/ by file stem (`test-v003-gpt-4.1-official`, or `test` as runs evaluated
        before one file per skill version and grader have it; evalfiles.py): every eval/*.json but the
        dynamics and alignment records, the comparisons and the evaluations' own ledgers."""
        skip = {Path(DYNAMICS).name, Path(ALIGNMENT).name, Path(EVAL_LEDGER).name}
        return [Path(rel).stem for rel in self.files(f"{EVAL_DIR}/*.json")
                if Path(rel).name not in skip and not Path(rel).name.startswith((EVAL_LEDGER_PREFIX, COMPARE_PREFIX))]

    def eval(self, stem: str) -> EvalFile:
        return self.model(EvalFile, f"{EVAL_DIR}/{stem}.json")

    def compare_names(self) -> list[str]:
        """The comparisons under eval/ (`decoevo compare`) by file stem."""
        return [Path(rel).stem for rel in self.files(f"{EVAL_DIR}/{COMPARE_PREFIX}*.json")]

    def comparison(self, stem: str) -> CompareFile:
        return self.model(CompareFile, f"{EVAL_DIR}/{stem}.json")

    def dynamics(self) -> DynamicsFile | None:
        return self.model(DynamicsFile, DYNAMICS) if self.has(DYNAMICS) else None

    def alignment(self) -> AlignmentFile | None:
        return self.model(AlignmentFile, ALIGNMENT) if self.has(ALIGNMENT) else None

    # ---- audits ----------------------------------------------------------------------------------
    def audit_rounds(self) -> list[str]:
        """The outer rounds' audit folders (audits/outer_NNN), in order."""
        folder = self.path / AUDITS_DIR
        return sorted(p.relative_to(self.path).as_posix() for p in folder.glob("outer_*") if p.is_dir())

    def audit_round(self, rel: str) -> AuditFolder:
        """One audit folder; any bad line or file is an error naming it (the round is then unreadable,
        not shown with records missing)."""
        digits = Path(rel).name.removeprefix("outer_")
        # written whole (not appended), so a last line without its newline still counts
        records = {name: self.jsonl(f"{rel}/{name}.jsonl", log=False) for name in AUDIT_LOGS}
        verification = self.json(f"{rel}/{VERIFICATION}") if self.has(f"{rel}/{VERIFICATION}") else None
        return AuditFolder(int(digits) if digits.isdigit() else None, records, verification)

    # ---- skills ----------------------------------------------------------------------------------
    def skill(self, kind: str, version: int) -> Skill:
        rel = skill_path(kind, version)
        try:
            return parse_skill_markdown(self.text(rel))
        except ValueError as e:
            raise RunReadError(f"{self.path / rel}: {e}") from None

    def versions(self, kind: str) -> list[int]:
        folder = self.path / "skills" / kind
        return sorted(int(p.stem[1:]) for p in folder.glob("v*.md") if p.stem[1:].isdigit())

    def final_skill(self, kind: str) -> Skill:
        """The skill in force at the last checkpoint (its exact text), else the last saved version."""
        checkpoint = self.checkpoint()
        if checkpoint is not None and isinstance(checkpoint.state.get(kind), dict):
            return validate_record(Skill, checkpoint.state[kind], self.path / CHECKPOINT)
        summary = self.summary()
        if summary is not None:  # stopped before its first checkpoint: the summary names what it kept
            return self.skill(kind, summary.solver_version if kind == "solver" else summary.generator_version)
        versions = self.versions(kind)
        if not versions:
            raise RunReadError(f"{self.path}: no {kind} skill saved")
        return self.skill(kind, versions[-1])

    def shipped_skill_text(self) -> str:
        """What `decoevo export` prints: the final solver skill."""
        if self.has(CHECKPOINT) or self.versions("solver"):
            return self.final_skill("solver").text
        if self.has(FINAL_SKILL):
            return self.text(FINAL_SKILL)
        raise RunReadError(f"{self.path} is not a run directory (no checkpoint or skills found)")
