"""From a spec to cells: one run configuration per (benchmark, method, seed), in dependency order.

Every cell's configuration is built and validated here, before anything runs, so a typo in the spec
fails the sweep with exit 2 instead of failing every cell. Cells of one benchmark and seed differ only
in `method` (and the budget of a budget-matched cell), so their splits are the same questions: the
split is a function of the data, the split sizes and the seed (`tasks.splits.make_splits`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ..engine.config import RunConfig, config_from_dict, deep_merge, with_backend_token_limits
from ..engine.estimate import planned_steps
from ..engine.run import build_splits
from ..lm.errors import ConfigError
from ..lm.spend import CAP_STOP
from ..methods import get_method
from ..rundir import RunReader
from ..tasks.load import load_questions
from ..tasks.splits import SplitsTooLarge
from .spec import PAIRED_METHOD, SweepSpec
from .steps import pending_steps

Action = Literal["skip", "evaluate", "resume", "new"]


@dataclass(frozen=True)
class Cell:
    benchmark: str
    method: str
    seed: int
    config: dict[str, Any] = field(compare=False)  # RunConfig.model_dump(mode="json"), n_threads unset
    depends_on: tuple[str, ...] = ()
    total_steps: int = 0

    @property
    def id(self) -> str:
        return cell_id(self.benchmark, self.method, self.seed)

    def run_dir(self, sweep_dir: Path) -> Path:
        return run_dir_of(sweep_dir, self.benchmark, self.method, self.seed)


def cell_id(benchmark: str, method: str, seed: int) -> str:
    return f"{benchmark}/{method}-s{seed}"


def run_dir_of(sweep_dir: Path, benchmark: str, method: str, seed: int) -> Path:
    return sweep_dir / "runs" / benchmark / f"{method}-s{seed}"


def total_steps(config: RunConfig) -> int:
    """The inner steps a run takes (as `Engine.total_steps`), for the progress display."""
    return planned_steps(get_method(config.method), config.hyper, top_up=config.budget.top_up)


def plan(spec: SweepSpec, sweep_dir: Path, source: str = "the sweep spec") -> list[Cell]:
    """Validate every cell's configuration and order the cells so a dependency comes before its dependents.

    The order is benchmark, then seed, then the spec's method order with budget-matched cells moved after
    the DecoEvo cell they pair with: a full seed of a benchmark finishes early, which is what a reader of
    a partial sweep wants to compare."""
    sweep_dir = sweep_dir.resolve()
    shared = spec.shared()
    paired = get_method(PAIRED_METHOD).name in spec.methods
    has_budget = bool(shared.get("budget", {}).get("max_calls") or shared.get("budget", {}).get("max_tokens"))
    topped = set(spec.top_up)
    methods = sorted(spec.methods, key=lambda m: get_method(m).budget_matched or m in topped)  # dependents last
    cells: list[Cell] = []
    for bench in spec.benchmarks:
        where = f"{source} (benchmark '{bench.name}')"
        base = deep_merge(shared, {"data": bench.data_config(), "splits": bench.splits})
        questions = None
        for seed in spec.seeds:
            for method in methods:
                over: dict[str, Any] = {"method": method, "seed": seed}
                deps: tuple[str, ...] = ()
                if method in topped:  # validated: decoevo is in the sweep
                    match = run_dir_of(sweep_dir, bench.name, PAIRED_METHOD, seed)
                    over["budget"] = {"match_run": str(match), "top_up": True}
                    deps = (cell_id(bench.name, PAIRED_METHOD, seed),)
                elif get_method(method).budget_matched:
                    if paired:
                        match = run_dir_of(sweep_dir, bench.name, PAIRED_METHOD, seed)
                        over["budget"] = {"match_run": str(match)}
                        deps = (cell_id(bench.name, PAIRED_METHOD, seed),)
                    elif not has_budget:
                        raise ConfigError(f"{source}: method budget_matched takes its budget from the decoevo run of "
                                          "the same benchmark and seed; add decoevo to methods, or set "
                                          "budget.max_calls or budget.max_tokens")
                # resolved as the engine resolves it: the dump below marks every key as set, which would keep
                # the embedded model's token limits for a served model (320-token answers)
                config = with_backend_token_limits(config_from_dict(deep_merge(base, over), source=where))
                try:
                    if questions is None:  # one load per benchmark; names a bad file or line before any run
                        questions = load_questions(config.data)
                    build_splits(config, get_method(method), questions)  # split sizes fit the data
                    if spec.pilot:  # the pilot's ε, τ_tie, K for this data and seed; the spec's own hyper wins
                        from ..pilot import with_pilot

                        config = with_pilot(config, spec.pilot, explicit=set(spec.hyper), questions=questions)
                except ConfigError as exc:  # a too-small data file stays one (the command line adds a hint)
                    raise (SplitsTooLarge if isinstance(exc, SplitsTooLarge) else ConfigError)(
                        f"{where}: {exc}") from None
                if "test" in spec.evaluate and config.splits.test == 0:
                    raise ConfigError(f"{where}: evaluate lists 'test' but splits.test is 0; set splits.test "
                                      "(questions held out for the final score) or remove 'test' from evaluate")
                cells.append(Cell(bench.name, method, seed, config.model_dump(mode="json"), deps,
                                  total_steps(config)))
    return cells


def waits_on_servers(config: dict[str, Any]) -> bool:
    """True when no model of the run is embedded: the cell's time goes to waiting for server replies."""
    models = config.get("lm", {}).get("models", {}) or {"default": {}}
    return all(spec.get("backend", "local") != "local" for spec in models.values())


