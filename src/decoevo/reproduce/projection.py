"""The projection printed before anything is spent: paid calls per phase (training, evaluation) and dollars
of what is not done yet."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..engine.config import RunConfig
from ..engine.estimate import REJECT_PROB, estimate_calls
from ..engine.sharing import (
    distinct_checkpoints,
    distinct_evaluations,
    distinct_generators,
    run_share,
    seed_training,
)
from ..errors import ConfigError
from ..lm import ModelSpec
from ..lm.pricing import price_for
from ..methods import METHODS, get_method
from ..sweep.plan import Cell
from ..sweep.steps import STEPS
from .bill import Bill, bench_bill, expected_criteria
from .plan import MAIN, PAIRED, TRACKED, TRANSFERS, ReproducePlan
from .posts import PostTask


@dataclass(frozen=True)
class Projection:
    cells: int
    cells_to_run: int
    training_calls: int  # expected paid calls of the cells still to run
    evaluation_calls: int  # expected paid calls of the evaluations still to run (test, transfer, ...)
    dollars: float | None  # None: some model has no price
    by_table: Mapping[str, int]  # cells per benchmark
    matched: tuple[str, ...] = ()  # methods run to their paired DecoEvo run's tokens
    unofficial: tuple[str, ...] = ()  # benchmarks graded with our prompt: their official one is not fetched
    # The evaluation phase between its extremes: every run of a seed ending with the same skills (each of its
    # evaluations paid once) or each with its own (none shared). Which happens turns on a few accept/reject
    # decisions, so a seed's bill lands anywhere in it (docs/reproduce.md); the point above is an expectation.
    evaluation_range: tuple[int, int] | None = None
    evaluation_dollars_range: tuple[float, float] | None = None

    @property
    def calls(self) -> int:
        return self.training_calls + self.evaluation_calls

    def _evaluation_range(self) -> str:
        if self.evaluation_range is None or self.evaluation_range[0] == self.evaluation_range[1]:
            return ""
        low, high = self.evaluation_range
        money = (f" (${self.evaluation_dollars_range[0]:,.2f} to ${self.evaluation_dollars_range[1]:,.2f})"
                 if self.evaluation_dollars_range is not None and self.evaluation_dollars_range[1] else "")
        return (f"; evaluation from ~{low:,} to ~{high:,} calls{money}: as a seed's runs end with the same skills "
                "(shared through the cache) or with their own, which the plan cannot know")

    def describe(self) -> str:
        money = (
            f"about ${self.dollars:,.2f}"
            if self.dollars
            else "no dollars (free or unpriced models)"
            if self.dollars is not None
            else "dollars unknown: a model has no price (set input/output_price_per_mtok)"
        )
        cells = ", ".join(f"{b} {n}" for b, n in self.by_table.items())
        return (
            f"{self.cells} runs ({cells}), {self.cells_to_run} still to run; projected paid calls: "
            f"~{self.training_calls:,} training + ~{self.evaluation_calls:,} evaluation = ~{self.calls:,}, "
            f"{money} (runs of one seed counted with the answers they share; `decoevo docs reproduce`)"
            + (f"; {', '.join(self.matched)} run to the paired DecoEvo run's tokens"
               if self.matched else "")
            + self._evaluation_range()
            + (f". Graded with our prompt, not the official one (not fetched): {', '.join(self.unofficial)}; "
               f"run `decoevo data fetch {' '.join(self.unofficial)}` first to grade as the paper does"
               if self.unofficial else "")
        )


def price_of(spec: ModelSpec) -> Callable[[float, float], float | None]:
    price = price_for(spec)
    return lambda p, c: None if price is None else price.cost(p, c)


def project(
    rp: ReproducePlan,
    cells: Mapping[str, list[Cell]],
    posts: Sequence[PostTask],
    sizes: Mapping[str, int] | None = None,
    grading: Mapping[str, float] | None = None,
) -> Projection:
    """Expected paid calls and dollars of what is not done yet (finished cells and evaluations cost nothing);
    `sizes`: questions per transfer file (`transfer_sizes`); `grading`: grader calls per answer of each data
    file (`grading_calls`, read from the files when not given)."""
    solver_price = price_of(rp.solver)
    grader_price = price_of(rp.grader or rp.solver)
    grading_given = grading
    grading = dict(grading) if grading is not None else grading_calls(rp)
    test_grading = _TestGrading(rp)
    training = evaluation = low = high = 0.0
    dollars: float | None = 0.0
    usd_low: float | None = 0.0
    usd_high: float | None = 0.0
    todo = 0
    matched: set[str] = set()

    def add(usd: float | None) -> None:
        nonlocal dollars
        dollars = None if dollars is None or usd is None else dollars + usd

    def add_evaluation(calls: float, usd: float | None, share: float, least: float) -> None:
        """An evaluation of `calls` paid calls at full price `usd`, this run's expected `share` of it, and
        the least it may pay (`least`: 1 when no run of its seed may pay it instead, else 0)."""
        nonlocal evaluation, low, high, usd_low, usd_high
        evaluation += calls * share
        low += calls * least
        high += calls
        add(None if usd is None else usd * share)
        usd_low = None if usd_low is None or usd is None else usd_low + usd * least
        usd_high = None if usd_high is None or usd is None else usd_high + usd

    # Runs of one seed share requests through the request cache (engine/sharing.py): each part is counted
    # once per seed and benchmark, finished runs first (what they paid is in the cache already).
    new_share: dict[Path, dict[str, float]] = {}
    bills: dict[str, Bill] = {}
    # evaluations some run of a seed pays for certain: a finished one's (its answers are in the cache), or
    # the first still to run (`_least`)
    paid_test: set[tuple[str, int]] = {(bench, c.seed) for bench, group in cells.items() for c in group
                                       if STEPS["test"].done(c.run_dir(rp.sweep_dir(bench)))}
    paid_post: set[tuple[str, str, int, str]] = {_post_key(t) for t in posts if t.done()}
    for bench, group in cells.items():
        configs = [RunConfig.model_validate(c.config) for c in group]
        bill = bills[bench] = bench_bill(rp, bench, configs[0].hyper, solver_price, grader_price)
        # A control matched to its paired DecoEvo run stops at that run's tokens, so it costs what that run
        # costs, not what its own schedule (up to budget_step_cap × T steps) would.
        paired = {c.seed: estimate_calls(get_method(c.method), c.hyper, c.splits, seed=c.seed) for c in configs
                  if c.method == PAIRED}
        for seed in dict.fromkeys(c.seed for c in configs):
            rows = []
            for cell, config in zip(group, configs, strict=True):
                if config.seed != seed:
                    continue
                run_dir = cell.run_dir(rp.sweep_dir(bench))
                method = get_method(config.method)
                est = estimate_calls(method, config.hyper, config.splits, seed=config.seed)
                if config.budget.match_run and config.seed in paired:
                    est = paired[config.seed]
                    matched.add(config.method)
                share = run_share(method, config.hyper, config.splits,
                                  est.expected if config.budget.match_run and seed in paired else None, seed)
                # a run the experiment's cap stopped continues from its last step: still to run, what is left
                left = _left_to_train(run_dir, config.hyper.steps)
                rows.append((left > 0, list(METHODS).index(config.method), run_dir, config, est, share, left))
            rows.sort(key=lambda r: (r[0], r[1]))
            shares = [r[5] for r in rows]
            paid_training = seed_training(shares)
            tested = distinct_evaluations(shares)
            main = distinct_evaluations([s for s in shares if s.method in MAIN])
            tracked = [s for s in shares if s.method in TRACKED]
            dynamics, aligned = distinct_checkpoints(tracked), distinct_generators(tracked)
            for to_train, _, run_dir, config, est, share, left in rows:
                new_share[run_dir.resolve()] = {"transfer": main.get(share.method, 1.0),
                                                "dynamics": dynamics.get(share.method, 1.0),
                                                "alignment": aligned.get(share.method, 1.0)}
                if to_train:
                    todo += 1
                    calls = paid_training[share.method] * left
                    training += calls
                    usd = est.dollars(lambda role, p, c: solver_price(p, c), bill.training)
                    add(None if usd is None else usd * (calls / est.expected if est.expected else 0.0))
                if not STEPS["test"].done(run_dir):
                    n = config.splits.test
                    # the grader's calls on this seed's own test questions (HealthBench: one per rubric item,
                    # 4 to 31 per question), not the file's mean: the split is drawn by seed before any run
                    graded = test_grading(rp.data[bench].path, config) if grading_given is None \
                        else grading[rp.data[bench].path]
                    add_evaluation(n * (1 + graded), bill.answer(n, rp.data[bench].path, graded),
                                   tested[share.method], _least(paid_test, (bench, seed)))
    for task in posts:
        if task.done():
            continue
        n = _post_questions(task, cells, sizes or {})
        bill = bills.get(task.run_dir.parent.name) or next(iter(bills.values()))
        add_evaluation(n * _post_calls(task, cells, grading), _post_dollars(task, n, bill, cells, grading),
                       new_share.get(task.run_dir.resolve(), {}).get(task.kind, 1.0),
                       _least(paid_post, _post_key(task)))
    by_table = {b: len(g) for b, g in cells.items()}
    total = sum(by_table.values())
    return Projection(total, todo, round(training), round(evaluation), dollars, by_table,
                      tuple(m for m in METHODS if m in matched), unofficial_prompts(rp),
                      (round(low), round(high)), None if usd_low is None or usd_high is None else (usd_low, usd_high))


class _TestGrading:
    """Mean grader calls per answer on a seed's test split, by the benchmark's official rule: the splits are
    drawn by seed (tasks/splits.py), so the plan knows which questions each seed's runs are graded on."""

    def __init__(self, rp: ReproducePlan) -> None:
        self.rp = rp
        self.memo: dict[tuple[str, int], float] = {}
        self.loaded: dict[str, list[Any]] = {}

    def __call__(self, path: str, config: RunConfig) -> float:
        from ..benchmarks.graders import grading_calls as calls_of
        from ..engine.config import DataConfig
        from ..tasks.load import load_questions
        from ..tasks.splits import make_splits

        key = (path, config.seed)
        if key not in self.memo:
            if path not in self.loaded:
                choice = next(c for c in self.rp.data.values() if c.path == path)
                self.loaded[path] = list(load_questions(DataConfig.model_validate(choice.config())))
            try:
                test = make_splits(self.loaded[path], config.splits, config.seed, required=()).test
            except ConfigError:  # sizes the data cannot give: the runs refuse them, with their own message
                test = tuple(self.loaded[path])
            self.memo[key] = sum(calls_of(q) for q in test) / len(test) if test else 0.0
        return self.memo[key]


