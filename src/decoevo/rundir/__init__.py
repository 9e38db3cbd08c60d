"""The run directory: the only code that knows its files. One writer (`RunWriter`, under `RunLock`),
one read-only reader (`RunReader`), and the resume loader (`prepare_resume`), the one place that
repairs a log on read. Typed events in `events`, file records in `records`."""

from .events import (
    BudgetStopEvent,
    FinishEvent,
    InnerStepEvent,
    InnerStepFailedEvent,
    InvalidCandidateEvent,
    OtherEvent,
    OuterRoundEvent,
    OuterRoundFailedEvent,
    ResumeEvent,
    RunEvent,
    StartEvent,
    StoppedEvent,
    make_event,
    parse_event,
)
from .files import UnsafeRunPath
from .lock import RunLock, RunLocked
from .reader import RunReader, RunReadError
from .records import FORMAT_VERSION, CallLine, Checkpoint, RunStatus, Summary
from .requests import RequestLog
from .resume import ResumePoint, checkpoint_to_resume, prepare_resume, settle_interrupted, settled_calls
from .skills import parse_skill_markdown, skill_markdown
from .transcripts import TranscriptEntry
from .writer import RunWriter

__all__ = [
    "FORMAT_VERSION", "BudgetStopEvent", "CallLine", "Checkpoint", "FinishEvent", "InnerStepEvent",
    "InnerStepFailedEvent", "InvalidCandidateEvent", "OtherEvent", "OuterRoundEvent", "OuterRoundFailedEvent",
    "RequestLog", "ResumeEvent", "ResumePoint", "RunEvent", "RunLock", "RunLocked", "RunReadError", "RunReader",
    "RunStatus", "RunWriter", "StartEvent", "StoppedEvent", "Summary", "TranscriptEntry", "UnsafeRunPath",
    "checkpoint_to_resume", "make_event",
    "parse_event", "parse_skill_markdown", "prepare_resume", "settle_interrupted", "settled_calls",
    "skill_markdown",
]
