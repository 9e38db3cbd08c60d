"""The event log's types: one model per event, a discriminated union on `event`.

The engine emits these (`RunWriter.emit`), callbacks receive them, and every reader (timeline, report,
progress) parses them back through `parse_event`. Extra fields are kept, not rejected, so a run written
by a newer version still reads; an event type this version does not know reads as `OtherEvent`.
"""

from __future__ import annotations

import time
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from .outcomes import Outcome, outcome_of


class _Event(BaseModel):
    # built when first used, as the run directory's records are (rundir/records.py, _Record)
    model_config = ConfigDict(extra="allow", frozen=True, defer_build=True)

    t: float = Field(default_factory=lambda: round(time.time(), 3))


class StartEvent(_Event):
    event: Literal["start"] = "start"
    method: str
    seed: int
    format_version: int | None = None
    config: dict[str, Any] | None = None  # the resolved configuration (None before it was recorded here)
    run_id: str | None = None  # made at the start; each checkpoint carries it (None before it was recorded)


class ResumeEvent(_Event):
    event: Literal["resume"] = "resume"
    next_step: int
    # result-changing edits of config.yaml continued under --accept-changed-config, and the configuration
    # in force from here on (what the next resume compares with)
    accepted_config_changes: list[str] = Field(default_factory=list)
    config: dict[str, Any] | None = None


class InnerStepEvent(_Event):
    """One inner step: the batch's scores, the solver gate's decision on V_s, the version in force after."""

    event: Literal["inner_step"] = "inner_step"
    step: int
    batch_scores: dict[str, float] | list[float] = Field(default_factory=dict)
    accepted: bool
    J_incumbent: float | None = None
    J_candidate: float | None = None
    n: int | None = None
    note: str | None = None
    solver_version: int
    invalid: str | None = None  # the validity problem of a candidate that was not a skill (never gated)
    outcome: Outcome | None = None  # None in runs written before it was recorded: `candidate_outcome` derives it

    @property
    def candidate_outcome(self) -> Outcome:
        return self.outcome or outcome_of(self.accepted, invalid=self.invalid, gated=self.J_candidate is not None)


class OuterRoundEvent(_Event):
    """One outer round: audit record counts, the generator decision (Pareto or a control's rule)."""

    event: Literal["outer_round"] = "outer_round"
    round: int
    structural_records: int = 0
    contrastive_records: int = 0
    accepted: bool | None = None  # None: no candidate was proposed
    policy: str | None = None
    reason: str | None = None
    deltas: dict[str, float] = Field(default_factory=dict)
    generator_version: int
    invalid: str | None = None  # the validity problem of a candidate that was not a skill (never verified)
    outcome: Outcome | None = None  # None in runs written before it was recorded: `candidate_outcome` derives it
    # the audits a stop rule cut short (`probe_enough_pairs`, `frozen_enough_pairs`): {"probe": {"audited": 2, "of": 6}}
    audits_stopped: dict[str, dict[str, int]] = Field(default_factory=dict)
    # the co-evolution budget (`generator_share`) after the round: {"allowance": tokens, "spent": tokens}; a round
    # it held back is not run, so it has no event
    generator_budget: dict[str, int] = Field(default_factory=dict)

    @property
    def candidate_outcome(self) -> Outcome:
        return self.outcome or outcome_of(self.accepted, invalid=self.invalid)


class _Failure(_Event):
    category: str
    role: str = ""
    error: str = ""


class InnerStepFailedEvent(_Failure):
    """A step voided by a model output that stayed unusable after bounded repair."""

    event: Literal["inner_step_failed"] = "inner_step_failed"
    step: int


class OuterRoundFailedEvent(_Failure):
    event: Literal["outer_round_failed"] = "outer_round_failed"
    round: int


class InvalidCandidateEvent(_Event):
    """A rewrite that is not a usable skill (empty, cut off, a fragment, a copy): never gated or shipped."""

    event: Literal["invalid_candidate"] = "invalid_candidate"
    skill: str  # solver | generator
    problem: str  # truncated, fragment, empty, repetitive, copy, collapsed (engine/validity.py)
    reason: str = ""
    text: str = ""  # the candidate (clipped); the whole text is under candidates/


class BudgetStopEvent(_Event):
    event: Literal["budget_stop"] = "budget_stop"
    reason: str
    at_step: int
    solver_version: int | None = None  # the version kept (the last checkpoint's); None in older runs
    dropped_solver_version: int | None = None  # a version accepted in the step the stop cut short


class StoppedEvent(_Failure):
    """The run stopped on an error it cannot void (e.g. retries exhausted); `decoevo resume` continues it."""

    event: Literal["stopped"] = "stopped"
    at_step: int


class FinishEvent(_Event):
    event: Literal["finish"] = "finish"
    method: str
    seed: int
    steps_done: int
    solver_version: int
    generator_version: int
    stopped: str | None = None


class OtherEvent(_Event):
    """An event type this version does not know (written by a newer one); kept as it is."""

    event: str


KnownEvent = Annotated[
    StartEvent | ResumeEvent | InnerStepEvent | OuterRoundEvent | InnerStepFailedEvent | OuterRoundFailedEvent
    | InvalidCandidateEvent | BudgetStopEvent | StoppedEvent | FinishEvent,
    Field(discriminator="event"),
]
RunEvent = KnownEvent | OtherEvent
_KNOWN: TypeAdapter[Any] = TypeAdapter(KnownEvent, config=ConfigDict(defer_build=True))
EVENT_TYPES: frozenset[str] = frozenset(
    m.model_fields["event"].default for m in (StartEvent, ResumeEvent, InnerStepEvent, OuterRoundEvent,
                                              InnerStepFailedEvent, OuterRoundFailedEvent, InvalidCandidateEvent,
                                              BudgetStopEvent, StoppedEvent, FinishEvent))
FAILURE_EVENTS = frozenset({"inner_step_failed", "outer_round_failed", "stopped"})


class EventError(ValueError):
    """A line of events.jsonl that is not an event this version can read."""


def parse_event(data: Any) -> RunEvent:
    if not isinstance(data, dict) or not isinstance(data.get("event"), str):
        raise EventError("not an event object (no 'event' name)")
    if data["event"] not in EVENT_TYPES:
        return OtherEvent.model_validate(data)
    try:
        event: RunEvent = _KNOWN.validate_python(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"][1:]) or "(event)"
        raise EventError(f"{data['event']} event, field '{where}': {first['msg']}") from None
    return event


def make_event(kind: str, **data: Any) -> RunEvent:
    """The typed event for `kind` (the engine's emit points name their event and its fields)."""
    return parse_event({"event": kind, **data})
