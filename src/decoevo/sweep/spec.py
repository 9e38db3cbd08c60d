"""The sweep specification: which methods, seeds and benchmarks to cross, and the settings they share.

A spec comes from a YAML file (`decoevo sweep SWEEP --spec grid.yaml`), from flags for a simple grid
(`--methods decoevo,skillopt --seeds 0,1`), or from SWEEP/sweep.yaml, the resolved copy an earlier
invocation wrote. Relative data paths are resolved against the spec file's folder (the current folder
for flags), so the resolved copy names absolute paths and means the same thing wherever it is read.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ..engine.config import deep_merge, lm_with_flags
from ..lm.errors import ConfigError
from ..methods import get_method
from ..presets import PRESETS, PresetChoice, choose_preset, default_is_served
from ..userfiles import read_user_text
from .steps import STEPS

SPEC_FILE = "sweep.yaml"
PAIRED_METHOD = "decoevo"  # the run a budget-matched or topped-up cell is matched to
TOPPED_UP = ("sc_coevo", "direct_audit")  # with Budget-Matched, at the paired DecoEvo run's tokens (Table 4)
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]*$"  # a benchmark name is a directory name
MAX_SEED = 10**18


class BenchmarkEntry(BaseModel):
    """One benchmark of the grid: its data, and split sizes that differ from the shared ones."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=NAME_PATTERN, max_length=100, description="directory name under SWEEP/runs/")
    data: str = Field(description="the question file")
    format: str = "jsonl"  # checked with the rest of the run configuration when the grid is planned
    task: str | None = None
    task_spec: str | None = None
    limit: int | None = Field(None, ge=1)
    sample_seed: int | None = Field(None, ge=0, description="with limit: a seeded sample stratified by category")
    splits: dict[str, Any] = Field(default_factory=dict, description="overrides of the shared split sizes")

    def data_config(self) -> dict[str, Any]:
        out: dict[str, Any] = {"path": self.data, "format": self.format}
        out.update({k: v for k, v in (("task", self.task), ("task_spec", self.task_spec), ("limit", self.limit),
                                      ("sample_seed", self.sample_seed)) if v is not None})
        return out


class SweepSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    methods: list[str] = Field(min_length=1)
    seeds: list[int] = Field(min_length=1)
    benchmarks: list[BenchmarkEntry] = Field(min_length=1)
    preset: str = "quick"
    hyper: dict[str, Any] = Field(default_factory=dict)
    lm: dict[str, Any] = Field(default_factory=dict)
    splits: dict[str, Any] = Field(default_factory=dict)
    budget: dict[str, Any] = Field(default_factory=dict)
    initial_solver_skill: str | None = None
    initial_generator_skill: str | None = None
    evaluate: list[str] = Field(
        default_factory=lambda: ["test"], description="post-run steps each cell runs after training, in order")
    workers: int | None = Field(None, ge=1, description="cells at once (default: min(cells, cores); cells that "
                                                         "only call servers: min(cells, 8 × cores, 32))")
    pilot: str | None = Field(None, description="a pilot.json (`decoevo pilot`): each cell takes ε, τ_tie and K "
                              "from its benchmark's and seed's entry, unless `hyper` sets them")
    top_up: list[str] = Field(default_factory=list, description="methods run topped up to the paired DecoEvo "
                              "run's effective calls and tokens (budget.match_run + budget.top_up), e.g. "
                              "[sc_coevo, direct_audit]: the compute-matched variant of those comparisons")

    @field_validator("methods")
    @classmethod
    def _known_methods(cls, methods: list[str]) -> list[str]:
        out = []
        for name in methods:
            try:
                out.append(get_method(name).name)
            except ConfigError as exc:
                raise ValueError(str(exc)) from None
        return _unique(out, "method")

    @field_validator("seeds")
    @classmethod
    def _unique_seeds(cls, seeds: list[int]) -> list[int]:
        for seed in seeds:  # a seed is part of a directory name (METHOD-sSEED)
            if abs(seed) >= MAX_SEED:
                raise ValueError(f"seed {seed} is out of range; seeds are integers below {MAX_SEED:.0e} in size")
        return _unique(seeds, "seed")

    @field_validator("preset")
    @classmethod
    def _known_preset(cls, preset: str) -> str:
        if preset not in PRESETS:
            raise ValueError(f"unknown preset '{preset}'; choose one of: {', '.join(PRESETS)}")
        return preset

    @field_validator("evaluate")
    @classmethod
    def _unique_steps(cls, steps: list[str]) -> list[str]:
        for step in steps:
            if step not in STEPS:
                raise ValueError(f"unknown evaluate step '{step}'; choose from: {', '.join(STEPS)}")
        return _unique(steps, "evaluate step")

    @field_validator("top_up")
    @classmethod
    def _known_top_up(cls, methods: list[str]) -> list[str]:
        return cls._known_methods(methods)

    @model_validator(mode="after")
    def _top_up_methods(self) -> SweepSpec:
        for name in self.top_up:
            if name not in self.methods or name == "decoevo":
                raise ValueError(f"top_up lists {name!r}: it must be one of the sweep's methods other than decoevo")
            if "decoevo" not in self.methods:
                raise ValueError("top_up tops methods up to the paired decoevo run: add decoevo to methods")
        return self

    @model_validator(mode="after")
    def _unique_benchmarks(self) -> SweepSpec:
        # names are directories: 'HB' and 'hb' are one directory on case-insensitive file systems
        _unique([b.name.lower() for b in self.benchmarks], "benchmark name (ignoring case)")
        return self

    def shared(self) -> dict[str, Any]:
        """The run-config keys every cell starts from (before its benchmark, method and seed)."""
        out: dict[str, Any] = deep_merge({}, PRESETS[self.preset])
        for key in ("hyper", "lm", "splits", "budget"):
            out = deep_merge(out, {key: getattr(self, key)})
        for key in ("initial_solver_skill", "initial_generator_skill"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        return out

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.model_dump(mode="json"), sort_keys=False, allow_unicode=True)