def _least(paid: set[Any], key: Any) -> float:
    """1 for the first evaluation of its kind, seed and benchmark no run has paid yet (it must be paid: the
    least a seed's runs pay is one of each), 0 after (it may be shared); marks it paid."""
    if key in paid:
        return 0.0
    paid.add(key)
    return 1.0


def _post_key(task: PostTask) -> tuple[str, str, int, str]:
    """What makes two runs' evaluations after training shareable: the kind, the source benchmark, the seed
    (RUN is <bench>/<method>-s<seed>) and the data file."""
    seed = task.run_dir.name.rsplit("-s", 1)[-1]
    return (task.kind, task.run_dir.parent.name, int(seed) if seed.isdigit() else -1,
            task.data.path if task.data is not None else "")


def _left_to_train(run_dir: Path, steps: int) -> float:
    """The share of a run's training still to do: 1 for a new run, 0 for a finished one, and for a run the
    experiment's cap stopped, the steps it has not taken (it resumes from its last step; the cache answers
    the rest)."""
    import json

    from ..sweep.plan import cap_stopped

    if not (run_dir / "summary.json").is_file():
        return 1.0
    if not cap_stopped(run_dir):
        return 0.0
    try:
        done = int(json.loads((run_dir / "summary.json").read_text(encoding="utf-8")).get("steps_done") or 0)
    except (OSError, ValueError, TypeError, AttributeError):
        return 1.0
    return max(0.05, 1.0 - done / steps) if steps else 1.0  # a topped-up run may pass its T steps


