"""What a report of one run leads with: the skill it ships, its diff to the initial skill, and the
before/after result (`decoevo compare`, else the two skills' own gradings); and the per-question grid of a
comparison (both answers side by side, each criterion's grade and the grader's reason, as `promptfoo view`
shows an eval). Pure views over run records: no model call, no HTML."""

from __future__ import annotations

import difflib
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any, Literal

from ..benchmarks import find
from ..rundir.evalfiles import results_of
from ..rundir.progress import LiveProgress, clock_text
from ..rundir.records import CompareFile, EvalFile
from .grades import grade_text
from .labels import benchmark_label
from .run_record import Incident, RunRecord

State = Literal["finished", "running", "stopped"]


@dataclass(frozen=True)
class CriterionRow:
    criterion: str
    points: float | None
    before: float | None
    before_reason: str
    after: float | None
    after_reason: str
    error: str | None  # why a side could not be scored
    scheme: str = ""  # the gold scheme, whose scale the grades are on (a bare "1" says nothing)

    @property
    def changed(self) -> bool:
        return self.before != self.after

    @property
    def before_text(self) -> str:
        return grade_text(self.before, self.scheme)

    @property
    def after_text(self) -> str:
        return grade_text(self.after, self.scheme)


@dataclass(frozen=True)
class QuestionPair:
    question_id: str
    question: str
    before_response: str | None
    after_response: str | None
    before_score: float | None
    after_score: float | None
    delta: float | None
    criteria: tuple[CriterionRow, ...]
    before_ungraded: str | None
    after_ungraded: str | None

    @property
    def n_changed(self) -> int:
        return sum(c.changed for c in self.criteria)


def _items(grade: Mapping[str, Any]) -> dict[int, Mapping[str, Any]]:
    items = grade.get("items") if isinstance(grade, Mapping) else None
    return {int(i["index"]): i for i in items or () if isinstance(i, Mapping) and isinstance(i.get("index"), int)}


def _num(x: Any) -> float | None:
    return float(x) if isinstance(x, int | float) and not isinstance(x, bool) else None


def grid(comparison: CompareFile) -> tuple[QuestionPair, ...]:
    """Each question's two answers and, per gold criterion, both grades and the grader's reasons."""
    out = []
    for row in comparison.rows:
        before, after = _items(row.before.grade), _items(row.after.grade)
        scheme = str(row.before.grade.get("scheme") or row.after.grade.get("scheme") or comparison.benchmark or "")
        criteria = []
        for index in sorted(set(before) | set(after)):
            b, a = before.get(index, {}), after.get(index, {})
            errors = [f"{side}: {i.get('error')}" for side, i in (("before", b), ("after", a)) if i.get("error")]
            criteria.append(CriterionRow(str(b.get("criterion") or a.get("criterion") or ""),
                                         _num(b.get("points", a.get("points"))), _num(b.get("value")),
                                         str(b.get("rationale") or ""), _num(a.get("value")),
                                         str(a.get("rationale") or ""), "; ".join(errors) or None, scheme))
        out.append(QuestionPair(row.question_id, row.question, row.before.response, row.after.response,
                                row.before.score, row.after.score, row.delta, tuple(criteria),
                                row.before.grade.get("ungraded_reason"), row.after.grade.get("ungraded_reason")))
    return tuple(out)


