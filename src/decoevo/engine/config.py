"""Run configuration. Every hyperparameter has a default, is exposed, and is recorded in the run."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ..errors import validation_summary
from ..lm import LMConfig
from ..lm.errors import ConfigError
from ..tasks.load import DataConfig
from ..tasks.splits import SplitSizes
from ..userfiles import load_yaml_mapping, surrogate_at
from .role_names import ROUTABLE_ROLES

# The largest size each key accepts: far above any setting of the paper (T = 20, L = 6, K = 6), and small
# enough that nothing sized by them (the projection, the splits, a step's batch) can run for hours before
# the first budget check. A value past one is refused naming the key and its range.
MAX_STEPS = 10_000
MAX_PERIOD = 1_000  # K, M, the budget-matched step cap
MAX_ROLLOUTS = 256
MAX_COUNT = 10_000  # batch, failures shown, pairs, questions at once
MAX_TOKENS = 1_000_000


class Hyper(BaseModel):
    """The method's hyperparameters (symbols as in the paper) and the call sizes of each role."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)

    steps: int = Field(4, ge=0, le=MAX_STEPS, description="T: inner-loop steps")
    batch_size: int = Field(3, ge=1, le=MAX_COUNT, description="training questions per inner step")
    audit_every: int = Field(2, ge=1, le=MAX_PERIOD, description="K: run the outer loop after every K inner steps")
    max_stalls: int = Field(2, ge=1, le=MAX_PERIOD, description="M: or after M consecutive solver rejections")
    epsilon: float = Field(0.01, gt=0, description="ε: solver-gate margin on J_Vs")
    solver_gate: Literal["margin", "paired_bound"] = Field(
        "margin", description="margin: accept a solver rewrite when J on V_s rises by more than ε (the paper); "
        "paired_bound: when the lower confidence bound of the paired per-question difference, mean − z·sd/√n, "
        "exceeds ε (fewer false accepts under a noisy judge, more false rejects; `decoevo docs mechanism`)")
    solver_gate_z: float = Field(1.645, gt=0, description="z of the paired_bound solver gate (1.645: one-sided 95%)")
    generator_gate: Literal["pareto", "paired_bound"] = Field(
        "pareto", description="pareto: the paper's rule on the changes of Φ_str and Φ_ctr (δ, η); paired_bound: an "
        "objective counts as improved only when the lower confidence bound of its paired per-item difference "
        "exceeds δ (per V_g question; per frozen pair, resolutions signed) (`decoevo docs mechanism`)")
    generator_gate_z: float = Field(1.645, gt=0, description="z of the paired_bound generator rule")
    max_failures: int = Field(3, ge=1, le=MAX_COUNT, description="failures shown to the solver rewriter per step")
    rollouts: int = Field(4, ge=2, le=MAX_ROLLOUTS,
                          description="L: solver rollouts per question for the near-tie audit")
    rollout_temperature: float = Field(0.8, gt=0, le=2, description="sampling temperature of the L solver "
                                       "rollouts of the near-tie audits (and the pilot); every other call uses 0")
    tau_tie: float = Field(0.15, ge=0, le=1, description="τ_tie: near-tie threshold on rubric scores")
    pairs_per_question: int = Field(2, ge=1, le=MAX_COUNT, description="H: near-tie pairs kept per question")
    gamma: float = Field(0.05, gt=0, le=1, description="γ: margin for a pair to count as resolved")
    delta: float = Field(0.02, gt=0, description="δ: Pareto improvement margin")
    eta: float = Field(0.02, ge=0, description="η: Pareto regression tolerance")
    sc_margin: float = Field(0.0, ge=0, description="SC-CoEvo: required rise of the solver score")
    judge_mode: Literal["joint", "per_criterion"] = Field(
        "joint", description="joint: the judge scores every criterion of a rubric in one call; per_criterion: "
        "one call per criterion")
    max_criteria: int = Field(8, ge=1, le=64, description="most criteria a generated rubric may have")
    budget_step_cap: int = Field(10, ge=1, le=MAX_PERIOD, description="budget-matched or topped up: at most this "
                                 "many times T steps that spend something (twice that in all)")
    # The token limits' defaults fit the embedded model; unset, a role served by a server gets
    # SERVER_TOKEN_LIMITS below instead (see with_backend_token_limits).
    max_tokens_solve: int = Field(320, ge=16, le=MAX_TOKENS,
                                  description="token limit of a solver answer; unset and `solve` "
                                  "served by openai/litellm: 2048")
    max_tokens_rubric: int = Field(400, ge=16, le=MAX_TOKENS,
                                   description="token limit of a generated rubric; unset and "
                                   "`generate_rubric` served by openai/litellm: 1500")
    max_tokens_judge: int = Field(700, ge=16, le=MAX_TOKENS,
                                  description="token limit of a judgement; unset and `judge` served "
                                  "by openai/litellm: 3000")
    max_tokens_rewrite: int = Field(800, ge=16, le=MAX_TOKENS,
                                    description="token limit of a solver or generator rewrite; unset "
                                    "and `rewrite_solver` served by openai/litellm: 2000")
    max_tokens_audit: int = Field(400, ge=16, le=MAX_TOKENS,
                                  description="token limit of a structural audit and of both "
                                  "contrastive-audit stages; unset and `structural_audit` served by "
                                  "openai/litellm: 1200")
    concurrency: int = Field(8, ge=1, le=MAX_COUNT, description="questions processed at once")
    decision_shortcuts: bool = Field(True, description="skip work that cannot change a decision "
                                     "(`decoevo docs cost`): V_g's contrastive verification when the structural "
                                     "objective already rejects the candidate, a blind comparison's second order "
                                     "after an 'equivalent'; the same decisions and skills either way")
    # Cost levers (docs/cost.md). Both change which rollouts the audits see, so both are off by default.
    reuse_frozen_set: bool = Field(False, description="V_g's frozen near-tie set is drawn once per (solver, "
                                   "generator) pair and reused by every round in which neither changed")
    reuse_probe_draws: bool = Field(False, description="the probe audit's rollouts likewise: a round in which "
                                    "neither skill changed sees the same pairs and records as the last one")
    reuse_gate_answers: bool = Field(False, description="V_g's rollouts are drawn once per solver version: a "
                                     "round whose solver did not change judges the same answers again under the "
                                     "current generator's rubrics (a superset of reuse_frozen_set)")
    rollouts_early_stop: bool = Field(False, description="draw a question's rollouts 2H first and the rest "
                                      "only if those hold fewer than H near-tie pairs")
    # A cost-aware audit schedule (the `lean` preset, docs/cost.md): the blind audits stop once they have
    # found enough decided pairs. Off (0) by default: the paper audits every question.
    probe_enough_pairs: int = Field(0, ge=0, le=MAX_COUNT, description="stop the probe's near-tie contrastive "
                                    "audit once it holds this many decided (not equivalent) blind pairs; the "
                                    "questions are taken in chunks of ⌈n/H⌉, from a start that rotates with the "
                                    "round (0: every question)")
    frozen_enough_pairs: int = Field(0, ge=0, le=MAX_COUNT, description="likewise for V_g's frozen near-tie set "
                                     "Γ: stop drawing it once it holds this many pairs (0: every question)")
    quiet_final_steps: int = Field(0, ge=0, le=MAX_STEPS, description="no outer round after any of the last N "
                                   "inner steps: fewer than N solver steps would remain to learn under the new "
                                   "generator (the final generator skill is then N steps less evolved; 0: rounds "
                                   "to the end, as the paper)")
    generator_share: float = Field(0.0, ge=0, le=100, description="the co-evolution budget: the generator's "
                                   "side (outer rounds) may spend this share of the solver loop's tokens, projected "
                                   "to the planned steps; a round starts only while allowance is left and its blind "
                                   "audits stop when it runs out (0: no budget, as the paper)")
    audit_schedule: Literal["fixed", "since_last_round"] = Field(
        "fixed", description="fixed: rounds after steps K, 2K, ... and after M stalls; since_last_round: K "
        "counts from the last round, so a stall-triggered round moves the next scheduled one")