def unofficial_prompts(rp: ReproducePlan) -> tuple[str, ...]:
    """The plan's benchmarks (sources and transfers) whose official grader prompt is known but not fetched:
    `grader_prompt: auto` grades them with ours, which the plan says before anything is spent."""
    from ..benchmarks import find
    from ..benchmarks.templates import fetched

    names = [*rp.benchmarks, *(TRANSFERS[b] for b in rp.benchmarks
                               if "1" in rp.tables and b in TRANSFERS and TRANSFERS[b] in rp.data)]
    out = []
    for name in names:
        bench = find(rp.data[name].format) if name in rp.data else None
        if bench is not None and bench.official_prompts and bench.official is not None and not fetched(bench):
            out.append(bench.name)
    return tuple(dict.fromkeys(out))  # once each: a transfer file of a source's format needs the same prompt


def _post_dollars(task: PostTask, n: float, bill: Bill, cells: Mapping[str, list[Cell]],
                  grading: Mapping[str, float]) -> float | None:
    """Dollars of one evaluation after training, `n` questions (or checkpoint answers)."""
    config = _bench_config(task, cells)
    if task.kind == "transfer":
        path = task.data.path if task.data is not None else ""
        return bill.answer(n, path, grading.get(path, 1.0))
    source = config.data.path if config is not None else ""
    if task.kind == "dynamics":  # a solve, the proxy's rubric and judge, the gold grader's calls
        return bill.checkpoint(n, source, grading.get(source, 1.0))
    return bill.alignment(n, source)


