"""`decoevo reproduce`: the paper's whole experiment (§4) as one resumable plan, on the sweep machinery.

What it runs, per the paper's tables:
- Table 1: zero-shot, SkillOpt, SC-CoEvo, DecoEvo on each source benchmark (HealthBench, WritingBench,
  ResearchQA), graded on the test split; the final solver skills of the HealthBench runs are evaluated
  unchanged on LLMEval-Med and those of WritingBench on EQ-Bench Creative Writing (within-domain transfer);
- Table 2: the six ablations on HealthBench; Table 3: Task-Prior, Budget-Matched, Direct Audit on
  HealthBench (with SkillOpt and DecoEvo); Table 4: the cost of those runs (from their ledgers);
- Table 5: rubric alignment of SkillOpt, SC-CoEvo and DecoEvo on every source benchmark;
- Figure 3: training dynamics (proxy and gold at every checkpoint) of the same three on HealthBench.

Each source benchmark is one sweep (`REPRO/sweeps/<benchmark>/`: the methods differ per benchmark), run
by `sweep.run_sweep` (local processes or Ray), graded by the sweep's `test` step. Transfer, dynamics and
alignment then run here, for the runs that need them, through `decoevo.api`. Every step is done when its
output file exists, so running the command again resumes: finished cells and evaluations are not paid
twice. The report of all sweeps is REPRO/report.html, with the paper's claims checked on these runs.

The gold grader (and the rubric matcher) must be a model that plays no optimization role: the plan
refuses otherwise unless `allow_self_grading` (evaluation/independence.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from .benchmarks import GRADER_ROLES
from .engine.config import RunConfig, deep_merge
from .engine.estimate import REJECT_PROB, TYPICAL_TOKENS, estimate_calls
from .engine.role_names import MATCHER_ROLE
from .errors import ConfigError
from .lm import LMConfig, ModelSpec
from .lm.pricing import price_for
from .methods import METHODS, get_method
from .sweep.plan import Cell, plan, run_dir_of
from .sweep.spec import SweepSpec

SOURCES = ("healthbench", "writingbench", "researchqa")
TRANSFERS = {"healthbench": "llmeval_med", "writingbench": "eqbench_cw"}  # source -> transfer benchmark
TABLES = ("1", "2", "3", "4", "5", "fig3")
PAPER_SEEDS = (0, 1, 2, 3, 4)
HEALTHBENCH = "healthbench"

MAIN = ("zero_shot", "skillopt", "sc_coevo", "decoevo")
ABLATIONS = tuple(m.name for m in METHODS.values() if m.group == "ablation")
CONTROLS = tuple(m.name for m in METHODS.values() if m.group == "control")
COST_METHODS = ("skillopt", "sc_coevo", "decoevo", "budget_matched", "direct_audit")  # Table 4
TRACKED = ("skillopt", "sc_coevo", "decoevo")  # Table 5 and Figure 3
PAIRED = "decoevo"
TOPPED_UP = ("sc_coevo", "direct_audit")  # with Budget-Matched, at the paired DecoEvo run's tokens (Table 4)
GRADER_NAME = "grader"  # the model name the plan gives the separate grader in each run's lm.models
STATE_FILE = "reproduce.yaml"
SAMPLE_SEED = 0  # `--transfer-limit` and `@N` draw a stratified sample by this seed, not the first N ids


@dataclass(frozen=True)
class DataChoice:
    """One benchmark's questions: a file and its format (a fetched benchmark by default)."""

    path: str
    format: str
    limit: int | None = None
    sample_seed: int | None = None  # with a limit: a seeded, stratified sample (None: the first N ids)

    def config(self) -> dict[str, Any]:
        out: dict[str, Any] = {"path": self.path, "format": self.format}
        if self.limit is not None:
            out["limit"] = self.limit
            if self.sample_seed is not None:
                out["sample_seed"] = self.sample_seed
        return out