def _unique(values: list[Any], what: str) -> list[Any]:
    seen: set[Any] = set()
    for v in values:
        if v in seen:
            raise ValueError(f"{what} {v!r} is listed twice")
        seen.add(v)
    return values


def _unknown_spec_key(loc: tuple[Any, ...]) -> str:
    """What to say of a key a sweep spec does not have: the one it most likely meant, and the keys there
    are (the wheel ships no docs)."""
    import difflib

    fields = list(BenchmarkEntry.model_fields) if loc[:1] == ("benchmarks",) else list(SweepSpec.model_fields)
    near = difflib.get_close_matches(str(loc[-1]), fields, n=1, cutoff=0.6)
    return (f"unknown key{f'; did you mean {near[0]}?' if near else ''} (the keys here: {', '.join(fields)}; "
            "hyper, splits, lm and budget take the keys `decoevo config` lists)")


def describe_spec_error(source: str, exc: ValidationError) -> str:
    parts = []
    for err in exc.errors()[:5]:
        loc = ".".join(str(p) for p in err["loc"]) or "(top level)"
        msg = {"extra_forbidden": _unknown_spec_key(tuple(err["loc"])) if err["type"] == "extra_forbidden" else "",
               "string_pattern_mismatch": f"{err['input']!r} is not a directory name: use letters, digits and "
                                          ". _ - (starting with a letter or digit)"}.get(
            err["type"], err["msg"].removeprefix("Value error, "))
        parts.append(f"{loc}: {msg}")
    return f"{source}: invalid sweep spec: " + "; ".join(parts)


def _resolve(path: str, base: Path) -> str:
    p = Path(path).expanduser()
    return str(p if p.is_absolute() else (base / p).resolve())


def resolve_paths(raw: dict[str, Any], base: Path) -> dict[str, Any]:
    """Make the benchmarks' file paths absolute (relative to `base`), so every cell process, whatever
    its working directory, reads the same files."""
    out = dict(raw)
    if isinstance(raw.get("benchmarks"), list):
        out["benchmarks"] = [
            {**b, **{k: _resolve(b[k], base) for k in ("data", "task_spec") if isinstance(b.get(k), str)}}
            if isinstance(b, dict) else b for b in raw["benchmarks"]]
    if isinstance(raw.get("pilot"), str):
        out["pilot"] = _resolve(raw["pilot"], base)
    return out


def _method_name(name: Any) -> Any:
    try:
        return get_method(name).name if isinstance(name, str) else name
    except ConfigError:
        return name  # validation names it


