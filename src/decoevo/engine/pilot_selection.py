"""The pilot split selects hyperparameters (paper §4.1): ε, τ_tie and K from a small declared grid, by how
the gates behave on the pilot questions. Measurement (`measure`) makes model calls on the pilot split only;
selection (`select`) is a pure function of the measurements and returns a frozen `PilotChoice`.

The criteria (docs/pilot.md states them with their reasons):

- ε (solver-gate margin, eq. 4): the smallest grid value at which the gate would accept a candidate that is
  no better than the incumbent at most `ALPHA` of the time. The null spread is measured from pairs of rollouts
  of the same skill on the same question and cached rubric (d_q = z_q,a − z_q,b, mean 0 by symmetry); the
  gate's statistic averages |V_s| such differences, so its null sd is rms(d) / sqrt(|V_s|) and the false
  acceptance rate at ε is 1 − Φ(ε / sd). A smaller ε lets rollout noise through the gate; a larger one only
  rejects real improvements. The acceptance rate of real pilot candidates (SkillOpt inner steps run on the
  pilot split) at every ε is recorded next to it.
- τ_tie (near-tie threshold, eq. 6): the smallest grid value at which at least half of the pilot questions
  yield the full H disjoint near-tie pairs from L rollouts (the audit's quota), so the pairs are as close as
  the data allows; with none reaching it, the largest grid value.
- K (audit schedule): the largest grid value not above the expected number of inner steps until M consecutive
  stalls, with the stall probability p measured at the chosen ε (a pilot step without a candidate, or whose
  candidate the gate rejects, is a stall). Scheduled audits then come at least as often as stall-triggered
  ones would; with no stall observed, the largest grid value.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from itertools import combinations

from pydantic import BaseModel, ConfigDict, Field

from ..aio import gather_all
from ..domain import QuestionView, Skill
from ..lm import ParseError, RefusalError
from ..thresholds import exceeds, reaches
from .context import EngineContext
from .inner import inner_step
from .pairs import select_near_tie_pairs

ALPHA = 0.10  # the largest false-acceptance rate of the solver gate the chosen ε allows
TIE_QUORUM = 0.5  # share of pilot questions that must fill the H near-tie pairs at the chosen τ_tie


class PilotGrid(BaseModel):
    """The declared grid the pilot chooses from."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    epsilon: tuple[float, ...] = Field((0.005, 0.01, 0.02, 0.05, 0.1), min_length=1)
    tau_tie: tuple[float, ...] = Field((0.05, 0.1, 0.15, 0.25), min_length=1)
    audit_every: tuple[int, ...] = Field((1, 2, 3, 4), min_length=1)


@dataclass(frozen=True)
class PilotEvidence:
    """What the pilot measured: L rollout scores per pilot question under its cached rubric, and the paired
    J difference (candidate − incumbent) of each pilot inner step (None: no candidate, a stall)."""

    rollout_scores: dict[str, tuple[float, ...]]
    candidate_deltas: tuple[float | None, ...]
    gate_size: int  # |V_s| of the runs the choice is for
    pairs_per_question: int  # H
    max_stalls: int  # M


@dataclass(frozen=True)
class PilotChoice:
    epsilon: float
    tau_tie: float
    audit_every: int
    # per grid value, the number behind the choice
    false_accept: dict[float, float] = field(default_factory=dict)
    candidate_accept: dict[float, float | None] = field(default_factory=dict)
    tie_quota_share: dict[float, float] = field(default_factory=dict)
    mean_tie_pairs: dict[float, float] = field(default_factory=dict)
    noise_sd: float = 0.0
    stall_probability: float = 1.0
    steps_to_stall_trigger: float | None = None  # None: no stall observed (never triggers)

    def hyper(self) -> dict[str, float | int]:
        return {"epsilon": self.epsilon, "tau_tie": self.tau_tie, "audit_every": self.audit_every}


# ---- selection: pure ------------------------------------------------------------------------------------

def paired_noise(rollout_scores: dict[str, tuple[float, ...]]) -> list[float]:
    """Differences between disjoint pairs of rollouts (1−2, 3−4, ...) of one skill on one question."""
    return [z[i] - z[i + 1] for z in rollout_scores.values() for i in range(0, len(z) - 1, 2)]