@dataclass(frozen=True)
class ReproducePlan:
    out: Path
    solver: ModelSpec  # every optimization role (the paper: one frozen backbone)
    grader: ModelSpec | None  # the gold grader and the matcher; None: the solver's model (self-graded)
    data: Mapping[str, DataChoice]  # by benchmark name: the sources and the transfers
    seeds: tuple[int, ...] = PAPER_SEEDS
    benchmarks: tuple[str, ...] = SOURCES
    tables: tuple[str, ...] = TABLES
    preset: str = "paper"
    shared: Mapping[str, Any] = field(default_factory=dict)  # hyper / splits / budget overrides
    allow_self_grading: bool = False
    transfer_limit: int | None = None  # questions of each transfer benchmark (None: all)
    # `--transfer-limit` and `@N` draw a sample stratified by category by this seed (recorded in the plan);
    # None, in a plan stored before there was one: the first N ids, so that experiment still resumes
    sample_seed: int | None = SAMPLE_SEED

    def __post_init__(self) -> None:
        unknown = [t for t in self.tables if t not in TABLES]
        if unknown:
            raise ConfigError(f"--tables: unknown {', '.join(unknown)}; choose from {', '.join(TABLES)}")
        bad = [b for b in self.benchmarks if b not in SOURCES]
        if bad:
            raise ConfigError(
                f"--benchmarks: {', '.join(bad)} is not a source benchmark of the paper; choose "
                f"from {', '.join(SOURCES)} (transfers follow their source)"
            )
        hb_only = [t for t in self.tables if t in ("2", "3", "4", "fig3")]
        if hb_only and HEALTHBENCH not in self.benchmarks:
            raise ConfigError(
                f"tables {', '.join(hb_only)} are on HealthBench: add healthbench to --benchmarks "
                "or leave those tables out (--tables)"
            )
        if not self.seeds:
            raise ConfigError("--seeds: at least one seed")

    # ---- what runs ----------------------------------------------------------------------------------
    def methods_for(self, bench: str) -> list[str]:
        wanted: set[str] = set()
        if "1" in self.tables:
            wanted.update(MAIN)
        if "5" in self.tables:
            wanted.update(TRACKED)
        if bench == HEALTHBENCH:
            if "2" in self.tables:
                wanted.update(("decoevo", *ABLATIONS))
            if "3" in self.tables:
                wanted.update(("skillopt", "decoevo", *CONTROLS))
            if "4" in self.tables:
                wanted.update(COST_METHODS)
            if "fig3" in self.tables:
                wanted.update(TRACKED)
        return [m for m in METHODS if m in wanted]

    def lm_config(self) -> dict[str, Any]:
        """Every optimization role on the solver's model; the graders and the matcher on the grader's."""
        models: dict[str, Any] = {"default": self.solver.model_dump(mode="json", exclude_defaults=True)}
        roles: dict[str, str] = {}
        if self.grader is not None:
            models[GRADER_NAME] = self.grader.model_dump(mode="json", exclude_defaults=True)
            roles = {r: GRADER_NAME for r in (*GRADER_ROLES, MATCHER_ROLE)}
        return {"models": models, "roles": roles}

    def sweep_dir(self, bench: str) -> Path:
        return self.out / "sweeps" / bench

    def sweep_spec(self, bench: str) -> SweepSpec:
        choice = self._data(bench)
        raw: dict[str, Any] = {
            "methods": self.methods_for(bench),
            "seeds": list(self.seeds),
            "preset": self.preset,
            "benchmarks": [
                {
                    "name": bench,
                    "data": choice.path,
                    "format": choice.format,
                    **({"limit": choice.limit} if choice.limit is not None else {}),
                    **({"sample_seed": self.sample_seed} if choice.limit is not None
                       and self.sample_seed is not None else {}),
                }
            ],
            "lm": self.lm_config(),
            "evaluate": ["test"],
        }
        for key in ("hyper", "splits", "budget"):
            if key in self.shared:
                raw[key] = dict(self.shared[key])
        # Controls at parity by construction (Table 4): each is topped up to, and Budget-Matched capped at,
        # its paired DecoEvo run's tokens (not its calls: a cheaper call would stop it short in tokens).
        methods = raw["methods"]
        if PAIRED in methods:
            raw["top_up"] = [m for m in TOPPED_UP if m in methods]
            raw["budget"] = {"match_on": "tokens", **raw.get("budget", {})}
        return SweepSpec.model_validate(raw)

    def _data(self, bench: str) -> DataChoice:
        if bench not in self.data:
            raise ConfigError(f"no data for {bench}: run `decoevo data fetch {bench}` or pass --data {bench}=FILE")
        return self.data[bench]

    def transfer_for(self, bench: str) -> DataChoice | None:
        if "1" not in self.tables or bench not in TRANSFERS:
            return None
        choice = self._data(TRANSFERS[bench])
        limit = self.transfer_limit if self.transfer_limit is not None else choice.limit
        return DataChoice(choice.path, choice.format, limit, self.sample_seed if limit is not None else None)

    def check_grader(self) -> str:
        """Refuse a self-graded plan unless allowed (one line naming the fix); say who grades."""
        from .evaluation.independence import require_independent_grader

        run_lm = LMConfig.model_validate(self.lm_config())
        found = require_independent_grader(
            run_lm,
            self.grader,
            allow_self_grading=self.allow_self_grading,
            grader_role=GRADER_ROLES[0],
            where="decoevo reproduce",
        )
        return found.describe()

    def to_yaml(self) -> str:
        return yaml.safe_dump(
            {
                "solver": self.solver.model_dump(mode="json", exclude_defaults=True),
                "grader": self.grader.model_dump(mode="json", exclude_defaults=True) if self.grader else None,
                "data": {k: v.config() for k, v in self.data.items()},
                "seeds": list(self.seeds),
                "benchmarks": list(self.benchmarks),
                "tables": list(self.tables),
                "preset": self.preset,
                "shared": dict(self.shared),
                "allow_self_grading": self.allow_self_grading,
                "transfer_limit": self.transfer_limit,
                "sample_seed": self.sample_seed,
            },
            sort_keys=False,
            allow_unicode=True,
        )