class BudgetConfig(BaseModel):
    """Limits checked before every paid call and every answer inherited from a shared cache (paid by another
    run); the run stops cleanly at the last completed step. Inherited answers count, so a budget is what the
    run would cost alone, and a rerun answered wholly from another run's cache stops where that run would."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)

    max_calls: int | None = Field(None, ge=1, description="most model calls (`--max-calls`)")
    max_tokens: int | None = Field(None, ge=1, description="most tokens, prompt + completion (`--max-tokens`)")
    max_cost: float | None = Field(None, gt=0, description="USD, paid + inherited; every model needs a price")
    match_run: str | None = Field(None, description="a run directory whose calls and tokens (and dollars, "
                                  "when every call was priced) become the budget, where not set above (the "
                                  "Budget-Matched control against a paired DecoEvo run)")
    top_up: bool = Field(False, description="keep taking solver steps (at most `budget_step_cap` × T) until "
                         "the budget is spent, as Budget-Matched does; with `match_run`, any method (e.g. "
                         "SC-CoEvo, Direct Audit) is topped up to the paired run's usage")
    match_on: Literal["usage", "tokens"] = Field("usage", description="what `match_run` caps: its calls, tokens "
                                                 "and dollars (`usage`), or its tokens alone (`tokens`: the paper's "
                                                 "unit of compute parity, Table 4; `decoevo reproduce` uses it)")


class RunConfig(BaseModel):
    """One run: the method, its seed and initial skills; the sections below."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)

    method: str = Field("decoevo", description="the method to run (`decoevo methods`)")
    seed: int = Field(0, gt=-(10**18), lt=10**18, description="draws the splits and batches and seeds "
                      "sampling; part of the run directory name, hence bounded")
    data: DataConfig
    splits: SplitSizes = SplitSizes()
    hyper: Hyper = Hyper()
    lm: LMConfig = Field(default_factory=LMConfig)
    budget: BudgetConfig = BudgetConfig()
    initial_solver_skill: str | None = Field(None, description="the text of the solver skill the run starts "
                                             "from; unset or empty: a short built-in one")
    initial_generator_skill: str | None = Field(None, description="the text of the rubric-generator skill the "
                                                "run starts from; unset or empty: a short built-in one")

    @model_validator(mode="after")
    def _method_exists(self) -> RunConfig:
        from ..methods import get_method

        get_method(self.method)
        return self

    @field_validator("lm")
    @classmethod
    def _roles_exist(cls, lm: LMConfig) -> LMConfig:
        unknown = [role for role in lm.roles if role not in ROUTABLE_ROLES]
        if unknown:  # a misspelt role would silently stay on the default model
            raise ValueError(f"roles names no such role: {', '.join(unknown)} (the roles: "
                             f"{', '.join(ROUTABLE_ROLES)})")
        return lm

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.model_dump(mode="json"), sort_keys=False, allow_unicode=True)


