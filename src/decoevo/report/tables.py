"""The report's tables, computed from run records with decoevo.analysis (no model calls, no HTML).

Scores are grouped by backbone (the solver's model), then by method and seed: in a sweep one seed of a
method spans several run directories, one per source benchmark, and its transfer evaluations live in the
source run's eval/ folder. The per-seed average over all columns is the paper's "Avg." (computed within
a run, then aggregated over seeds); a seed missing any column has no average, and the table says so.
Ablations and controls are compared on the columns they were evaluated on (the paper's Tables 2 and 3
are source-benchmark tables): their tables show those columns only, and each paired comparison averages
over the columns both methods have.
Each cell also carries its coverage (questions graded / evaluated, over its seeds), flagged below 95%; the
paired comparisons score both methods on the questions graded in both (`report.paired`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from ..analysis.stats import (
    EXPLORATORY_FAMILY,
    Coverage,
    MeanStd,
    PairedCI,
    comparison_family,
    holm_by_family,
    mean_std,
    paired_difference,
    per_run_average,
    relative_gain,
)
from ..rundir.records import EvalFile
from .benchmark_tables import AlignmentTable, CostSection, alignment_tables, cost_sections
from .labels import (
    ABLATIONS,
    BASELINE,
    CONTROLS,
    PROPOSED,
    benchmark_label,
    benchmark_order,
    method_label,
    method_order,
    transfer_label,
)
from .paired import common_scores, coverage, paired_scores
from .run_record import RunRecord

SeedKey = tuple[str, int | None]  # (method, seed)
Evals = Mapping[SeedKey, Mapping["Column", EvalFile]]


@dataclass(frozen=True)
class Column:
    benchmark: str
    transfer: bool
    graded_as: str = ""  # a transfer's gold scheme (the grader its questions were graded with)

    @property
    def label(self) -> str:
        return transfer_label(self.benchmark, self.graded_as) if self.transfer else benchmark_label(self.benchmark)

    @property
    def key(self) -> str:
        return f"{'transfer-' if self.transfer else ''}{self.benchmark}"


@dataclass(frozen=True)
class Cell:
    stat: MeanStd | None
    missing: int  # seeds of the method without a value here
    best: bool = False
    coverage: Coverage | None = None  # questions graded / evaluated, summed over the seeds (None: no eval)


@dataclass(frozen=True)
class ColumnGrader:
    """Who graded a column: the grader model(s) of its evaluations and how many were self-graded (the
    grader's model also played an optimization role in the run; evaluation/independence.py)."""

    models: tuple[str, ...]
    self_graded: int
    unknown: int  # evaluations that do not say
    total: int
    notes: tuple[str, ...] = ()  # the benchmark's own headline, when decoevo does not compute it
    prompts: tuple[str, ...] = ()  # "official" / "ours": the grader prompts behind the column

    @property
    def prompt_label(self) -> str:
        if len(self.prompts) > 1:
            return "mixed prompts: official and ours"
        return {"official": "official prompt", "ours": "our prompt"}.get(self.prompts[0], "") if self.prompts else ""

    @property
    def label(self) -> str:
        return ", ".join(self.models) if self.models else "grader not recorded"


def column_graders(evals: Evals, methods: Sequence[str], columns: Sequence[Column]) -> tuple[ColumnGrader, ...]:
    out = []
    for col in columns:
        files = [by_col[col] for (m, _), by_col in evals.items() if m in methods and col in by_col]
        out.append(ColumnGrader(tuple(sorted({f.grader_model for f in files if f.grader_model})),
                                sum(f.self_graded is True for f in files), sum(f.self_graded is None for f in files),
                                len(files), tuple(sorted({f.not_implemented for f in files if f.not_implemented})),
                                tuple(sorted({f.grader_prompt or "ours" for f in files}))))
    return tuple(out)


@dataclass(frozen=True)
class ScoreRow:
    method: str
    n_seeds: int
    cells: tuple[Cell, ...]
    avg: Cell
    delta: float | None  # relative gain (%) or points, per the table's `delta_kind`
    reference: bool = False

    @property
    def label(self) -> str:
        return method_label(self.method)


@dataclass(frozen=True)
class ScoreTable:
    key: str
    title: str
    caption: str
    columns: tuple[Column, ...]
    rows: tuple[ScoreRow, ...]
    delta_kind: str  # "gain" (relative gain over SkillOpt, %) or "points" (difference from DecoEvo)
    delta_reference: str
    graders: tuple[ColumnGrader, ...] = ()  # one per column

    @property
    def self_graded(self) -> bool:
        return any(g.self_graded for g in self.graders)

    @property
    def notes(self) -> tuple[tuple[str, str], ...]:
        """(column label, note) for columns whose benchmark headline is not what the score is."""
        return tuple((c.label, n) for c, g in zip(self.columns, self.graders, strict=False) for n in g.notes)

    @property
    def show_avg(self) -> bool:
        return len(self.columns) > 1

    @property
    def has_scores(self) -> bool:
        return any(c.stat is not None for r in self.rows for c in r.cells)


@dataclass(frozen=True)
class Comparison:
    method: str
    seeds: tuple[int | None, ...]  # the paired seeds used
    unpaired: tuple[int | None, ...]  # seeds with an average on one side only, left out
    ci: PairedCI | None
    p_holm: float | None
    reject: bool | None
    reason: str | None
    questions: Coverage | None = None  # questions graded in both / evaluated, over the paired seeds and columns
    family: str = EXPLORATORY_FAMILY  # the Holm family (analysis.stats.comparison_family)
    columns: tuple[str, ...] = ()  # labels of the columns averaged (those both methods were evaluated on)


@dataclass(frozen=True)
class ComparisonTable:
    proposed: str
    measure: str
    rows: tuple[Comparison, ...]
    note: str | None = None


@dataclass(frozen=True)
class Section:
    """Everything about runs that share a backbone."""

    backbone: str
    runs: tuple[RunRecord, ...]
    main: ScoreTable
    ablations: ScoreTable | None
    controls: ScoreTable | None
    comparisons: ComparisonTable
    alignment: tuple[AlignmentTable, ...]
    costs: tuple[CostSection, ...]
    without_eval: tuple[RunRecord, ...]
    problems: tuple[str, ...] = field(default=())
    low_coverage: tuple[str, ...] = field(default=())  # cells scored on under 95% of their questions

    @property
    def benchmarks(self) -> tuple[str, ...]:
        return tuple(sorted({r.benchmark for r in self.runs}, key=benchmark_order))


# ---- scores ------------------------------------------------------------------------------------------


def collect_scores(runs: Sequence[RunRecord], problems: list[str]) -> tuple[
        dict[SeedKey, dict[Column, float]], dict[SeedKey, set[Column]], list[Column],
        dict[SeedKey, dict[Column, EvalFile]]]:
    """Per (method, seed): the score of each column, the columns evaluated but ungraded, all columns, and
    the evaluation file behind each column."""
    scores: dict[SeedKey, dict[Column, float]] = defaultdict(dict)
    ungraded: dict[SeedKey, set[Column]] = defaultdict(set)
    evals: dict[SeedKey, dict[Column, EvalFile]] = defaultdict(dict)
    source: dict[tuple[SeedKey, Column], RunRecord] = {}
    columns: set[Column] = set()
    for run in runs:
        key = (run.method, run.seed)
        scores.setdefault(key, {})
        for ev in run.results.values():  # the shipped skill's gradings (another version's is no result)
            if ev.name != "test" and ev.kind != "transfer":  # another split (e.g. `eval --split diagnostic`)
                continue
            # The test split is of the run's own data, so its column is the run's benchmark: in a sweep, the
            # sweep's name for the data, since two benchmarks there may share a gold scheme (two custom files,
            # or two HealthBench subsets) and one column for both would keep only the first.
            transfer = ev.kind == "transfer"
            # A transfer's column is its file's name (transfer-NAME): two transfers of one format (two JSONL
            # files) grade under one scheme, and a column per scheme would keep only the first.
            name = ev.name.removeprefix("transfer-") if ev.name.startswith("transfer-") else ev.benchmark
            col = Column(name, True, ev.benchmark) if transfer else Column(run.benchmark, False)
            columns.add(col)
            if (key, col) in source:
                problems.append(f"{run.method} seed {run.seed}: {col.label} is evaluated in both "
                                f"{source[(key, col)].path} and {run.path}; the first is used")
                continue
            source[(key, col)] = run
            evals[key][col] = ev
            if ev.score is None:
                ungraded[key].add(col)
            else:
                scores[key][col] = ev.score
    ordered = sorted(columns, key=lambda c: (c.transfer, benchmark_order(c.benchmark)))
    return dict(scores), dict(ungraded), ordered, dict(evals)


def seed_averages(scores: Mapping[SeedKey, Mapping[Column, float]], columns: Sequence[Column]
                  ) -> dict[str, dict[int | None, float]]:
    """method -> seed -> the unweighted mean over all columns, for seeds that have every column."""
    out: dict[str, dict[int | None, float]] = defaultdict(dict)
    for (method, seed), by_col in scores.items():
        if columns and all(c in by_col for c in columns):
            out[method][seed] = per_run_average({c.key: by_col[c] for c in columns}, [c.key for c in columns])
    return dict(out)


def _cell(values: list[float], n_seeds: int, files: Sequence[EvalFile] = ()) -> Cell:
    covered = sum((coverage(f) for f in files), Coverage(0, 0)) if files else None
    return Cell(mean_std(values) if values else None, n_seeds - len(values), coverage=covered)


def headline_scores(evals: Evals, methods: Sequence[str], columns: Sequence[Column]
                    ) -> tuple[dict[SeedKey, dict[Column, float]], dict[SeedKey, dict[Column, Coverage]]]:
    """Per (method, seed) and column: the method's score on the questions graded for every method of the
    table that graded any question of that column in that seed, and that coverage. A method whose grader
    failed on a question does not keep a mean over an easier or harder mix than the others'."""
    scores: dict[SeedKey, dict[Column, float]] = defaultdict(dict)
    covered: dict[SeedKey, dict[Column, Coverage]] = defaultdict(dict)
    for seed in {s for (m, s) in evals if m in methods}:
        for c in columns:
            files = {m: evals[(m, seed)][c] for m in methods
                     if c in evals.get((m, seed), {}) and evals[(m, seed)][c].score is not None}
            common = common_scores(files)
            if common is None:
                continue
            for m, v in common.scores.items():
                scores[(m, seed)][c] = v
                covered[(m, seed)][c] = common.questions
    return dict(scores), dict(covered)


def _headline_cell(method: str, seeds: Sequence[int | None], c: Column,
                   scores: Mapping[SeedKey, Mapping[Column, float]],
                   covered: Mapping[SeedKey, Mapping[Column, Coverage]], evals: Evals) -> Cell:
    """A cell over the method's seeds; its coverage sums, per seed with an evaluation file, the questions
    it was scored on (none when its file shared no graded question) over the split's questions."""
    values = [scores[(method, s)][c] for s in seeds if c in scores.get((method, s), {})]
    stat = mean_std(values) if values else None
    files = {s: evals[(method, s)][c] for s in seeds if c in evals.get((method, s), {})}
    if not files:
        return Cell(stat, len(seeds) - len(values))
    total = Coverage(0, 0)
    for s, f in files.items():
        total = total + covered.get((method, s), {}).get(c, Coverage(0, coverage(f).total))
    return Cell(stat, len(seeds) - len(values), coverage=total)


def score_table(key: str, title: str, caption: str, methods: Sequence[str],
                seeds: Mapping[str, list[int | None]], scores: Mapping[SeedKey, Mapping[Column, float]],
                columns: Sequence[Column], delta_kind: str, reference: str, evals: Evals | None = None) -> ScoreTable:
    """One table; with `evals` every cell is scored on the questions graded for all its methods (per seed),
    and its coverage is those questions over the split's."""
    evals = evals or {}
    covered: dict[SeedKey, dict[Column, Coverage]] = {}
    if evals:
        scores, covered = headline_scores(evals, methods, columns)
    averages = seed_averages(scores, columns)
    rows = []
    for method in methods:
        method_seeds = seeds[method]
        cells = tuple(_headline_cell(method, method_seeds, c, scores, covered, evals) for c in columns)
        avg = _cell(list(averages.get(method, {}).values()), len(method_seeds))
        rows.append(ScoreRow(method, len(method_seeds), cells, avg, None, reference=method == reference))
    ref = next((r for r in rows if r.method == reference and r.avg.stat is not None), None)
    with_delta = []
    for r in rows:
        delta = None
        if ref is not None and ref.avg.stat is not None and r.avg.stat is not None and r.method != reference:
            if delta_kind == "gain":
                try:
                    delta = relative_gain(r.avg.stat.mean, ref.avg.stat.mean)
                except ValueError:  # a zero baseline has no relative gain
                    delta = None
            else:
                delta = r.avg.stat.mean - ref.avg.stat.mean
        with_delta.append(ScoreRow(r.method, r.n_seeds, r.cells, r.avg, delta, r.reference))
    return ScoreTable(key, title, caption, tuple(columns), _mark_best(with_delta, len(columns)), delta_kind,
                      reference, column_graders(evals, methods, columns))


def _mark_best(rows: list[ScoreRow], n_cols: int) -> tuple[ScoreRow, ...]:
    """Bold the best mean of each column, as the paper does (ties all bold)."""
    def best(cells: list[Cell]) -> list[Cell]:
        means = [c.stat.mean for c in cells if c.stat is not None]
        if len(means) < 2:
            return cells
        top = max(means)
        return [Cell(c.stat, c.missing, c.stat is not None and c.stat.mean == top, c.coverage) for c in cells]

    by_col = [best([r.cells[i] for r in rows]) for i in range(n_cols)]
    avgs = best([r.avg for r in rows])
    return tuple(ScoreRow(r.method, r.n_seeds, tuple(by_col[i][j] for i in range(n_cols)), avgs[j], r.delta,
                          r.reference) for j, r in enumerate(rows))


def evaluated_columns(evals: Evals, methods: Sequence[str], columns: Sequence[Column]) -> list[Column]:
    """The columns (in table order) any of `methods` has an evaluation file for, in any seed."""
    have = {c for (m, _), by_col in evals.items() if m in methods for c in by_col}
    return [c for c in columns if c in have]


def shared_columns(evals: Evals, columns: Sequence[Column], a: str, b: str) -> list[Column]:
    """The columns a paired average of a and b covers: every column for two main-table methods (a missing
    evaluation then leaves that seed unpaired, said so, rather than shrinking the paper's Avg.); for an
    ablation or control, the columns both were evaluated on (in some seed), so a variant run on the source
    benchmark only is compared with DecoEvo there, as the paper's Tables 2 and 3 do."""
    if not ({a, b} & (set(ABLATIONS) | set(CONTROLS))):
        return list(columns)
    theirs = set(evaluated_columns(evals, [b], columns))
    return [c for c in evaluated_columns(evals, [a], columns) if c in theirs]


def paired_averages(evals: Evals, columns: Sequence[Column], ours: str, theirs: str
                    ) -> tuple[dict[int | None, float], dict[int | None, float], Coverage]:
    """Per seed both methods cover in every column: each method's average over the columns, each column
    scored on the questions graded for both methods; and the questions so paired / evaluated."""
    seeds_ours = {s: by_col for (m, s), by_col in evals.items() if m == ours}
    seeds_theirs = {s: by_col for (m, s), by_col in evals.items() if m == theirs}
    a: dict[int | None, float] = {}
    b: dict[int | None, float] = {}
    questions = Coverage(0, 0)
    for seed in set(seeds_ours) & set(seeds_theirs):
        pairs = [paired_scores(seeds_ours[seed][c], seeds_theirs[seed][c]) if c in seeds_ours[seed]
                 and c in seeds_theirs[seed] else None for c in columns]
        if not columns or any(p is None for p in pairs):
            continue
        done = [p for p in pairs if p is not None]
        a[seed] = per_run_average({c.key: p.ours for c, p in zip(columns, done, strict=True)})
        b[seed] = per_run_average({c.key: p.theirs for c, p in zip(columns, done, strict=True)})
        questions = sum((p.questions for p in done), questions)
    return a, b, questions


def comparisons(evals: Evals, columns: Sequence[Column], methods: Sequence[str]) -> ComparisonTable:
    """DecoEvo − each other method on the per-seed average over the columns both were evaluated on, paired
    over the seeds both have and, within a column, over the questions graded in both, with 95% CIs. Holm's
    correction is applied across the backbones by `with_holm`: the comparison with SkillOpt is the paper's
    prespecified family, the rest an exploratory one."""
    measure = ("per-seed average over the columns both methods were evaluated on (each column scored on the "
               "questions graded for both methods)")
    if PROPOSED not in methods:
        return ComparisonTable(PROPOSED, measure, (), note="no DecoEvo runs in this report")
    rows = []
    for m in methods:
        if m == PROPOSED:
            continue
        family = comparison_family(PROPOSED, m, paper_proposed=PROPOSED, paper_baseline=BASELINE)
        cols = shared_columns(evals, columns, PROPOSED, m)
        labels = tuple(c.label for c in cols)
        ours, theirs, questions = paired_averages(evals, cols, PROPOSED, m)
        all_ours = {s for (k, s) in evals if k == PROPOSED}
        all_theirs = {s for (k, s) in evals if k == m}
        common = sorted(ours, key=lambda s: (s is None, s or 0))
        unpaired = tuple(sorted((all_ours | all_theirs) - set(common), key=lambda s: (s is None, s or 0)))
        if not common:
            why = "no seed has a complete average on both sides" if all_ours and all_theirs else \
                "no complete per-seed averages (missing evaluations)"
            if not cols:
                why = "the two methods share no evaluated column"
            rows.append(Comparison(m, (), unpaired, None, None, None, why, family=family, columns=labels))
            continue
        ci = paired_difference({s: ours[s] for s in common}, {s: theirs[s] for s in common})
        rows.append(Comparison(m, tuple(common), unpaired, ci, None, None, ci.reason, questions, family,
                               labels))
    return ComparisonTable(PROPOSED, measure, tuple(rows))


def with_holm(tables: Sequence[ComparisonTable]) -> tuple[ComparisonTable, ...]:
    """Holm's step-down correction within each family, over the comparisons of all the backbones (the
    paper's family is DecoEvo vs SkillOpt on each backbone: three comparisons for three backbones)."""
    keyed = {(i, j): c for i, t in enumerate(tables) for j, c in enumerate(t.rows)}
    pvalues = {k: c.ci.p_value for k, c in keyed.items() if c.ci is not None and c.ci.p_value is not None}
    adjusted = holm_by_family(pvalues, {k: keyed[k].family for k in pvalues}) if pvalues else {}
    out = []
    for i, t in enumerate(tables):
        rows = tuple(replace(c, p_holm=adjusted[(i, j)].adjusted, reject=adjusted[(i, j)].reject)
                     if (i, j) in adjusted else c for j, c in enumerate(t.rows))
        note = t.note
        if note is None and rows and not any((i, j) in adjusted for j in range(len(rows))):
            note = "no comparison has two or more paired seeds, so there is no p-value to correct"
        out.append(replace(t, rows=rows, note=note))
    return tuple(out)


# ---- alignment and cost -----------------------------------------------------------------------------


# ---- a backbone's section ------------------------------------------------------------------------------

_MAIN_CAPTION = ("Test score under the gold grader (0-100): mean ± sample standard deviation over seeds; "
                 "† marks within-domain transfer (the source run's final solver skill, not updated). Avg. is "
                 "computed within each seed over all columns, then aggregated. Gain is relative to SkillOpt's "
                 "average. Best mean per column in bold.")


def section(backbone: str, runs: Sequence[RunRecord]) -> Section:
    problems: list[str] = []
    scores, _, columns, evals = collect_scores(runs, problems)
    seeds: dict[str, list[int | None]] = defaultdict(list)
    for method, seed in sorted({(r.method, r.seed) for r in runs}, key=lambda k: (method_order(k[0]), k[1] or 0)):
        seeds[method].append(seed)
    methods = sorted(seeds, key=method_order)
    main_methods = [m for m in methods if m not in ABLATIONS and m not in CONTROLS]
    ablations = [m for m in methods if m in ABLATIONS]
    controls = [m for m in methods if m in CONTROLS]

    main = score_table("main", "Main results", _MAIN_CAPTION, main_methods, seeds, scores, columns, "gain",
                       BASELINE, evals)
    # Tables 2 and 3 show the columns their own variants were evaluated on (in `reproduce`, the source
    # benchmark): averaging over columns an ablation never ran on would leave every row without a value.
    abl = None
    if ablations:
        rows = [m for m in (PROPOSED,) if m in seeds] + ablations
        abl = score_table("ablations", "Ablations", "Each variant removes one DecoEvo mechanism; Δ is the "
                          "difference from DecoEvo's average in points (negative: the mechanism helped), on the "
                          "columns the variants were evaluated on.", rows, seeds, scores,
                          evaluated_columns(evals, ablations, columns) or columns, "points", PROPOSED, evals)
    ctl = None
    if controls:
        rows = [m for m in (BASELINE, PROPOSED) if m in seeds] + controls
        ctl = score_table("controls", "Alternative-explanation controls", "Task priors, extra solver compute and "
                          "audits routed to the solver, against SkillOpt and DecoEvo; gain is relative to "
                          "SkillOpt's average, on the columns the controls were evaluated on.", rows, seeds,
                          scores, evaluated_columns(evals, controls, columns) or columns, "gain", BASELINE,
                          evals)
    return Section(
        backbone=backbone, runs=tuple(runs), main=main, ablations=abl, controls=ctl,
        comparisons=comparisons(evals, columns, methods), alignment=alignment_tables(runs),
        costs=cost_sections(runs), without_eval=tuple(r for r in runs if r.test_eval is None),
        problems=tuple(problems), low_coverage=low_coverage([main, abl, ctl]))


def low_coverage(tables: Sequence[ScoreTable | None]) -> tuple[str, ...]:
    """One line per (method, column) whose score rests on under 95% of its questions."""
    seen: dict[tuple[str, str], str] = {}
    for t in [t for t in tables if t is not None]:
        for row in t.rows:
            for col, cell in zip(t.columns, row.cells, strict=True):
                c = cell.coverage
                if c is not None and c.low and (row.method, col.key) not in seen:
                    share = f"{100 * (c.fraction or 0):.0f}%"
                    seen[(row.method, col.key)] = (f"{method_label(row.method)} on {col.label}: {c.format()} "
                                                   f"questions graded for every method ({share}, below 95%)")
    return tuple(seen.values())


def sections(runs: Sequence[RunRecord]) -> tuple[Section, ...]:
    by_backbone: dict[str, list[RunRecord]] = defaultdict(list)
    for r in runs:
        by_backbone[r.backbone].append(r)
    built = [section(b, rs) for b, rs in sorted(by_backbone.items())]
    corrected = with_holm([s.comparisons for s in built])
    return tuple(replace(s, comparisons=c) for s, c in zip(built, corrected, strict=True))