def without_threads(config: dict[str, Any]) -> dict[str, Any]:
    """A run configuration minus the per-machine thread count, which changes no result."""
    lm = dict(config.get("lm", {}))
    lm["models"] = {name: {k: v for k, v in spec.items() if k != "n_threads"}
                    for name, spec in lm.get("models", {}).items()}
    return {**config, "lm": lm}


def with_threads(config: dict[str, Any], threads: int) -> dict[str, Any]:
    """Give every embedded (local) model `threads` threads; other backends do not use the setting."""
    lm = dict(config.get("lm", {}))
    lm["models"] = {name: ({**spec, "n_threads": threads} if spec.get("backend", "local") == "local" else spec)
                    for name, spec in lm.get("models", {}).items()}
    return {**config, "lm": lm}


def _differences(a: Any, b: Any, prefix: str = "") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        out: list[str] = []
        for key in sorted(set(a) | set(b), key=str):
            out += _differences(a.get(key), b.get(key), f"{prefix}{key}.")
        return out
    return [] if a == b else [prefix.rstrip(".")]


class CellConflict(ConfigError):
    """The cell's directory holds a run of another configuration; it is neither rerun nor overwritten."""


def cap_stopped(run_dir: Path) -> bool:
    """A run that an experiment's shared dollar cap stopped (lm/spend.py): it continues when run again, which
    `decoevo reproduce` allows only once the cap is raised. A run's own budget stop stays finished."""
    try:
        summary = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return (isinstance(summary, dict) and summary.get("status") == "budget_stop"
            and str(summary.get("stopped") or "").startswith(CAP_STOP))


def action_for(cell: Cell, sweep_dir: Path, evaluate: list[str]) -> Action:
    """What a cell still needs, read from its run directory: nothing, its post-run steps, a resume, or a run."""
    run_dir = cell.run_dir(sweep_dir)
    reader = RunReader(run_dir)
    if not reader.exists():
        return "new"
    stored = reader.config_dict()
    diff = _differences(without_threads(stored), without_threads(cell.config))
    if diff:
        raise CellConflict(f"{run_dir} holds a run with a different configuration (differs at: "
                           f"{', '.join(diff[:5])}); move it away or use another sweep directory")
    if not (run_dir / "summary.json").is_file() or cap_stopped(run_dir):
        return "resume"
    return "evaluate" if pending_steps(run_dir, evaluate) else "skip"