def at_token_parity(raw: dict[str, Any], source: str) -> dict[str, Any]:
    """A spec's mapping with its controls at the paired DecoEvo run's tokens (Table 4), as `decoevo reproduce`
    runs them: SC-CoEvo and Direct Audit among its methods added to `top_up`, and every match on tokens
    (`budget.match_on: tokens` unless its budget names one), so Budget-Matched is capped on tokens too."""
    methods = [_method_name(m) for m in raw.get("methods") or []] if isinstance(raw.get("methods"), list) else []
    if PAIRED_METHOD not in methods:
        raise ConfigError(f"{source}: parity matches the controls to the paired decoevo run of each seed: add "
                          "decoevo to methods")
    top_up = raw.get("top_up") or []
    if isinstance(top_up, list):
        named = {_method_name(m) for m in top_up}
        top_up = [*top_up, *(m for m in TOPPED_UP if m in methods and m not in named)]
    budget = raw.get("budget") or {}
    if isinstance(budget, dict):
        budget = {"match_on": "tokens", **budget}
    return {**raw, "top_up": top_up, "budget": budget}


def spec_from_dict(raw: Any, source: str, base: Path, overrides: dict[str, Any] | None = None,
                   parity: bool = False) -> SweepSpec:
    if not isinstance(raw, dict):
        raise ConfigError(f"{source}: the top level must be a mapping (methods, seeds, benchmarks, ...)")
    merged = resolve_paths(deep_merge(raw, overrides or {}), base)
    if parity:
        merged = at_token_parity(merged, source)
    try:
        return SweepSpec.model_validate(merged)
    except ValidationError as exc:
        raise ConfigError(describe_spec_error(source, exc)) from None


def read_yaml(path: Path) -> Any:
    text = read_user_text(path, "sweep spec")
    try:
        return yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from None
    except RecursionError:
        raise ConfigError(f"{path}: nested too deeply to read") from None


def load_spec(path: Path, overrides: dict[str, Any] | None = None) -> SweepSpec:
    source = str(path) if not overrides else f"{path} or the command-line flags"
    return spec_from_dict(read_yaml(path), source, path.resolve().parent, overrides)


def default_benchmark() -> dict[str, Any]:
    from ..presets import bundled_healthbench

    return {"name": "healthbench_sample", "data": bundled_healthbench(), "format": "healthbench"}


def build_spec(sweep_dir: Path, spec_file: Path | None, *, overrides: dict[str, Any] | None = None,
               benchmark: dict[str, Any] | None = None, model: str | None = None, base_url: str | None = None,
               on_preset: Callable[[PresetChoice], None] | None = None,
               parity: bool = False) -> tuple[SweepSpec, str]:
    """The spec of `decoevo sweep`: --spec FILE, else SWEEP/sweep.yaml of an earlier invocation, else the
    flags alone (default: DecoEvo, seed 0, the bundled HealthBench sample). Flags override the file:
    `benchmark` replaces its benchmarks, `model`/`base_url` change its default model only
    (`lm_with_flags`), `overrides` are merged into it. A preset neither names is chosen as `decoevo run`
    chooses it (`choose_preset`: `default` for a served model, `quick` for the embedded one) and told to
    `on_preset`; SWEEP/sweep.yaml always names its preset, so a continued sweep keeps its sizes. `parity`:
    the controls at DecoEvo's tokens (`at_token_parity`), written out in SWEEP/sweep.yaml too."""
    stored = sweep_dir / SPEC_FILE
    if spec_file is not None:
        raw, source, base = read_yaml(spec_file), str(spec_file), spec_file.resolve().parent
    elif stored.is_file():
        raw, source, base = read_yaml(stored), str(stored), stored.resolve().parent
    else:
        raw = {"methods": ["decoevo"], "seeds": [0], "benchmarks": [benchmark or default_benchmark()]}
        source, base = "the command-line flags", Path.cwd()
    if not isinstance(raw, dict):
        raise ConfigError(f"{source}: the top level must be a mapping (methods, seeds, benchmarks, ...)")
    raw = dict(raw)
    if benchmark is not None:
        raw["benchmarks"] = [benchmark]
    flags = bool(model or base_url)
    if flags:
        raw["lm"] = lm_with_flags(raw.get("lm"), model, base_url)
    if source != "the command-line flags" and (overrides or benchmark is not None or flags):
        source += " or the command-line flags"
    if "preset" not in raw and "preset" not in (overrides or {}):
        lm, over_lm = raw.get("lm"), (overrides or {}).get("lm")
        if isinstance(over_lm, dict):  # --set lm.… (a mapping that is not one is refused by validation)
            lm = deep_merge(lm if isinstance(lm, dict) else {}, over_lm)
        chosen = choose_preset(None, default_is_served(lm))
        raw["preset"] = chosen.name
        if on_preset is not None:
            on_preset(chosen)
    return spec_from_dict(raw, source, base, overrides, parity=parity), source
