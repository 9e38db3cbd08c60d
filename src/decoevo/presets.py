"""Named starting configurations. `quick` sizes a real DecoEvo run for the embedded 135M model on two
CPU cores (a few minutes); `paper` is a starting point for a capable model behind a server, sized to the
paper's cost relations (Table 4); `lean` is `paper` with a cost-aware audit schedule; `paper-full` keeps the
earlier, larger audit sizes."""

from __future__ import annotations

from dataclasses import dataclass
from importlib.resources import files
from typing import Any

EMBEDDED_PRESET = "quick"  # sized for the embedded 135M model on two cores
SERVER_PRESET = "default"  # room for a capable model's answers (the server token limits, engine/config.py)


@dataclass(frozen=True)
class PresetChoice:
    name: str
    reason: str | None  # None: the user named it


def choose_preset(given: str | None, served: bool) -> PresetChoice:
    """The preset a run starts from: the one given, else `default` for a model behind a server (the
    `quick` sizes cut a capable model's answers: 120 tokens) and `quick` for the embedded model."""
    if given is not None:
        return PresetChoice(given, None)
    if served:
        return PresetChoice(SERVER_PRESET, "the model is served: answers get a capable model's token limits; "
                                           "--preset quick for the embedded model's sizes")
    return PresetChoice(EMBEDDED_PRESET, "the embedded model; against a server --preset default or paper")


def default_is_served(lm: Any) -> bool:
    """Whether a configuration's `lm` section (a mapping, unvalidated) serves its default model."""
    models = lm.get("models") if isinstance(lm, dict) else None
    default = models.get("default") if isinstance(models, dict) else None
    return isinstance(default, dict) and default.get("backend") in ("openai", "litellm")


def bundled_healthbench() -> str:
    return str(files("decoevo") / "data" / "healthbench_sample.jsonl")


PRESETS: dict[str, dict[str, Any]] = {
    "quick": {
        "splits": {"train": 4, "probe": 1, "solver_gate": 2, "generator_gate": 1, "diagnostic": 0, "test": 4},
        "hyper": {"steps": 2, "batch_size": 2, "audit_every": 2, "max_stalls": 2, "rollouts": 2,
                  "pairs_per_question": 1, "max_failures": 2, "max_criteria": 3, "tau_tie": 0.5,
                  "max_tokens_solve": 120, "max_tokens_rubric": 400, "max_tokens_judge": 400,
                  "max_tokens_rewrite": 700, "max_tokens_audit": 400},
    },
    # Every preset holds out a test split, so `decoevo eval` works on any run started from one; the split
    # sizes of `default` (24 questions in all) fit the bundled HealthBench sample.
    # No rubric-size cap below the gold rubrics': the bundled HealthBench rubrics have 5-27 criteria (mean 13.9).
    "default": {"splits": {"test": 6}, "hyper": {"max_criteria": 30}},
    # `paper`: sizes chosen so that, in the simulator at HealthBench reply lengths, the costs stand in Table 4's
    # relations (DecoEvo about 1.89x SkillOpt's tokens; SC-CoEvo and Direct Audit close to DecoEvo) in every
    # world of a family of simulated worlds (bench/cost/cost_calibrate.py), then checked in worlds they were not
    # chosen in: the paper's own sizes are in a supplement we do not have (docs/cost.md). Every audit runs.
    # V_g is small (5 questions, up to 15 frozen pairs): verification is the cost Direct Audit does not pay.
    "paper": {
        "splits": {"pilot": 10, "train": 60, "probe": 12, "solver_gate": 20, "generator_gate": 5,
                   "diagnostic": 20, "test": 100},
        "hyper": {"steps": 20, "batch_size": 6, "audit_every": 6, "max_stalls": 4, "rollouts": 6,
                  "audit_schedule": "since_last_round",
                  "pairs_per_question": 3, "max_criteria": 30, "max_tokens_solve": 1024, "max_tokens_judge": 1500,
                  "max_tokens_rewrite": 1200, "max_tokens_audit": 600,
                  "concurrency": 64},  # questions at once: a server's batch (the embedded model queues them)
    },
    # `lean`: the `paper` sizes with a cost-aware audit schedule (docs/cost.md, "A cheaper schedule"): blind
    # audits that stop once they hold enough decided pairs (probe 2, Γ 4), 4 rollouts and 2 pairs a question,
    # V_g's and the probe's rollouts reused while the skills they sample are unchanged, `paper`'s rounds (every 6
    # steps or after 4 stalls) but none after the last 2 steps (too late for the solver to learn from). Score
    # decoupling is unchanged: the stop rules count blind verdicts, not scores.
    "lean": {
        "splits": {"pilot": 10, "train": 60, "probe": 12, "solver_gate": 20, "generator_gate": 5,
                   "diagnostic": 20, "test": 100},
        "hyper": {"steps": 20, "batch_size": 6, "audit_every": 6, "max_stalls": 4, "rollouts": 4,
                  "audit_schedule": "since_last_round", "pairs_per_question": 2,
                  "probe_enough_pairs": 2, "frozen_enough_pairs": 4,
                  "reuse_gate_answers": True, "reuse_probe_draws": True, "quiet_final_steps": 2,
                  "max_criteria": 30, "max_tokens_solve": 1024, "max_tokens_judge": 1500,
                  "max_tokens_rewrite": 1200, "max_tokens_audit": 600, "concurrency": 64},
    },
    # `paper-full`: the earlier `paper` sizes (V_g of 20, 6 rollouts, a round every 4 steps counted from step 0):
    # about 3x SkillOpt's tokens in the simulator (docs/cost.md).
    "paper-full": {
        "splits": {"pilot": 10, "train": 60, "probe": 12, "solver_gate": 20, "generator_gate": 20,
                   "diagnostic": 20, "test": 100},
        "hyper": {"steps": 20, "batch_size": 6, "audit_every": 4, "max_stalls": 3, "rollouts": 6,
                  "pairs_per_question": 2, "max_criteria": 30, "max_tokens_solve": 1024, "max_tokens_judge": 1500,
                  "max_tokens_rewrite": 1200, "max_tokens_audit": 600, "concurrency": 64},
    },
}