# Token limits for a role served by an OpenAI-compatible server, used where the configuration leaves
# them unset: a capable model needs room for a full answer (a typical HealthBench reply runs to several
# hundred tokens), a judge's rationales and a rewrite. The Hyper defaults stay sized for the embedded model.
SERVER_TOKEN_LIMITS: dict[str, tuple[str, int]] = {
    "max_tokens_solve": ("solve", 2048),
    "max_tokens_rubric": ("generate_rubric", 1500),
    "max_tokens_judge": ("judge", 3000),
    "max_tokens_rewrite": ("rewrite_solver", 2000),
    "max_tokens_audit": ("structural_audit", 1200),
}


def with_backend_token_limits(config: RunConfig) -> RunConfig:
    """The configuration with each token limit the user did not set sized for the backend serving its
    role: the server default above, or the embedded model's small Hyper default."""
    update = {}
    for name, (role, tokens) in SERVER_TOKEN_LIMITS.items():
        spec = config.lm.models[config.lm.model_for(role)]
        if name not in config.hyper.model_fields_set and spec.backend != "local":
            update[name] = tokens
    if not update:
        return config
    return config.model_copy(update={"hyper": config.hyper.model_copy(update=update)})


_BOUND_ERRORS = frozenset({"less_than_equal", "less_than", "greater_than_equal", "greater_than"})


def field_range(model: type[BaseModel], loc: tuple[Any, ...]) -> str | None:
    """The range ("between 0 and 10000") of the numeric field at `loc` under `model`, if it has two bounds."""
    field = None
    for part in loc:
        field = model.model_fields.get(part) if isinstance(part, str) else None
        if field is None:
            return None
        inner = field.annotation
        model = inner if isinstance(inner, type) and issubclass(inner, BaseModel) else model
    bounds = {a: getattr(m, a) for m in (field.metadata if field else ()) for a in ("ge", "gt", "le", "lt")
              if getattr(m, a, None) is not None}
    if "ge" in bounds and "le" in bounds:
        return f"between {bounds['ge']} and {bounds['le']}"
    parts = [f"{words} {bounds[a]}" for a, words in
             (("ge", "at least"), ("gt", "more than"), ("le", "at most"), ("lt", "less than")) if a in bounds]
    # a one-sided bound reads well as pydantic words it ("greater than 0"); a range is told whole
    return " and ".join(parts) if len(parts) == 2 else None


def explain_bounds(model: type[BaseModel]) -> Any:
    """A `validation_summary` hook: an out-of-range number is told its key's whole range."""

    def explain(err: dict[str, Any]) -> str | None:
        if err["type"] not in _BOUND_ERRORS:
            return None
        span = field_range(model, tuple(err["loc"]))
        return f"out of range; it must be {span}" if span else None

    return explain



