"""The inner loop (paper §3.2): improve the solver skill from criterion-level feedback."""

from __future__ import annotations

from dataclasses import dataclass

from ..aio import together
from ..domain import QuestionView, Skill
from ..policies import SolverGateDecision, select_failures
from ..policies import solver_gate as gate_for
from ..roles.rewrite_solver import SYSTEM as REWRITER_INSTRUCTIONS
from ..roles.rewrite_solver import Failure, rewrite_solver
from .context import EngineContext, Scored
from .validity import VALID, Shown, Validity, check_candidate


@dataclass(frozen=True)
class InnerOutcome:
    step: int
    batch_scores: dict[str, float]
    candidate: Skill | None
    decision: SolverGateDecision | None
    validity: Validity = VALID  # an invalid candidate is never gated (decision None)

    @property
    def accepted(self) -> bool:
        return self.decision is not None and self.decision.accepted


async def inner_step(ctx: EngineContext, step: int, solver: Skill, generator: Skill,
                     train: list[QuestionView], solver_gate: list[QuestionView],
                     audit_notes: list[str] | None = None, rewrite_index: int = 0) -> InnerOutcome:
    """One inner step; `rewrite_index` is the rewrite's sample index (fresh per top-up step past T)."""
    h = ctx.hyper
    batch = ctx.rng("batch", step).sample(train, min(h.batch_size, len(train)))
    # Solve the batch with s_t; rubrics R_q(g_t); judge every criterion.
    scored = await ctx.gather(lambda q: ctx.evaluate(q, solver, generator), batch)
    by_id = {s.question.id: s for s in scored}
    chosen = select_failures({qid: s.score for qid, s in by_id.items()}, h.max_failures)
    if not chosen:  # the rubric is saturated on this batch: nothing to learn from, counts as a stall
        return InnerOutcome(step, {k: v.score for k, v in by_id.items()}, None, None)
    failures = [Failure(by_id[qid].question, by_id[qid].response.text, by_id[qid].rubric,
                        by_id[qid].judgement, by_id[qid].score) for qid in chosen]
    # Consolidating rewrite into s'.
    out = await rewrite_solver(ctx.lm, solver, failures, extra_notes=audit_notes,
                               params=ctx.params(h.max_tokens_rewrite, sample_index=rewrite_index))
    candidate = Skill(kind="solver", version=solver.version + 1, text=out.skill, parent=solver.version,
                      reason=f"step {step}: {out.analysis}")
    shown = Shown(REWRITER_INSTRUCTIONS, tuple(f.question.as_text() for f in failures),
                  tuple(f.response for f in failures))
    validity = check_candidate(out.skill, solver.text, truncated=out.truncated, analysis=out.analysis, shown=shown)
    if not validity.valid:  # never gated: a noisy gate must not get the chance to accept it
        return InnerOutcome(step, {k: v.score for k, v in by_id.items()}, candidate, None, validity)
    # Paired ε-gate on V_s with the same cached rubrics R_q(g_t) (or its noise-aware option).
    old, new = await together(ctx.gather(lambda q: ctx.evaluate(q, solver, generator), solver_gate),
                              ctx.gather(lambda q: ctx.evaluate(q, candidate, generator), solver_gate))
    decision = gate_for(h).decide({s.question.id: s.score for s in old}, {s.question.id: s.score for s in new})
    # Per-criterion scores of both arms under the one rubric: what analysis/criterion_drift.py reads.
    ctx.run.write_json(f"gates/step{step:03d}.json", gate_record(step, decision.accepted, old, new))
    return InnerOutcome(step, {k: v.score for k, v in by_id.items()}, candidate, decision)


def gate_record(step: int, accepted: bool, incumbent: list[Scored], candidate: list[Scored]) -> dict[str, object]:
    by_id = {s.question.id: s for s in candidate}
    return {"step": step, "accepted": accepted, "questions": [
        {"id": s.question.id, "criteria": [c.text for c in s.rubric.criteria],
         "incumbent": [c.score for c in s.judgement.scores],
         "candidate": [c.score for c in by_id[s.question.id].judgement.scores]}
        for s in incumbent if s.question.id in by_id]}
