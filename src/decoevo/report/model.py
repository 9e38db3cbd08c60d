"""The report as data: everything the template shows, computed before any HTML is written."""

from __future__ import annotations

import datetime as _dt
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from .. import __version__
from ..analysis.claims import ClaimResult, evaluate_claims
from .claim_evidence import RunEvidence
from .discover import ReportInputError, SweepInfo, discover
from .fold import Fold, claims_fold, section_folds
from .labels import benchmark_label, benchmark_order, is_tiny_embedded, method_order
from .lead import Lead, lead
from .plots import GatePoint, InlineFigure, RoundMark, cost_figure, dynamics_figure, gates_figure, scores_figure
from .run_record import RunRecord
from .runs import load_run, transcripts_shown
from .tables import Section, sections

TINY_MODEL_WARNING = (
    "Scores graded by the tiny embedded model (SmolLM2-135M) are not meaningful. It lets the whole pipeline run "
    "on a laptop, but it cannot apply a benchmark's rubric reliably: read every score, gain, interval and "
    "p-value below as a check that the pipeline works, not as evidence about the methods. Grade with a capable "
    "model to compare methods.")
TINY_JUDGE_NOTE = (
    "The training-time judge is the tiny embedded model (SmolLM2-135M), so the proxy scores and gate "
    "decisions below reflect that model's rubric reading, which is not reliable.")


@dataclass(frozen=True)
class DynamicsView:
    benchmark: str
    figure: InlineFigure | None
    n_runs: int
    missing: tuple[RunRecord, ...]
    splits: tuple[str, ...]


@dataclass(frozen=True)
class SectionView:
    data: Section
    dynamics: tuple[DynamicsView, ...]
    cost_figures: Mapping[str, InlineFigure]
    score_figures: Mapping[str, InlineFigure] = field(default_factory=dict)  # by benchmark: test score per method
    folds: tuple[Fold, ...] = ()  # its sections with nothing to show, folded into one line

    @property
    def folded(self) -> frozenset[str]:
        return frozenset(f.key for f in self.folds)


@dataclass(frozen=True)
class UsageSummary:
    calls: int  # effective: paid + inherited
    paid_calls: int
    inherited_calls: int
    tokens: int
    paid_tokens: int
    inherited_tokens: int
    cache_hits: int
    retries: int
    repairs: int
    failures: Mapping[str, int]
    runs_counted: int
    estimated_calls: int = 0  # of paid_calls: sent but never answered (a kill), so their tokens are upper bounds
    running_calls: int = 0  # answered so far by runs still running (their ledger is written when they end)
    running_runs: int = 0


@dataclass(frozen=True)
class ModelRow:
    label: str
    backend: str
    uses: tuple[str, ...]  # "solver/judge/... in N runs", "grader", "matcher"
    tiny: bool


@dataclass(frozen=True)
class Report:
    title: str
    generated_at: str
    version: str
    inputs: tuple[str, ...]
    sweeps: tuple[SweepInfo, ...]
    runs: tuple[RunRecord, ...]
    sections: tuple[SectionView, ...]
    models: tuple[ModelRow, ...]
    usage: UsageSummary
    budgets: tuple[str, ...]
    graders: tuple[str, ...]
    tiny_grader: bool
    tiny_judge: bool
    problems: tuple[str, ...]
    claims: tuple[ClaimResult, ...] = ()  # the paper's claims checked on these runs (analysis/claims.py)
    run_figures: Mapping[str, InlineFigure] = field(default_factory=dict)  # by run anchor: its gate decisions
    lead: Lead | None = None  # a report of one run opens on what it ships and how that compares
    claims_fold: Fold | None = None  # the paper's claims, when none could be decided on these runs

    @property
    def folds(self) -> tuple[tuple[str, Fold], ...]:
        """(where, fold) for every section folded into the report's one line of what is not shown."""
        many = len(self.sections) > 1
        out = [(sv.data.backbone if many else "", f) for sv in self.sections for f in sv.folds]
        return tuple(out + ([("", self.claims_fold)] if self.claims_fold is not None else []))

    @property
    def methods(self) -> tuple[str, ...]:
        return tuple(sorted({r.method for r in self.runs}, key=method_order))

    @property
    def benchmarks(self) -> tuple[str, ...]:
        return tuple(sorted({r.benchmark for r in self.runs}, key=benchmark_order))

    @property
    def seeds(self) -> tuple[int | None, ...]:
        return tuple(sorted({r.seed for r in self.runs}, key=lambda s: (s is None, s or 0)))

    @property
    def status_counts(self) -> Mapping[str, int]:
        return dict(Counter(r.status for r in self.runs))

    @property
    def tiny_warning(self) -> str:
        return TINY_MODEL_WARNING

    @property
    def tiny_judge_note(self) -> str:
        return TINY_JUDGE_NOTE


