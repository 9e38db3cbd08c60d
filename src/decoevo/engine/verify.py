"""Verification of a candidate generator on V_g.

`audit_objectives` is the only evidence the DecoEvo acceptance sees. It takes a generator skill, the
V_g questions and a frozen near-tie set — no solver skill — so it cannot compute the solver's aggregate
score J: score decoupling holds by construction. `solver_score_objective` exists for the SC-CoEvo
baseline only and takes the solver skill explicitly.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from ..aio import done, together
from ..domain import QuestionView, Response, Skill
from ..policies import AuditObjectives, GeneratorDecision
from ..roles.structural_audit import StructuralRecord
from ..scoring import contrastive_resolution, mean_score, pair_margin, structural_adequacy
from ..thresholds import reaches
from .context import EngineContext


@dataclass(frozen=True)
class FrozenPair:
    """One record of Γ on V_g: fixed rollouts and a fixed blind preference; r+ first."""

    question: QuestionView
    preferred: Response
    other: Response
    rationale: str

    def to_json(self) -> dict[str, object]:
        return {"question_id": self.question.id, "preferred": self.preferred.text, "other": self.other.text,
                "rationale": self.rationale}


@dataclass(frozen=True)
class Objective:
    """One audit objective on V_g for one generator: its value (None when unavailable), the per-item
    values behind it (for the paired-bound rule) and the records a verification file keeps."""

    value: float | None
    items: dict[str, float]
    details: object


async def structural_objective(ctx: EngineContext, questions: list[QuestionView], generator: Skill) -> Objective:
    """Φ_str(g) = φ_str(g; V_g); items: u_q by question id; details: the records."""
    from .audits import structural_records

    records = await structural_records(ctx, questions, generator)
    return Objective(structural_adequacy([r.adequacy for r in records]),
                     {r.question_id: r.adequacy for r in records}, [r.model_dump() for r in records])


async def budgeted_structural_objectives(ctx: EngineContext, chunks: list[list[QuestionView]], incumbent: Skill,
                                        candidate: Skill, more: Callable[[], bool]
                                        ) -> tuple[Objective, Objective, list[QuestionView]]:
    """Φ_str of both generators under the co-evolution budget (engine/coevolution_budget.py): V_g a chunk at a
    time, both generators on the same questions, the next chunk only while `more` (token counts, never a score)
    says allowance is left. Returns both objectives and the questions they cover."""
    from .audits import structural_records

    covered: list[QuestionView] = []
    old: list[StructuralRecord] = []
    new: list[StructuralRecord] = []
    for chunk in chunks:
        if covered and not more():
            break
        a, b = await together(structural_records(ctx, chunk, incumbent), structural_records(ctx, chunk, candidate))
        old, new, covered = old + a, new + b, covered + chunk

    def objective(records: list[StructuralRecord]) -> Objective:
        return Objective(structural_adequacy([r.adequacy for r in records]),
                         {r.question_id: r.adequacy for r in records}, [r.model_dump() for r in records])

    return objective(old), objective(new), covered


async def contrastive_objective(ctx: EngineContext, generator: Skill, frozen: list[FrozenPair]) -> Objective:
    """Φ_ctr(g) = φ_ctr(g; Γ), None when Γ is empty; items: per frozen pair its signed resolution (+1 when
    m ≥ γ, −1 when m ≤ −γ, else 0); details: each question's margins."""

    async def margin(p: FrozenPair) -> tuple[str, float]:
        rubric = await ctx.rubric(p.question, generator)
        plus, minus = await together(ctx.judge(p.question, p.preferred, rubric), ctx.judge(p.question, p.other, rubric))
        return p.question.id, pair_margin(plus.score, minus.score)

    gamma = ctx.hyper.gamma
    margins: dict[str, list[float]] = {}
    signed: dict[str, float] = {}
    for k, (qid, m) in enumerate(await ctx.gather(margin, frozen)):
        margins.setdefault(qid, []).append(m)
        signed[f"{qid}#{k}"] = 1.0 if reaches(m, gamma) else -1.0 if reaches(-m, gamma) else 0.0
    return Objective(contrastive_resolution(margins, gamma) if frozen else None, signed, margins)


def objectives(structural: Objective | None, contrastive: Objective | None) -> AuditObjectives:
    """What the acceptance policy sees: the two values and their per-item values, nothing else."""
    return AuditObjectives(structural=structural.value if structural else None,
                           contrastive=contrastive.value if contrastive else None,
                           structural_items=structural.items if structural else {},
                           contrastive_items=contrastive.items if contrastive and contrastive.value is not None
                           else {})


async def audit_objectives(ctx: EngineContext, questions: list[QuestionView], generator: Skill,
                           frozen: list[FrozenPair] | None) -> tuple[AuditObjectives, dict[str, object]]:
    """Φ_str(g) = φ_str(g; V_g) and Φ_ctr(g) = φ_ctr(g; Γ) (eq. 9), with per-item details."""
    details: dict[str, object] = {}
    use_pairs = ctx.method.contrastive_audit and bool(frozen)
    structural, contrastive = await together(  # the two objectives are independent
        structural_objective(ctx, questions, generator) if ctx.method.structural_audit else done(None),
        contrastive_objective(ctx, generator, frozen or []) if use_pairs else done(None))
    if structural is not None:
        details["structural"] = structural.details
    if contrastive is not None:
        details["margins"] = contrastive.details
    return objectives(structural, contrastive), details


class _Decides(Protocol):
    def decide(self, incumbent: AuditObjectives, candidate: AuditObjectives) -> GeneratorDecision: ...


def decided_by_structural(policy: _Decides, incumbent: float | None,
                          candidate: float | None) -> GeneratorDecision | None:
    """The decision when Φ_str alone settles it, else None (the contrastive objective is needed).

    Eq. 10 is monotone in each Δ: raising Δ_ctr can turn a rejection into an acceptance, never the reverse.
    So a candidate rejected even with the best contrastive outcome there is (Φ_ctr from 0 to 1), and
    rejected when Γ is empty (Φ_ctr unavailable), is rejected whatever Γ and its margins turn out to be:
    the frozen set need not be drawn nor the margins judged. Asked of the policy itself, so the check
    follows its comparisons exactly."""
    if incumbent is None or candidate is None:
        return None
    best = policy.decide(AuditObjectives(incumbent, 0.0), AuditObjectives(candidate, 1.0))
    alone = policy.decide(AuditObjectives(structural=incumbent), AuditObjectives(structural=candidate))
    return alone if not (best.accepted or alone.accepted) else None


async def solver_score_objective(ctx: EngineContext, questions: list[QuestionView], solver: Skill,
                                 generator: Skill) -> float:
    """J_Vg(s_t, g): what SC-CoEvo accepts generators by. Never called on the DecoEvo path."""
    return mean_score(await ctx.per_question_scores(questions, solver, generator))
