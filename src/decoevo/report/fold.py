"""Sections with nothing to show, folded into one line of the report (with the command that fills each,
when there is one), so a report of one run opens on its result rather than on a column of empty boxes."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from ..analysis.claims import CONTRADICTED, SUPPORTED, ClaimResult
from .hints import next_steps
from .run_record import RunRecord
from .tables import Section


@dataclass(frozen=True)
class Fold:
    key: str  # the section's anchor stem: results, comparisons, dynamics, alignment, claims
    title: str
    note: str  # why there is nothing to show
    command: str | None = None  # what computes it


def _step(kind: str, runs: Sequence[RunRecord]) -> tuple[str, str | None]:
    """"not computed" and the command that computes it, or why no command can."""
    steps = next_steps(kind, runs)
    command = next((s.command for s in steps if s.command), None)
    notes = [s.note for s in steps if not s.command and s.note]
    return ("not computed" if command else f"not computed: {'; '.join(notes) or 'no run'}"), command


def section_folds(s: Section, has_dynamics: bool) -> tuple[Fold, ...]:
    """The sections of one backbone that have nothing to show."""
    out = []
    if not s.main.has_scores:
        out.append(Fold("results", "Main results", *_step("eval", s.without_eval or s.runs)))
    if not s.comparisons.rows:
        out.append(Fold("comparisons", "Paired comparisons", f"no comparison: {s.comparisons.note or 'one method'}"))
    if not has_dynamics:
        out.append(Fold("dynamics", "Training dynamics", *_step("dynamics", s.runs)))
    if not any(a.rows for a in s.alignment):
        out.append(Fold("alignment", "Rubric alignment", *_step("align", s.runs)))
    return tuple(out)


def claims_fold(claims: Sequence[ClaimResult]) -> Fold | None:
    """The paper's claims fold when no claim could be decided either way on these runs and none has a paired
    difference to show (a one-seed experiment's differences are shown, undecided)."""
    if not claims or any(c.verdict in (SUPPORTED, CONTRADICTED) or c.effects for c in claims):
        return None
    counts = Counter(c.verdict for c in claims)
    said = ", ".join(f"{n} {verdict}" for verdict, n in sorted(counts.items()))
    return Fold("claims", "The paper's claims", f"none of {len(claims)} can be checked on these runs ({said}); "
                "the `reproduce` command runs the experiment they are about")