def _anchor(name: str, taken: set[str]) -> str:
    base = "run-" + "".join(c if c.isalnum() or c in "-_" else "-" for c in name).strip("-")
    anchor, n = base, 2
    while anchor in taken:
        anchor, n = f"{base}-{n}", n + 1
    taken.add(anchor)
    return anchor


def _usage(runs: Iterable[RunRecord]) -> UsageSummary:
    keys = ("calls", "inherited_calls", "prompt_tokens", "completion_tokens", "inherited_tokens", "cache_hits",
            "retries", "repairs", "estimated_calls")
    sums: Counter[str] = Counter()
    failures: Counter[str] = Counter()
    n = running = running_calls = 0
    for r in runs:
        if r.progress is not None:  # a resumed run's ledger.json is its last stop's: calls.jsonl is current
            running, running_calls = running + 1, running_calls + r.progress.calls
            continue
        t = r.ledger_total
        if t is None:
            continue
        n += 1
        for k in keys:
            v = t.get(k, 0)
            sums[k] += v if isinstance(v, int) else 0
        for cat, v in (t.get("failures") or {}).items():
            failures[cat] += v if isinstance(v, int) else 0
    paid_tokens = sums["prompt_tokens"] + sums["completion_tokens"]
    return UsageSummary(calls=sums["calls"] + sums["inherited_calls"], paid_calls=sums["calls"],
                        inherited_calls=sums["inherited_calls"], tokens=paid_tokens + sums["inherited_tokens"],
                        paid_tokens=paid_tokens, inherited_tokens=sums["inherited_tokens"],
                        cache_hits=sums["cache_hits"], retries=sums["retries"], repairs=sums["repairs"],
                        failures=dict(failures), runs_counted=n, estimated_calls=sums["estimated_calls"],
                        running_calls=running_calls, running_runs=running)


def _models(runs: Iterable[RunRecord]) -> tuple[ModelRow, ...]:
    uses: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
    for r in runs:
        for m in r.models:
            roles = "every role" if m.roles == ("default",) else ", ".join(
                "other roles" if x == "default" else x for x in m.roles)
            uses[(m.label, m.backend)][f"optimization ({roles})"] += 1
        # once per run, however many versions or evaluations it graded
        for grader, kind in {(ev.grader_model, ev.kind) for ev in r.evals.values() if ev.grader_model}:
            uses[(grader, "")][f"gold grader ({'transfer' if kind == 'transfer' else 'test'})"] += 1
        if r.alignment is not None and r.alignment.matcher_model:
            uses[(r.alignment.matcher_model, "")]["rubric matcher"] += 1
    rows = []
    for (label, backend), counter in sorted(uses.items()):
        described = tuple(f"{use} in {n} run{'s' if n != 1 else ''}" for use, n in sorted(counter.items()))
        rows.append(ModelRow(label, backend, described, is_tiny_embedded(label)))
    return tuple(rows)


def _budgets(runs: Iterable[RunRecord]) -> tuple[str, ...]:
    counts: Counter[str] = Counter()
    for r in runs:
        b = r.budget
        parts = [f"{k.replace('_', ' ')} {v:,}" if isinstance(v, int) else f"{k.replace('_', ' ')} {v}"
                 for k, v in sorted(b.items())]
        counts["; ".join(parts) if parts else "no budget"] += 1
    return tuple(f"{text} ({n} run{'s' if n != 1 else ''})" for text, n in sorted(counts.items()))


