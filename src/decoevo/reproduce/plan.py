"""The experiment's plan: which methods, seeds and data each source benchmark's sweep runs, and its cells."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ..benchmarks import GRADER_ROLES
from ..engine.role_names import MATCHER_ROLE
from ..errors import ConfigError
from ..lm import LMConfig, ModelSpec
from ..methods import METHODS
from ..sweep.plan import Cell, plan
from ..sweep.spec import PAIRED_METHOD, SweepSpec, at_token_parity
from ..sweep.spec import TOPPED_UP as TOPPED_UP  # with Budget-Matched, at DecoEvo's tokens (Table 4)

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
PAIRED = PAIRED_METHOD
GRADER_NAME = "grader"  # the model name the plan gives the separate grader in each run's lm.models
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
    # `--max-cost`: the whole experiment's dollars (training and grading, every process) stop here (lm/spend.py)
    max_cost: float | None = None

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
        cap = self.max_cost
        if cap is not None and (isinstance(cap, bool) or not isinstance(cap, int | float) or not 0 < cap < math.inf):
            raise ConfigError(f"max_cost {cap!r}: the experiment's cap is a positive number of US dollars")

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
        # its paired DecoEvo run's tokens (not its calls: a cheaper call would stop it short in tokens),
        # by the rule `decoevo sweep --parity` applies
        if PAIRED in raw["methods"]:
            raw = at_token_parity(raw, f"the {bench} sweep")
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
        from ..evaluation.independence import require_independent_grader

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
                "max_cost": self.max_cost,
            },
            sort_keys=False,
            allow_unicode=True,
        )



def unused_data(names: Sequence[str], benchmarks: Sequence[str], tables: Sequence[str]) -> str | None:
    """Why data passed for `names` would be stored and never read by this experiment (None: each is used):
    a source benchmark not in `benchmarks`, a transfer whose source is not, or a transfer without Table 1."""
    source_of = {t: s for s, t in TRANSFERS.items()}
    for name in names:
        if name in SOURCES and name not in benchmarks:
            return (f"--data {name}=...: {name} is not in this experiment (--benchmarks {','.join(benchmarks)}); "
                    f"add it to --benchmarks or leave the --data out")
        if name in source_of and source_of[name] not in benchmarks:
            return (f"--data {name}=...: {name} is the transfer of {source_of[name]}, which is not in this "
                    f"experiment (--benchmarks {','.join(benchmarks)}); add {source_of[name]} to --benchmarks "
                    "or leave the --data out")
        if name in source_of and "1" not in tables:
            return (f"--data {name}=...: transfers are evaluated for Table 1, which is not requested "
                    f"(--tables {','.join(tables)}); add 1 to --tables or leave the --data out")
    return None


def plan_cells(rp: ReproducePlan) -> dict[str, list[Cell]]:
    """Every sweep's cells, validated (data, split sizes, configuration) before anything runs."""
    return {b: plan(rp.sweep_spec(b), rp.sweep_dir(b), f"decoevo reproduce ({b})") for b in rp.benchmarks}



def default_data(names: Sequence[str]) -> dict[str, DataChoice]:
    """The fetched public benchmarks among `names` (`decoevo data fetch NAME`); missing ones are left out."""
    from ..benchmarks import datastore

    out: dict[str, DataChoice] = {}
    for name in names:
        try:
            out[name] = DataChoice(str(datastore.local_path(name)), name)
        except ConfigError:
            continue
    return out

