"""What became of a step's or a round's candidate skill: one vocabulary for every place that says it.

The terminal's progress lines, the event log, the report's tables, its figures and their legends all
name an outcome through `label`, so the same outcome never reads as
"kept" in one place, "rejected" in another and "no candidate gated" in a third.
"""

from __future__ import annotations

from enum import StrEnum


class Outcome(StrEnum):
    ACCEPTED = "accepted"  # the gate (or the verification) took the candidate: it is the new incumbent
    REJECTED = "rejected"  # gated and turned down: the incumbent is kept
    INVALID = "invalid"  # not a skill (engine/validity.py): never gated, the incumbent is kept
    NO_CANDIDATE = "no_candidate"  # nothing was proposed (no failures to learn from, no audit records)


_LABELS = {
    Outcome.ACCEPTED: "accepted",
    Outcome.REJECTED: "rejected (incumbent kept)",
    Outcome.INVALID: "invalid (not gated)",
    Outcome.NO_CANDIDATE: "no candidate",
}
# The colour a terminal or a badge gives each outcome (rich style names; the report maps them to classes).
STYLE = {Outcome.ACCEPTED: "green", Outcome.REJECTED: "yellow", Outcome.INVALID: "red", Outcome.NO_CANDIDATE: "dim"}


def label(outcome: Outcome) -> str:
    """The full words: `rejected (incumbent kept)`."""
    return _LABELS[outcome]


def outcome_of(accepted: bool | None, *, invalid: object = None, gated: bool = True) -> Outcome:
    """The outcome from an event's fields: `accepted` (None: nothing proposed), `invalid` (the validity
    problem, when the candidate was not a skill) and `gated` (False: the step had no candidate to gate)."""
    if invalid:
        return Outcome.INVALID
    if accepted is None or (not accepted and not gated):
        return Outcome.NO_CANDIDATE
    return Outcome.ACCEPTED if accepted else Outcome.REJECTED