@dataclass(frozen=True)
class Lead:
    """The first screen of a one-run report."""

    run: RunRecord
    shipped: int | None
    improved: bool | None  # None: the run wrote no summary (killed, or still running)
    why: str
    diff: str | None  # initial -> shipped, unified; None when the run ships its initial skill
    comparison: CompareFile | None
    before: EvalFile | None  # the initial skill's own test grading (when there is no comparison)
    after: EvalFile | None
    pairs: tuple[QuestionPair, ...]
    state: State = "finished"
    progress: LiveProgress | None = None  # state running: how far it has got
    stop: Incident | None = None  # state stopped: the error it stopped on (None: killed, no error recorded)
    resume: str | None = None  # state stopped: the command that continues it

    @property
    def title(self) -> str:
        """The first section's heading: what the run ships only once it has finished."""
        return {"running": "This run is still running", "stopped": "This run stopped before it finished"}.get(
            self.state, "What this run ships")

    @property
    def data_label(self) -> str:
        """The header's word for what the run trained on: a benchmark by its name, a user's file by its name."""
        bench = find(self.run.benchmark)
        if bench is not None and bench.source is not None:  # one of the paper's benchmarks, not "custom"
            return benchmark_label(self.run.benchmark)
        path = self.run.data.get("path")
        return f"data {PurePath(str(path)).name}" if path else "your data"

    @property
    def stopped_at(self) -> str:
        """Where the error stopped it, counted as the progress line counts (from 1): 'in step 2 of 6'."""
        where = self.stop.where if self.stop is not None else ""
        index = where.removeprefix("at_step ")
        if not index.isdigit():
            return f"at {where}" if where else ""
        hyper = self.run.config.get("hyper")
        total = hyper.get("steps") if isinstance(hyper, Mapping) else None
        return f"in step {int(index) + 1}" + (f" of {total}" if isinstance(total, int) else "")

    @property
    def step_line(self) -> str | None:
        """Running: the step of the total, what it is doing, calls answered, time and ETA."""
        p = self.progress
        if p is None:
            return None
        total = p.steps_total
        parts = [f"step {p.step} of {total}" if total else f"step {p.step}"]
        if p.phase:
            parts.append(f"working on {p.phase}")
        parts.append(f"{p.calls:,} model calls answered")
        if p.elapsed is not None:
            parts.append(f"running for {clock_text(p.elapsed)}")
        parts.append(f"ETA about {clock_text(p.eta)}" if p.eta is not None else "ETA once its first step is done")
        return ", ".join(parts)

    @property
    def has_test(self) -> bool:
        """The run holds out a test split (`compare` compares on it by default)."""
        return bool(self.run.split_ids and self.run.split_ids.get("test"))

    @property
    def delta(self) -> float | None:
        if self.comparison is not None:
            return self.comparison.mean_delta
        if self.before is not None and self.after is not None and None not in (self.before.score, self.after.score):
            return self.after.score - self.before.score  # type: ignore[operator]
        return None


def _test_result(run: RunRecord, version: int) -> EvalFile | None:
    stem = results_of({k: e for k, e in run.evals.items() if e.name == "test"}, version).get("test")
    return run.evals[stem] if stem is not None else None


def _state(run: RunRecord) -> tuple[State, Incident | None, str | None]:
    """(state, the error it stopped on, the resume command): a run without summary.json that no live
    process holds stopped, on an error it logged or killed; a budget stop is a planned end."""
    if run.status == "running":
        return "running", None, None
    if run.finished:
        return "finished", None, None
    stop = next((i for i in reversed(run.incidents) if i.event == "stopped"), None)
    return "stopped", stop, shlex.join(["decoevo", "resume", str(run.path)])


def lead(runs: Sequence[RunRecord]) -> Lead | None:
    """The lead of a report of exactly one run (a sweep's report leads with its tables)."""
    if len(runs) != 1:
        return None
    run = runs[0]
    final = (run.summary or {}).get("final_solver")
    kind, _, why = str(final).partition(": ") if isinstance(final, str) else ("", "", "")
    texts = {s.version: s.text for s in run.solver}
    shipped = run.shipped_version
    diff = None
    if shipped is not None and shipped != 0 and 0 in texts and shipped in texts:
        diff = "\n".join(difflib.unified_diff(texts[0].splitlines(), texts[shipped].splitlines(), "v000 (initial)",
                                              f"v{shipped:03d} ({'shipped' if run.finished else 'so far'})",
                                              lineterm=""))
    comparison = run.comparison
    state, stop, resume = _state(run)
    return Lead(run, shipped, None if not kind else kind == "improved", why, diff, comparison,
                _test_result(run, 0) if shipped not in (None, 0) else None, run.test_eval,
                grid(comparison) if comparison is not None else (), state, run.progress, stop, resume)
