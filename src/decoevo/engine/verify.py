"""Verification of a candidate generator on V_g.

`audit_objectives` is the only evidence the DecoEvo acceptance sees. It takes a generator skill, the
V_g questions and a frozen near-tie set — no solver skill — so it cannot compute the solver's aggregate
score J: score decoupling holds by construction. `solver_score_objective` exists for the SC-CoEvo
baseline only and takes the solver skill explicitly.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..aio import done, together
from ..domain import QuestionView, Response, Skill
from ..policies import AuditObjectives
from ..scoring import contrastive_resolution, mean_score, pair_margin, structural_adequacy
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


async def audit_objectives(ctx: EngineContext, questions: list[QuestionView], generator: Skill,
                           frozen: list[FrozenPair] | None) -> tuple[AuditObjectives, dict[str, object]]:
    """Φ_str(g) = φ_str(g; V_g) and Φ_ctr(g) = φ_ctr(g; Γ) (eq. 9), with per-item details."""
    from .audits import structural_records

    details: dict[str, object] = {}

    async def margin(p: FrozenPair) -> tuple[str, float]:
        rubric = await ctx.rubric(p.question, generator)
        plus, minus = await together(ctx.judge(p.question, p.preferred, rubric), ctx.judge(p.question, p.other, rubric))
        return p.question.id, pair_margin(plus.score, minus.score)

    use_pairs = ctx.method.contrastive_audit and bool(frozen)
    records, pair_margins = await together(  # the two objectives are independent
        structural_records(ctx, questions, generator) if ctx.method.structural_audit else done(None),
        ctx.gather(margin, frozen or []) if use_pairs else done([]))
    structural = None
    structural_items: dict[str, float] = {}
    if records is not None:
        structural = structural_adequacy([r.adequacy for r in records])
        structural_items = {r.question_id: r.adequacy for r in records}
        details["structural"] = [r.model_dump() for r in records]
    contrastive = None
    signed: dict[str, float] = {}
    if use_pairs:
        margins: dict[str, list[float]] = {}
        gamma = ctx.hyper.gamma
        for k, (qid, m) in enumerate(pair_margins):
            margins.setdefault(qid, []).append(m)
            signed[f"{qid}#{k}"] = 1.0 if m >= gamma else -1.0 if m <= -gamma else 0.0
        contrastive = contrastive_resolution(margins, gamma)
        details["margins"] = margins
    return AuditObjectives(structural=structural, contrastive=contrastive, structural_items=structural_items,
                           contrastive_items=signed), details


async def solver_score_objective(ctx: EngineContext, questions: list[QuestionView], solver: Skill,
                                 generator: Skill) -> float:
    """J_Vg(s_t, g): what SC-CoEvo accepts generators by. Never called on the DecoEvo path."""
    return mean_score(await ctx.per_question_scores(questions, solver, generator))