def transfer_sizes(rp: ReproducePlan) -> dict[str, int]:
    """Questions per transfer file, loaded now: a missing or malformed transfer file, or one without gold
    rubrics, is refused before any run is paid for rather than after training."""
    from ..engine.config import DataConfig
    from ..tasks.load import load_questions

    out: dict[str, int] = {}
    for bench in rp.benchmarks:
        choice = rp.transfer_for(bench)
        if choice is None:
            continue
        questions = load_questions(DataConfig.model_validate(choice.config()))
        missing = [q.id for q in questions if q.gold is None]
        if missing:
            raise ConfigError(
                f"{choice.path}: {len(missing)} question(s) have no gold rubric (first: {missing[0]}); "
                f"the {TRANSFERS[bench]} transfer is graded against gold rubrics"
            )
        out[choice.path] = len(questions)
    return out


def grading_calls(rp: ReproducePlan) -> dict[str, float]:
    """Mean grader calls to grade one answer, per data file of the plan, by its benchmark's official rule
    (HealthBench: one per rubric item, about 14 per conversation in the bundled sample)."""
    from ..benchmarks.graders import grading_calls as calls_of
    from ..engine.config import DataConfig
    from ..tasks.load import load_questions

    out: dict[str, float] = {}
    for choice in rp.data.values():
        if choice.path in out:
            continue
        questions = load_questions(DataConfig.model_validate(choice.config()))
        out[choice.path] = sum(calls_of(q) for q in questions) / len(questions) if questions else 0.0
    return out


def _bench_config(task: PostTask, cells: Mapping[str, list[Cell]]) -> RunConfig | None:
    """A configuration of the task's benchmark (RUN is sweeps/<bench>/runs/<bench>/<cell>; split sizes and
    hyperparameters are the same for every method there)."""
    group = cells.get(task.run_dir.parent.name) or next(iter(cells.values()), [])
    return RunConfig.model_validate(group[0].config) if group else None


def _post_calls(task: PostTask, cells: Mapping[str, list[Cell]], grading: Mapping[str, float]) -> float:
    """Paid calls per question of one evaluation after training."""
    config = _bench_config(task, cells)
    if task.kind == "transfer":
        return 1 + (grading.get(task.data.path, 1.0) if task.data is not None else 1.0)
    source = grading.get(config.data.path, 1.0) if config is not None else 1.0
    if task.kind == "dynamics":  # per checkpoint: a solve, the proxy's rubric and judge, the gold grader's calls
        return 3 + source
    # alignment: the final generator's rubric, then one matcher call per criterion it writes (at most K)
    return 1 + (expected_criteria(config.hyper) if config is not None else 8)


def _post_questions(task: PostTask, cells: Mapping[str, list[Cell]], sizes: Mapping[str, int]) -> int:
    if task.kind == "transfer":
        return sizes.get(task.data.path, 0) if task.data is not None else 0
    config = _bench_config(task, cells)
    if config is None:
        return 0
    if task.kind == "dynamics":  # every checkpoint on the diagnostic split: the first, then each accepted step
        return round(config.splits.diagnostic * (1 + config.hyper.steps * (1 - REJECT_PROB)))
    return config.splits.test