def _keys(model: type[BaseModel], prefix: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """Every key of `model`, sections too; a mapping of models' own keys stand as NAME."""
    for name, field in model.model_fields.items():
        key = (*prefix, name)
        yield key
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            yield from _keys(annotation, key)
        elif get_origin(annotation) is dict:
            value = get_args(annotation)[1]
            if isinstance(value, type) and issubclass(value, BaseModel):
                yield from _keys(value, (*key, "NAME"))


def key_pattern(key: str) -> tuple[str, ...]:
    """A key as the reference spells it: a model's own name (lm.models.judge) stands as NAME."""
    parts = key.split(".")
    if len(parts) >= 3 and parts[:2] == ["lm", "models"]:
        parts[2] = "NAME"
    return tuple(parts)


def nearest_key(key: str) -> str | None:
    """The key a misspelt one most likely meant (`hyper.stepz`: `hyper.steps`): a key of the same
    section within a small edit distance, spelt with the user's own prefix."""
    import difflib

    parts = key_pattern(key)
    siblings = [k[-1] for k in _keys(RunConfig) if k[:-1] == parts[:-1]]
    match = difflib.get_close_matches(parts[-1], siblings, n=1, cutoff=0.6)
    return ".".join([*key.split(".")[:-1], match[0]]) if match else None


def unknown_key_hint(key: str) -> str:
    """What to say of a configuration key that does not exist: the key it most likely meant, and the
    command that lists the section's keys (the wheel ships no docs)."""
    near = nearest_key(key)
    section = key.rsplit(".", 1)[0] if "." in key else ""
    listed = f"`decoevo config {section}` lists its keys" if section else "`decoevo config` lists every key"
    return f"unknown key; did you mean {near}? ({listed})" if near else f"unknown key ({listed})"


def describe_validation_error(source: str, exc: ValidationError) -> str:
    return (f"{source}: invalid configuration: "
            f"{validation_summary(exc, explain=explain_bounds(RunConfig), unknown_key=unknown_key_hint)}")


def load_config(path: Path | str, overrides: dict[str, Any] | None = None) -> RunConfig:
    return config_from_dict(load_yaml_mapping(path), overrides, source=str(path))


PATH_KEYS = frozenset({"path", "task_spec", "gguf_path", "api_key_file", "cache_path", "match_run"})


def config_from_dict(raw: dict[str, Any], overrides: dict[str, Any] | None = None, source: str = "config") -> RunConfig:
    merged = deep_merge(raw, overrides or {})
    # e.g. "\ud800" in YAML would fail later, in a request; file names may hold undecodable bytes
    bad = surrogate_at(merged, skip=PATH_KEYS)
    if bad is not None:
        raise ConfigError(f"{source}: {bad or '(top level)'}: holds a lone UTF-16 surrogate, which is not valid "
                          "Unicode text")
    try:
        return RunConfig.model_validate(merged)
    except ValidationError as exc:
        raise ConfigError(describe_validation_error(source, exc)) from None


def deep_merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in extra.items():
        out[k] = deep_merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def default_model_from_flags(current: Any, model: str | None, base_url: str | None) -> dict[str, Any]:
    """The `default` model after --model/--base-url, which change that model only (a config file's
    other models and its role map stay). --base-url: an OpenAI-compatible server, keeping the file's
    settings for it (key, timeouts, retries) when its default already was one. --model alone: the model
    name at the file's server, or a GGUF path when the default is the embedded backend."""
    cur = dict(current) if isinstance(current, dict) else {}
    served = cur.get("backend") == "openai"
    if base_url:
        kept = cur if served else {}
        return {**kept, "backend": "openai", "base_url": base_url, "model": model or kept.get("model", "default")}
    if not model:
        return cur
    if served:
        return {**cur, "model": model}
    kept = {k: v for k, v in cur.items() if k not in ("gguf_path", "model")}
    return {**kept, "gguf_path": model, "model": Path(model).stem}


def lm_with_flags(lm: Any, model: str | None, base_url: str | None, no_cache: bool = False) -> Any:
    """A configuration's `lm` section with the command-line model flags merged in (see above)."""
    if not (model or base_url or no_cache) or (lm is not None and not isinstance(lm, dict)):
        return lm  # nothing to merge, or not a mapping: validation names it
    out = dict(lm or {})
    if model or base_url:
        models = dict(out["models"]) if isinstance(out.get("models"), dict) else {}
        models["default"] = default_model_from_flags(models.get("default"), model, base_url)
        out["models"] = models
    if no_cache:
        out["use_cache"] = False
    return out