# ---- the projection printed before anything is spent ---------------------------------------------------
@dataclass(frozen=True)
class PostTask:
    """One evaluation after training: transfer, dynamics or alignment of one run."""

    kind: str  # transfer | dynamics | alignment
    run_dir: Path
    data: DataChoice | None = None
    benchmark: str = ""  # a transfer's benchmark: its eval file is transfer-<benchmark>.json

    @property
    def output(self) -> Path:
        name = {"dynamics": "dynamics.json", "alignment": "alignment.json"}.get(self.kind)
        if name is None:
            assert self.data is not None
            # named by the benchmark, not the data format: two JSONL transfers would share "transfer-jsonl"
            name = f"transfer-{self.benchmark or self.data.format}.json"
        return self.run_dir / "eval" / name

    def done(self) -> bool:
        return self.output.is_file()


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

    @property
    def calls(self) -> int:
        return self.training_calls + self.evaluation_calls

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
            f"{money} (an order of magnitude: engine/estimate.py)"
            + (f"; {', '.join(self.matched)} run to the paired DecoEvo run's tokens"
               if self.matched else "")
            + (f". Graded with our prompt, not the official one (not fetched): {', '.join(self.unofficial)}; "
               f"run `decoevo data fetch {' '.join(self.unofficial)}` first to grade as the paper does"
               if self.unofficial else "")
        )


