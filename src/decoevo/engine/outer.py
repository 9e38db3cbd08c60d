"""The outer loop (paper §3.3): audit -> distill -> verify, for the generator skill."""

from __future__ import annotations

from collections.abc import Awaitable
from dataclasses import dataclass, field

from ..aio import done, together
from ..domain import QuestionView, Skill
from ..policies import (
    AcceptEveryCandidate,
    AuditObjectives,
    GeneratorDecision,
    VerifyByAudits,
    VerifyBySolverScore,
)
from ..roles.contrastive_audit import ContrastiveRecord
from ..roles.rewrite_generator import append_raw_suggestions, record_entries, rewrite_generator
from ..roles.structural_audit import StructuralRecord
from .audits import AuditedPair, audited_pairs, contrastive_records, first_sample, structural_records
from .context import EngineContext
from .validity import VALID, Validity, check_candidate
from .verify import FrozenPair, audit_objectives, solver_score_objective


@dataclass(frozen=True)
class OuterOutcome:
    round: int
    structural: list[StructuralRecord]
    contrastive: list[ContrastiveRecord]
    candidate: Skill | None = None
    decision: GeneratorDecision | None = None
    notes_for_solver: list[str] = field(default_factory=list)
    validity: Validity = VALID  # an invalid candidate is never verified (decision None)

    @property
    def accepted(self) -> bool:
        return self.decision is not None and self.decision.accepted


async def outer_step(ctx: EngineContext, round_idx: int, solver: Skill, generator: Skill,
                     probe: list[QuestionView], generator_gate: list[QuestionView]) -> OuterOutcome:
    m, h = ctx.method, ctx.hyper
    folder = f"audits/outer_{round_idx:03d}"
    first = first_sample(round_idx, h.rollouts)  # this round's own rollouts (see engine/audits.py)
    # V_g's frozen pairs need neither the probe audits nor the candidate. They are drawn alongside the probe
    # audits when the round is sure to reach verification (a structural record per probe question), else
    # alongside the rewrite, so no round pays for pairs it does not use.
    uses_pairs = (m.evolve_generator and not m.audit_to_solver and isinstance(m.acceptance, VerifyByAudits)
                  and m.contrastive_audit)

    def gate_pairs(now: bool) -> Awaitable[list[AuditedPair] | None]:
        return (audited_pairs(ctx, generator_gate, solver, generator, f"gate{round_idx}", first) if now
                else done(None))

    # 1. Audit the current generator on the probe set.
    structural, contrastive, pairs = await together(
        structural_records(ctx, probe, generator) if m.structural_audit else done([]),
        contrastive_records(ctx, probe, solver, generator, f"probe{round_idx}", first) if m.contrastive_audit
        else done([]),
        gate_pairs(uses_pairs and m.structural_audit and bool(probe)))
    ctx.run.write_jsonl(f"{folder}/structural_probe.jsonl", [r.model_dump() for r in structural])
    ctx.run.write_jsonl(f"{folder}/contrastive_probe.jsonl", [r.model_dump() for r in contrastive])

    if m.audit_to_solver:  # Direct Audit control: the same records go to the next solver rewrite instead
        notes = record_entries(structural, contrastive)
        return OuterOutcome(round_idx, structural, contrastive, notes_for_solver=notes)
    if not m.evolve_generator or not (structural or contrastive):
        return OuterOutcome(round_idx, structural, contrastive)

    # 2. Distill the probe records into a candidate generator skill.
    truncated = False
    if m.distill:  # a round-specific sample index, like the rollouts: a new round is a new draw
        out, pairs = await together(
            rewrite_generator(ctx.lm, generator, structural, contrastive,
                              params=ctx.params(h.max_tokens_rewrite, sample_index=round_idx)),
            gate_pairs(uses_pairs) if pairs is None else done(pairs))
        text, why, truncated = out.skill, out.analysis, out.truncated
    else:
        text, why = append_raw_suggestions(generator, structural, contrastive), "raw audit suggestions appended"
    candidate = Skill(kind="generator", version=generator.version + 1, text=text, parent=generator.version,
                      reason=f"outer round {round_idx}: {why}")
    # A rewriter's output must be a skill; the no-distillation ablation's text is built from the records.
    validity = check_candidate(text, generator.text, truncated=truncated, analysis=why) if m.distill else VALID
    if not validity.valid:  # never verified, never accepted, whatever the acceptance rule
        return OuterOutcome(round_idx, structural, contrastive, candidate, None, validity=validity)

    # 3. Verify on V_g with the method's own verification: what it measures, and the policy that decides.
    decision: GeneratorDecision
    rule = m.acceptance
    if isinstance(rule, AcceptEveryCandidate):
        decision = rule.policy(h).decide(AuditObjectives(), AuditObjectives())
    elif isinstance(rule, VerifyBySolverScore):  # the only path that computes J for a generator (SC-CoEvo)
        j_old, j_new = await together(solver_score_objective(ctx, generator_gate, solver, generator),
                                      solver_score_objective(ctx, generator_gate, solver, candidate))
        decision = rule.policy(h).decide(j_old, j_new)
        ctx.run.write_json(f"{folder}/verification.json", {"J_incumbent": j_old, "J_candidate": j_new,
                                                           "decision": decision.__dict__})
    else:
        frozen: list[FrozenPair] = []
        if m.contrastive_audit:
            pairs = pairs if pairs is not None else await gate_pairs(True)
            frozen = [FrozenPair(p.question, p.plus.response, p.minus.response, p.rationale) for p in pairs or []]
            ctx.run.write_jsonl(f"{folder}/frozen_pairs.jsonl", [p.to_json() for p in frozen])
        (old, old_details), (new, new_details) = await together(
            audit_objectives(ctx, generator_gate, generator, frozen),
            audit_objectives(ctx, generator_gate, candidate, frozen))
        decision = rule.policy(h).decide(old, new)
        ctx.run.write_json(f"{folder}/verification.json", {
            "incumbent": old.__dict__, "candidate": new.__dict__, "decision": decision.__dict__,
            "incumbent_details": old_details, "candidate_details": new_details})
    if not decision.accepted:
        ctx.forget_generator(candidate)
    return OuterOutcome(round_idx, structural, contrastive, candidate, decision)