def false_accept_rate(noise: Sequence[float], gate_size: int, epsilon: float) -> float:
    """P(mean of `gate_size` null differences > ε), normal approximation; rms, since the null mean is 0."""
    if not noise:
        return 1.0  # nothing measured: no ε is known to be safe
    sd = math.sqrt(sum(d * d for d in noise) / len(noise)) / math.sqrt(max(gate_size, 1))
    if sd == 0.0:
        return 0.0
    return 0.5 * math.erfc(epsilon / sd / math.sqrt(2))


def tie_pairs(scores: Sequence[float], tau: float) -> int:
    return sum(1 for a, b in combinations(scores, 2) if reaches(tau, abs(a - b)))


def steps_to_stall_trigger(p: float, m: int) -> float | None:
    """Expected inner steps until M consecutive stalls, each with probability p (None: p = 0, never)."""
    if p <= 0.0:
        return None
    if p >= 1.0:
        return float(m)
    return (p ** -m - 1.0) / (1.0 - p)


def select(evidence: PilotEvidence, grid: PilotGrid) -> PilotChoice:
    noise = paired_noise(evidence.rollout_scores)
    eps_grid = sorted(grid.epsilon)
    false_accept = {e: false_accept_rate(noise, evidence.gate_size, e) for e in eps_grid}
    epsilon = next((e for e in eps_grid if false_accept[e] <= ALPHA), eps_grid[-1])
    real = [d for d in evidence.candidate_deltas if d is not None]
    candidate_accept = {e: (sum(1 for d in real if d > e) / len(real) if real else None) for e in eps_grid}

    tau_grid = sorted(grid.tau_tie)
    h, questions = evidence.pairs_per_question, list(evidence.rollout_scores.values())
    quota = {t: (sum(1 for z in questions if len(select_near_tie_pairs(z, t, h)) >= h) / len(questions)
                 if questions else 0.0) for t in tau_grid}
    mean_pairs = {t: (sum(tie_pairs(z, t) for z in questions) / len(questions) if questions else 0.0)
                  for t in tau_grid}
    tau = next((t for t in tau_grid if quota[t] >= TIE_QUORUM), tau_grid[-1])

    steps = evidence.candidate_deltas
    stalls = sum(1 for d in steps if d is None or not exceeds(d, epsilon))  # as the gate decides
    p = stalls / len(steps) if steps else 1.0
    expected = steps_to_stall_trigger(p, evidence.max_stalls)
    k_grid = sorted(grid.audit_every)
    fitting = [k for k in k_grid if expected is None or k <= expected]
    audit_every = fitting[-1] if fitting else k_grid[0]
    sd = math.sqrt(sum(d * d for d in noise) / len(noise)) if noise else 0.0
    return PilotChoice(epsilon, tau, audit_every, false_accept, candidate_accept, quota, mean_pairs, sd, p,
                       expected)


# ---- measurement: model calls on the pilot split only -----------------------------------------------------

async def rollout_scores(ctx: EngineContext, questions: list[QuestionView], solver: Skill,
                         generator: Skill) -> dict[str, tuple[float, ...]]:
    """L rollouts per question at the rollout temperature, each scored under the question's cached rubric."""
    h = ctx.hyper

    async def one(q: QuestionView) -> tuple[float, ...]:
        rubric = await ctx.rubric(q, generator)
        responses = await gather_all(*[ctx.respond(q, solver, sample_index=i, temperature=h.rollout_temperature)
                                           for i in range(h.rollouts)])
        scored = await gather_all(*[ctx.judge(q, r, rubric) for r in responses])
        return tuple(s.score for s in scored)

    scores = await ctx.gather(one, questions)
    return {q.id: z for q, z in zip(questions, scores, strict=True)}


async def candidate_deltas(ctx: EngineContext, questions: list[QuestionView], solver: Skill, generator: Skill,
                           steps: int) -> tuple[float | None, ...]:
    """SkillOpt inner steps from the initial skills: batches from one half of the pilot, the gate on the other.
    Each step starts from the same incumbent with its own seed, so every delta measures one independent
    rewrite (with one seed, a deterministic model would repeat the same rewrite)."""
    half = max(1, len(questions) // 2)
    train, gate = (questions[:half], questions[half:]) if len(questions) > 1 else (questions, questions)
    out: list[float | None] = []
    for step in range(steps):
        try:
            outcome = await inner_step(replace(ctx, seed=ctx.seed + 7919 * (step + 1)), step, solver, generator,
                                       train, gate)
        except (ParseError, RefusalError):  # an unusable rewrite is a stall in a run, too
            out.append(None)
            continue
        out.append(outcome.decision.delta if outcome.decision is not None else None)
    return tuple(out)