def _price(spec: ModelSpec) -> Callable[[int, int], float | None]:
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
    solver_price = _price(rp.solver)
    grader_price = _price(rp.grader or rp.solver)
    grading = dict(grading) if grading is not None else grading_calls(rp)
    training = evaluation = 0
    dollars: float | None = 0.0
    todo = 0
    matched: set[str] = set()

    def add(usd: float | None) -> None:
        nonlocal dollars
        dollars = None if dollars is None or usd is None else dollars + usd

    for bench, group in cells.items():
        configs = [RunConfig.model_validate(c.config) for c in group]
        # A control matched to its paired DecoEvo run stops at that run's tokens, so it costs what that run
        # costs, not what its own schedule (up to budget_step_cap × T steps) would.
        paired = {c.seed: estimate_calls(get_method(c.method), c.hyper, c.splits) for c in configs
                  if c.method == PAIRED}
        for cell, config in zip(group, configs, strict=True):
            run_dir = cell.run_dir(rp.sweep_dir(bench))
            if not (run_dir / "summary.json").is_file():
                todo += 1
                est = estimate_calls(get_method(config.method), config.hyper, config.splits)
                if config.budget.match_run and config.seed in paired:
                    est = paired[config.seed]
                    matched.add(config.method)
                training += est.expected
                add(est.dollars(lambda role, p, c: solver_price(p, c)))
            if not (run_dir / "eval" / "test.json").is_file():
                n = config.splits.test
                per = 1 + grading[rp.data[bench].path]  # a solve, then the grader's real calls
                evaluation += round(n * per)
                add(_eval_dollars(n * per, solver_price, grader_price))
    for task in posts:
        if task.done():
            continue
        n = _post_questions(task, cells, sizes or {})
        evaluation += round(n * _post_calls(task, cells, grading))
        add(_eval_dollars(n * _post_calls(task, cells, grading), solver_price, grader_price))
    by_table = {b: len(g) for b, g in cells.items()}
    total = sum(by_table.values())
    return Projection(total, todo, training, evaluation, dollars, by_table,
                      tuple(m for m in METHODS if m in matched), unofficial_prompts(rp))


def unofficial_prompts(rp: ReproducePlan) -> tuple[str, ...]:
    """The plan's benchmarks (sources and transfers) whose official grader prompt is known but not fetched:
    `grader_prompt: auto` grades them with ours, which the plan says before anything is spent."""
    from .benchmarks import find
    from .benchmarks.templates import fetched

    names = [*rp.benchmarks, *(TRANSFERS[b] for b in rp.benchmarks
                               if "1" in rp.tables and b in TRANSFERS and TRANSFERS[b] in rp.data)]
    out = []
    for name in names:
        bench = find(rp.data[name].format) if name in rp.data else None
        if bench is not None and bench.official_prompts and bench.official is not None and not fetched(bench):
            out.append(bench.name)
    return tuple(out)


def _eval_dollars(
    n: float, solver_price: Callable[[int, int], float | None], grader_price: Callable[[int, int], float | None]
) -> float | None:
    solve, grade = solver_price(*TYPICAL_TOKENS["solve"]), grader_price(*TYPICAL_TOKENS["judge"])
    return None if solve is None or grade is None else n * (solve + grade)


def transfer_sizes(rp: ReproducePlan) -> dict[str, int]:
    """Questions per transfer file, loaded now: a missing or malformed transfer file, or one without gold
    rubrics, is refused before any run is paid for rather than after training."""
    from .engine.config import DataConfig
    from .tasks.load import load_questions

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
    from .benchmarks.graders import grading_calls as calls_of
    from .engine.config import DataConfig
    from .tasks.load import load_questions

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
    # alignment: the final generator's rubric, then one matcher call per generated criterion (at most K)
    return 1 + (config.hyper.max_criteria if config is not None else 8)


def _post_questions(task: PostTask, cells: Mapping[str, list[Cell]], sizes: Mapping[str, int]) -> int:
    if task.kind == "transfer":
        return sizes.get(task.data.path, 0) if task.data is not None else 0
    config = _bench_config(task, cells)
    if config is None:
        return 0
    if task.kind == "dynamics":  # every checkpoint on the diagnostic split: the first, then each accepted step
        return round(config.splits.diagnostic * (1 + config.hyper.steps * (1 - REJECT_PROB)))
    return config.splits.test


# ---- planning and running ----------------------------------------------------------------------------
def plan_cells(rp: ReproducePlan) -> dict[str, list[Cell]]:
    """Every sweep's cells, validated (data, split sizes, configuration) before anything runs."""
    return {b: plan(rp.sweep_spec(b), rp.sweep_dir(b), f"decoevo reproduce ({b})") for b in rp.benchmarks}


