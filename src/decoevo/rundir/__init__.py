"""The run directory: the only code that knows its files. One writer (`RunWriter`, under `RunLock`),
one read-only reader (`RunReader`), and the resume loader (`prepare_resume`), the one place that
repairs a log on read. Typed events in `events`, file records in `records`.

The reader and the resume loader come on first use of their names: a new run writes its directory and reads it
only after its last step (or on a resume), so it does not import them before its first call
(tests/test_startup.py)."""

from typing import TYPE_CHECKING, Any

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
from .files import RunReadError, UnsafeRunPath
from .lock import RunLock, RunLocked
from .records import FORMAT_VERSION, CallLine, Checkpoint, RunStatus, Summary
from .requests import RequestLog
from .skills import parse_skill_markdown, skill_markdown
from .transcripts import TranscriptEntry
from .writer import RunWriter

if TYPE_CHECKING:
    from .reader import RunReader
    from .resume import ResumePoint, checkpoint_to_resume, prepare_resume, settle_interrupted, settled_calls

_LAZY = {"RunReader": ".reader", "ResumePoint": ".resume", "checkpoint_to_resume": ".resume",
         "prepare_resume": ".resume", "settle_interrupted": ".resume", "settled_calls": ".resume"}

__all__ = [
    "FORMAT_VERSION", "BudgetStopEvent", "CallLine", "Checkpoint", "FinishEvent", "InnerStepEvent",
    "InnerStepFailedEvent", "InvalidCandidateEvent", "OtherEvent", "OuterRoundEvent", "OuterRoundFailedEvent",
    "RequestLog", "ResumeEvent", "ResumePoint", "RunEvent", "RunLock", "RunLocked", "RunReadError", "RunReader",
    "RunStatus", "RunWriter", "StartEvent", "StoppedEvent", "Summary", "TranscriptEntry", "UnsafeRunPath",
    "checkpoint_to_resume", "make_event",
    "parse_event", "parse_skill_markdown", "prepare_resume", "settle_interrupted", "settled_calls",
    "skill_markdown",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
