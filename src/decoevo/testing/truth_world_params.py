"""The knobs of the known-truth world (`truth_world.TruthWorld`), and the prior the bench draws worlds from.

The first group is the round-one world: naming a requirement is the only route to gold and costs nothing.
The second group adds costs a real setting has; every one is off by default, so the default world is
unchanged. Each can make co-evolving the rubric lose: a capacity or length cost makes an extra criterion
costly, a misspecified specification sends the structural audit after items nobody rewards, lenient
criteria and softening rewrites let a rubric pass what it should not, forgetting loses what the rubric
stops rewarding.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, fields
from typing import Any


@dataclass(frozen=True)
class WorldParams:
    """Every knob of the world, with its default. Probabilities are per draw (one request)."""

    n_base: int = 2  # requirements in the specification and the initial generator skill
    n_spec: int = 2  # requirements only the task specification names
    n_contrast: int = 2  # requirements only near-tie contrast reveals
    n_hidden: int = 1  # requirements nothing reveals
    weight_min: int = 1  # gold weights are drawn uniformly from [weight_min, weight_max] per requirement
    weight_max: int = 5
    solver_slip: float = 0.1  # a principle of the strategy not followed in one response
    spontaneous: float = 0.05  # an unnamed base/spec requirement met anyway
    contrast_spontaneous: float = 0.35  # an unnamed contrast requirement met anyway
    rubric_slip: float = 0.05  # a principle's criterion left out of one rubric
    generic_criteria: int = 1  # criteria naming no requirement in every rubric
    judge_noise: float = 0.15  # sd of a criterion's level, on the 0-1 scale
    pref_accuracy: float = 0.9  # one blind preference (one order) picks the truly better response
    pref_tie: float = 0.05  # gold gap under which the blind auditor says equivalent
    anchor: float = 0.5  # an auditor shown the rubric prefers the rubric's favourite instead
    reveal_error: float = 0.1  # stage 2 names a decoy instead of explaining the preference
    audit_noise: float = 0.1  # sd of structural adequacy, on the 0-1 scale
    audit_miss: float = 0.1  # the structural auditor does not name an omission it could see
    solver_rewrite_miss: float = 0.2  # one piece of evidence (a missed criterion) not turned into a principle
    solver_rewrite_drop: float = 0.05  # a solver rewrite drops one existing principle
    solver_rewrite_decoy: float = 0.05  # a solver rewrite adds a decoy principle
    generator_rewrite_miss: float = 0.2  # one audit finding not turned into a principle
    generator_rewrite_drop: float = 0.1  # a generator rewrite drops one existing principle
    generator_rewrite_decoy: float = 0.05  # a generator rewrite adds a decoy principle
    initial_generator_covers_all: bool = False  # the control whose fixed generator already names everything
    # ---- costs a real setting has (all off by default) -------------------------------------------------
    capacity: int = 0  # principles followed at the full rate; with n > capacity each at capacity/n of it (0: none)
    length_cost: float = 0.0  # each principle beyond the first multiplies every follow rate by (1 - length_cost)
    solver_forget: float = 0.0  # a solver rewrite drops each principle its evidence does not name
    n_style: int = 0  # style tags (unrewarded decoys D05...) responses may carry unasked
    style_spontaneous: float = 0.3  # an unnamed style tag present in one response
    vague_criteria: float = 0.0  # the generator writes one criterion loosely ("touches on ...")
    lenient_pass: float = 0.7  # a judge passes a loose criterion the response does not meet
    spec_decoys: int = 0  # unrewarded items (D01...) the specification lists as requirements
    spec_vague: float = 0.0  # share of the specification's requirements given by name only, with no tag
    question_share: float = 1.0  # a requirement applies to a question with this probability (gold per question)
    generator_rewrite_soften: float = 0.0  # a generator rewrite makes one strict principle lenient
    position_bias: float = 0.0  # one blind preference answers "A" (the response shown first), whatever the two say
    n_local: int = 0  # requirements met unasked like contrast ones, rewarded only on the local_questions
    local_questions: tuple[int, ...] = ()  # question numbers where the local requirements count (idiosyncrasies)
    scoped_spec: tuple[tuple[int, ...], ...] = ()  # one specification requirement per tuple, for those questions only


# The prior the bench draws worlds from (`draw_params`), round three: each knob independently, uniformly
# over the values listed (a value listed twice has twice the weight), every other knob at its default.
# Written before any world drawn from it was run; the bench reports every world it draws, none dropped.
# Round two drew only the cost knobs, with the requirement mix fixed at 2 base, 2 spec, 2 contrast, 1 hidden,
# so every drawn world had four findable, rewarded requirements; this one draws the mix too, and gives
# "nothing the audits can find" (no spec and no contrast requirement) a 4 in 25 chance: a task whose
# initial rubric already checks what an audit could find is a common case, not a corner.
PRIOR: dict[str, tuple[Any, ...]] = {
    # the requirement mix: what there is to find, and by which audit
    "n_base": (1, 2, 3),
    "n_spec": (0, 0, 1, 2, 3),
    "n_contrast": (0, 0, 1, 2, 3),
    "n_hidden": (0, 1, 2),
    "spec_decoys": (0, 0, 1, 2, 3),
    "n_style": (0, 2, 4),
    # the auditors: a wrong or position-biased preference teaches a wrong rule when style tags exist
    "pref_accuracy": (0.3, 0.5, 0.6, 0.75, 0.9),
    "position_bias": (0.0, 0.0, 0.2, 0.4),
    # what an extra rule costs, and the other ways a real setting departs from the default world
    "capacity": (0, 0, 3, 4, 5, 6),
    "length_cost": (0.0, 0.0, 0.03, 0.06),
    "solver_forget": (0.0, 0.1, 0.3),
    "vague_criteria": (0.0, 0.0, 0.2, 0.5),
    "spec_vague": (0.0, 0.0, 0.5),
    "question_share": (1.0, 1.0, 0.7, 0.5),
    "generator_rewrite_soften": (0.0, 0.0, 0.2, 0.5),
}
# The transfer prior (issue 48): a second prior, written and committed before any world drawn from it was run,
# to test whether gold-free advice fitted on `PRIOR`'s worlds holds on worlds it was neither fitted nor selected
# on. Its ranges differ on purpose, towards the settings where co-evolving is said to lose or the advice was
# seen to mislead: more hidden requirements (nothing audits can find), always some specification decoys,
# larger starting generators (and, one time in four, one that already names every requirement), noisier
# judges, rubric-blind auditors that mostly prefer the worse answer, and a small generator gate (V_g).
# `generator_gate` is not a `WorldParams` knob: it is the size of the generator-gate split (the bench's
# default is 10), drawn by `draw_split`; `draw_params` skips it.
PRIOR_TRANSFER: dict[str, tuple[Any, ...]] = {
    "n_base": (2, 3, 4),
    "n_spec": (0, 1, 2),
    "n_contrast": (0, 1, 2),
    "n_hidden": (2, 3, 4),
    "spec_decoys": (1, 2, 3, 4),
    "n_style": (2, 3, 4),
    "initial_generator_covers_all": (False, False, False, True),
    "judge_noise": (0.15, 0.3, 0.5),
    "pref_accuracy": (0.0, 0.2, 0.4, 0.6),
    "position_bias": (0.0, 0.2),
    "capacity": (0, 3, 4, 5),
    "length_cost": (0.0, 0.03),
    "solver_forget": (0.0, 0.1),
    "vague_criteria": (0.0, 0.2),
    "spec_vague": (0.0, 0.5),
    "question_share": (1.0, 0.7),
    "generator_rewrite_soften": (0.0, 0.2),
    "generator_gate": (3, 4, 6),
}
# Round two's prior (cost knobs only, fixed mix), kept so its results file can be read: `draw_params(w, prior=...)`.
PRIOR_ROUND_TWO: dict[str, tuple[Any, ...]] = {
    "capacity": (0, 0, 3, 4, 5, 6),
    "length_cost": (0.0, 0.0, 0.03, 0.06),
    "solver_forget": (0.0, 0.1, 0.3),
    "n_style": (0, 2, 3),
    "vague_criteria": (0.0, 0.0, 0.2, 0.5),
    "spec_decoys": (0, 0, 1, 2, 3),
    "spec_vague": (0.0, 0.0, 0.5),
    "question_share": (1.0, 1.0, 0.7, 0.5),
    "generator_rewrite_soften": (0.0, 0.0, 0.2, 0.5),
    "pref_accuracy": (0.6, 0.75, 0.9),
}


def draw_params(world_id: int, base: WorldParams | None = None,
                prior: dict[str, tuple[Any, ...]] | None = None) -> WorldParams:
    """World `world_id` of the prior (`PRIOR` unless given): one value per knob, uniformly, seeded by the id."""
    rng = random.Random(f"truth-world-prior:{world_id}")
    names = {f.name for f in fields(WorldParams)}
    drawn = {k: rng.choice(v) for k, v in (PRIOR if prior is None else prior).items() if k in names}
    return WorldParams(**{**_as_dict(base or WorldParams()), **drawn})


def _as_dict(p: WorldParams) -> dict[str, Any]:
    return {f.name: getattr(p, f.name) for f in fields(p)}


def draw_split(world_id: int, prior: dict[str, tuple[Any, ...]]) -> dict[str, int]:
    """The split sizes a prior draws for world `world_id` (only `generator_gate` so far; {} when it draws none),
    seeded by the id apart from `draw_params`, so adding a split knob leaves the drawn `WorldParams` unchanged."""
    rng = random.Random(f"truth-world-prior-split:{world_id}")
    return {k: rng.choice(v) for k, v in prior.items() if k == "generator_gate"}