def post_tasks(rp: ReproducePlan) -> list[PostTask]:
    tasks: list[PostTask] = []
    for bench in rp.benchmarks:
        sweep_dir = rp.sweep_dir(bench)
        transfer = rp.transfer_for(bench)
        for seed in rp.seeds:
            for method in rp.methods_for(bench):
                run = run_dir_of(sweep_dir.resolve(), bench, method, seed)
                if transfer is not None and method in MAIN:
                    tasks.append(PostTask("transfer", run, transfer, TRANSFERS[bench]))
                if "fig3" in rp.tables and bench == HEALTHBENCH and method in TRACKED:
                    tasks.append(PostTask("dynamics", run))
                if "5" in rp.tables and method in TRACKED:
                    tasks.append(PostTask("alignment", run))
    return tasks


async def run_post(
    tasks: Sequence[PostTask], *, concurrency: int = 4, on_done: Callable[[PostTask, str | None], None] | None = None
) -> list[tuple[PostTask, str]]:
    """Run the evaluations not done yet whose run finished; returns the failures (task, message). A failure
    leaves no output file, so the next invocation retries it."""
    from . import api

    gate = asyncio.Semaphore(concurrency)
    failures: list[tuple[PostTask, str]] = []

    async def one(task: PostTask) -> None:
        if task.done():
            return
        if not (task.run_dir / "summary.json").is_file():
            failures.append((task, f"{task.run_dir} did not finish training"))
            return
        async with gate:
            try:
                if task.kind == "transfer":
                    assert task.data is not None
                    await api.evaluate_async(task.run_dir, data=task.data.config(), name=task.benchmark or None)
                elif task.kind == "dynamics":
                    await api.dynamics_async(task.run_dir)
                else:
                    await api.align_async(task.run_dir)
            except Exception as exc:  # one task's failure is reported; the others go on
                failures.append((task, f"{type(exc).__name__}: {exc}"))
                if on_done is not None:
                    on_done(task, str(exc))
                return
        if on_done is not None:
            on_done(task, None if task.done() else "wrote no output (nothing could be graded)")
        if not task.done():
            failures.append((task, "wrote no output (nothing could be graded)"))

    await asyncio.gather(*(one(t) for t in tasks))
    return failures


def load_state(out: Path) -> dict[str, Any] | None:
    """The plan an earlier `decoevo reproduce OUT` stored (its flags), for a rerun that resumes it."""
    path = out / STATE_FILE
    if not path.is_file():
        return None
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: not a reproduce plan; remove it or pick another directory")
    return data