def _dynamics(section: Section) -> tuple[DynamicsView, ...]:
    out = []
    for bench in section.benchmarks:
        group = [r for r in section.runs if r.benchmark == bench]
        by_method: dict[str, list[tuple]] = defaultdict(list)
        for r in group:
            if r.dynamics is not None:
                end = r.summary.get("steps_done") if r.summary is not None else None
                by_method[r.method].append((r.dynamics, end if isinstance(end, int) else None))
        key = f"dyn-{section.backbone}-{bench}"
        fig = dynamics_figure(key, benchmark_label(bench), by_method) if by_method else None
        splits = tuple(sorted({r.dynamics.split for r in group if r.dynamics is not None}))
        out.append(DynamicsView(bench, fig, sum(len(v) for v in by_method.values()),
                                tuple(r for r in group if r.dynamics is None), splits))
    return tuple(out)


def _run_figure(run: RunRecord) -> InlineFigure | None:
    points = [GatePoint(g.step, g.j_incumbent, g.j_candidate, g.outcome) for g in run.inner_gates]
    rounds = [RoundMark(g.after_step, g.round, g.outcome) for g in run.outer_gates]
    return gates_figure(f"gates-{run.anchor}", run.name, points, rounds)


def _score_figures(section: Section) -> dict[str, InlineFigure]:
    out = {}
    for bench in section.benchmarks:
        by_method: dict[str, list[float]] = defaultdict(list)
        prompts: list[str] = []
        for r in section.runs:
            if r.benchmark == bench and r.test_eval is not None and r.test_eval.score is not None:
                by_method[r.method].append(r.test_eval.score)
                prompts.append(r.test_eval.grader_prompt or "ours")
        fig = scores_figure(f"scores-{section.backbone}-{bench}", benchmark_label(bench), by_method, prompts)
        if fig is not None:
            out[bench] = fig
    return out


def build_report(paths: Iterable[Path | str], title: str = "DecoEvo report") -> Report:
    """Read every run under `paths` and compute the report. Raises ReportInputError when an argument is
    not a run or sweep directory, or when there is no run at all; damaged runs become listed problems."""
    inputs = tuple(str(p) for p in paths)
    locations, sweeps = discover(inputs)
    if not locations:
        raise ReportInputError(f"no run directories under {', '.join(inputs) or 'the arguments'}")
    taken: set[str] = set()
    shown = transcripts_shown(len(locations))
    runs = tuple(load_run(loc.path, name=loc.name, anchor=_anchor(loc.name, taken), sweep=loc.sweep,
                          benchmark_hint=loc.benchmark, transcripts_shown=shown) for loc in locations)
    runs = tuple(sorted(runs, key=lambda r: (benchmark_order(r.benchmark), method_order(r.method),
                                             r.seed if r.seed is not None else -1, r.name)))
    secs = sections(runs)
    views = []
    for s in secs:
        figures = {}
        for c in s.costs:
            if c.table is not None:
                fig = cost_figure(f"cost-{s.backbone}-{c.benchmark}", benchmark_label(c.benchmark), c.table)
                if fig is not None:
                    figures[c.benchmark] = fig
        dyn = _dynamics(s)
        views.append(SectionView(s, dyn, figures, _score_figures(s),
                                 section_folds(s, any(d.figure is not None for d in dyn))))
    problems = [f"sweep {sw.path}: cell {cell} failed: {msg}" for sw in sweeps for cell, msg in sw.failed]
    problems += [p for r in runs for p in r.problems]
    problems += [p for s in secs for p in s.problems]
    problems += [f"cost table for {benchmark_label(c.benchmark)}: {c.error}" for s in secs for c in s.costs
                 if c.error]
    graders = {ev.grader_model for r in runs for ev in r.evals.values() if ev.grader_model}
    the_lead = lead(runs)
    # the paper's claims are about its experiment (reproduce, a sweep): a report of one run leads with that run
    claims = evaluate_claims(RunEvidence(runs, sweeps)) if the_lead is None else ()
    return Report(
        title=title, generated_at=_dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC"), version=__version__,
        inputs=inputs, sweeps=tuple(sweeps), runs=runs, sections=tuple(views), models=_models(runs),
        usage=_usage(runs), budgets=_budgets(runs), graders=tuple(sorted(graders)),
        tiny_grader=any(is_tiny_embedded(g) for g in graders),
        tiny_judge=any(is_tiny_embedded(r.judge_model) for r in runs), problems=tuple(problems),
        claims=claims, lead=the_lead, claims_fold=claims_fold(claims),
        run_figures={r.anchor: fig for r in runs if (fig := _run_figure(r)) is not None})