def plan_from_state(out: Path, state: Mapping[str, Any], **overrides: Any) -> ReproducePlan:
    merged = deep_merge(dict(state), {k: v for k, v in overrides.items() if v is not None})
    try:
        return ReproducePlan(
            out=out,
            solver=ModelSpec.model_validate(merged["solver"]),
            grader=ModelSpec.model_validate(merged["grader"]) if merged.get("grader") else None,
            data={k: DataChoice(**v) for k, v in (merged.get("data") or {}).items()},
            seeds=tuple(merged.get("seeds") or PAPER_SEEDS),
            benchmarks=tuple(merged.get("benchmarks") or SOURCES),
            tables=tuple(merged.get("tables") or TABLES),
            preset=merged.get("preset") or "paper",
            shared=merged.get("shared") or {},
            allow_self_grading=bool(merged.get("allow_self_grading")),
            transfer_limit=merged.get("transfer_limit"),
            # a stored plan without the key predates sampling: it keeps taking the first N ids
            sample_seed=merged.get("sample_seed", None if state.get("solver") is not None else SAMPLE_SEED),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise ConfigError(f"{out / STATE_FILE}: {exc}") from None


def default_data(names: Sequence[str]) -> dict[str, DataChoice]:
    """The fetched public benchmarks among `names` (`decoevo data fetch NAME`); missing ones are left out."""
    from .benchmarks import datastore

    out: dict[str, DataChoice] = {}
    for name in names:
        try:
            out[name] = DataChoice(str(datastore.local_path(name)), name)
        except ConfigError:
            continue
    return out


# ---- the plan before any data: --plan-only -----------------------------------------------------------
TABLE_METHODS: Mapping[str, tuple[str, ...]] = {
    "1": MAIN, "2": ("decoevo", *ABLATIONS), "3": ("skillopt", "decoevo", *CONTROLS), "4": COST_METHODS,
    "5": TRACKED, "fig3": TRACKED,
}
# Sequential model-call waves (a wave's calls run concurrently): an inner step solves the batch, judges it,
# rewrites, then solves and judges the challenger on V_s; an outer round adds about six (rubrics, audits,
# the rewrite, the candidate's verification). Counted from the engine's loop, not measured on an API.
WAVES_PER_STEP, WAVES_PER_ROUND = 5, 6
CALL_LATENCY_S = 4.0  # an assumption for a hosted model's reply of a few hundred tokens, said in the plan


def outline(rp: ReproducePlan, workers: int | None = None) -> list[str]:
    """The plan before any data is read: per table its methods, benchmarks and runs; the distinct runs;
    training calls and dollars at the preset's sizes; an expected wall time under `CALL_LATENCY_S` with
    `workers` runs at once (default: the machine's cores, as a local sweep). Nothing is loaded or written."""
    import os

    from .engine.config import config_from_dict
    from .presets import PRESETS

    seeds = ", ".join(map(str, rp.seeds))
    lines = [f"seeds {seeds} ({len(rp.seeds)}), preset {rp.preset}, solver {rp.solver.model}, "
             f"grader {rp.grader.model if rp.grader else rp.solver.model + ' (self-graded)'}"]
    for table in rp.tables:
        benches = [b for b in rp.benchmarks if b == HEALTHBENCH or table in ("1", "5")]
        methods = TABLE_METHODS[table]
        n = len(methods) * len(benches) * len(rp.seeds)
        extra = ""
        if table == "1":
            transfers = [TRANSFERS[b] for b in benches if b in TRANSFERS]
            extra = f"; their final skills evaluated on {', '.join(transfers)}" if transfers else ""
        label = "Figure 3" if table == "fig3" else f"Table {table}"
        lines.append(f"{label}: {', '.join(methods)} on {', '.join(benches)} = {n} runs{extra}")
    price = _price(rp.solver)
    training, path_s, runs = 0, 0.0, 0
    dollars: float | None = 0.0
    for bench in rp.benchmarks:
        for method in rp.methods_for(bench):
            raw = deep_merge(PRESETS[rp.preset], dict(rp.shared))
            config = config_from_dict(deep_merge(raw, {"method": method, "data": {"path": "not-read.jsonl"}}))
            est = estimate_calls(get_method(method), config.hyper, config.splits)
            if method in (*TOPPED_UP, "budget_matched") and "decoevo" in rp.methods_for(bench):
                est = estimate_calls(get_method(PAIRED), config.hyper, config.splits)
            runs += len(rp.seeds)
            training += est.expected * len(rp.seeds)
            usd = est.dollars(lambda role, p, c: price(p, c))
            dollars = None if dollars is None or usd is None else dollars + usd * len(rp.seeds)
            waves = est.steps * WAVES_PER_STEP + est.expected_rounds * WAVES_PER_ROUND
            path_s += waves * CALL_LATENCY_S * len(rp.seeds)
    at_once = max(1, min(runs, workers or os.cpu_count() or 1))
    money = ("dollars unknown (a model has no price: set input/output_price_per_mtok)" if dollars is None
             else f"about ${dollars:,.2f}" if dollars else "no dollars (free models)")
    lines.append(f"{runs} distinct runs (a method shared by tables runs once); training ~{training:,} paid calls, "
                 f"{money} at the preset's sizes (evaluation is projected once the data are fetched)")
    lines.append(f"expected training wall time ~{path_s / at_once / 3600:.1f} h with {at_once} run(s) at once, at "
                 f"{CALL_LATENCY_S:.0f} s per model call (an assumption: a hosted model's reply of a few hundred "
                 "tokens); evaluation adds to it")
    missing = [b for b in (*rp.benchmarks, *(TRANSFERS[b] for b in rp.benchmarks if b in TRANSFERS))
               if b not in rp.data]
    if missing:
        lines.append(f"data not fetched yet: {', '.join(missing)} (`decoevo data fetch {' '.join(missing)}`)")
    return lines
