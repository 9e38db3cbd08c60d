"""The outer loop (paper §3.3): audit -> distill -> verify, for the generator skill."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
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
from ..roles.rewrite_generator import SYSTEM as REWRITER_INSTRUCTIONS
from ..roles.rewrite_generator import append_raw_suggestions, record_entries, rewrite_generator
from ..roles.structural_audit import StructuralRecord
from .audits import (
    AuditCoverage,
    AuditedPair,
    AuditStop,
    audit_order,
    audited_pairs,
    contrastive_records,
    draw_starts,
    structural_records,
)
from .context import EngineContext
from .validity import VALID, Shown, Validity, check_candidate
from .verify import (
    FrozenPair,
    audit_objectives,
    budgeted_structural_objectives,
    contrastive_objective,
    decided_by_structural,
    objectives,
    solver_score_objective,
    structural_objective,
)


@dataclass(frozen=True)
class OuterOutcome:
    round: int
    structural: list[StructuralRecord]
    contrastive: list[ContrastiveRecord]
    candidate: Skill | None = None
    decision: GeneratorDecision | None = None
    notes_for_solver: list[str] = field(default_factory=list)
    validity: Validity = VALID  # an invalid candidate is never verified (decision None)
    # What the stopping blind audits covered (`Hyper.probe_enough_pairs`, `frozen_enough_pairs`)
    probe_coverage: AuditCoverage = field(default_factory=AuditCoverage)
    frozen_coverage: AuditCoverage = field(default_factory=AuditCoverage)

    def coverage(self) -> dict[str, dict[str, int]]:
        """The audits a stop rule cut short: questions audited of those there were."""
        return {name: {"audited": c.audited, "of": c.of}
                for name, c in (("probe", self.probe_coverage), ("frozen_set", self.frozen_coverage)) if c.stopped}

    @property
    def accepted(self) -> bool:
        return self.decision is not None and self.decision.accepted


async def outer_step(ctx: EngineContext, round_idx: int, solver: Skill, generator: Skill,
                     probe: list[QuestionView], generator_gate: list[QuestionView],
                     more: Callable[[], bool] | None = None) -> OuterOutcome:
    """One round. `more` (the co-evolution budget, engine/coevolution_budget.py): whether the generator's side
    has token allowance left, asked between chunks of the blind audits; it reads token counts only."""
    m, h = ctx.method, ctx.hyper
    folder = f"audits/outer_{round_idx:03d}"
    first, gate_first = draw_starts(round_idx, solver, generator, h)  # probe's and V_g's (engine/audits.py)
    # V_g's frozen pairs need neither the probe audits nor the candidate. They are drawn alongside the probe
    # audits when the round is sure to reach verification (a structural record per probe question), else
    # alongside the rewrite, so no round pays for pairs it does not use.
    uses_pairs = (m.evolve_generator and not m.audit_to_solver and isinstance(m.acceptance, VerifyByAudits)
                  and m.contrastive_audit)
    # With the decision short cuts, Γ waits for the structural verification, which may make it unneeded.
    structural_first = uses_pairs and m.structural_audit and h.decision_shortcuts

    probe_seen, frozen_seen = AuditCoverage(), AuditCoverage()
    probe_stop = AuditStop(h.probe_enough_pairs, round_idx, more)
    frozen_stop = AuditStop(h.frozen_enough_pairs, round_idx, more)

    def gate_pairs(now: bool, questions: list[QuestionView] | None = None) -> Awaitable[list[AuditedPair] | None]:
        return (audited_pairs(ctx, generator_gate if questions is None else questions, solver, generator,
                              f"gate{round_idx}", gate_first, frozen_stop, frozen_seen) if now
                else done(None))

    # 1. Audit the current generator on the probe set.
    structural, contrastive, pairs = await together(
        structural_records(ctx, probe, generator) if m.structural_audit else done([]),
        contrastive_records(ctx, probe, solver, generator, f"probe{round_idx}", first, probe_stop, probe_seen)
        if m.contrastive_audit
        else done([]),
        gate_pairs(uses_pairs and m.structural_audit and bool(probe) and not structural_first))
    ctx.run.write_jsonl(f"{folder}/structural_probe.jsonl", [r.model_dump() for r in structural])
    ctx.run.write_jsonl(f"{folder}/contrastive_probe.jsonl", [r.model_dump() for r in contrastive])

    if m.audit_to_solver:  # Direct Audit control: the same records go to the next solver rewrite instead
        notes = record_entries(structural, contrastive)
        return OuterOutcome(round_idx, structural, contrastive, notes_for_solver=notes, probe_coverage=probe_seen)
    if not m.evolve_generator or not (structural or contrastive):
        return OuterOutcome(round_idx, structural, contrastive, probe_coverage=probe_seen)

    # 2. Distill the probe records into a candidate generator skill.
    truncated = False
    if m.distill:  # a round-specific sample index, like the rollouts: a new round is a new draw
        out, pairs = await together(
            rewrite_generator(ctx.lm, generator, structural, contrastive,
                              params=ctx.params(h.max_tokens_rewrite, sample_index=round_idx)),
            gate_pairs(uses_pairs and not structural_first) if pairs is None else done(pairs))
        text, why, truncated = out.skill, out.analysis, out.truncated
    else:
        text, why = append_raw_suggestions(generator, structural, contrastive), "raw audit suggestions appended"
    candidate = Skill(kind="generator", version=generator.version + 1, text=text, parent=generator.version,
                      reason=f"outer round {round_idx}: {why}")
    # A rewriter's output must be a skill; the no-distillation ablation's text is built from the records.
    questions = tuple(dict.fromkeys(q for q in [*(r.question for r in structural), *(r.question for r in contrastive)]
                                    if q))
    shown = Shown(REWRITER_INSTRUCTIONS, questions, tuple(a for r in contrastive for a in (r.preferred, r.other) if a))
    validity = (check_candidate(text, generator.text, truncated=truncated, analysis=why, shown=shown) if m.distill
                else VALID)
    if not validity.valid:  # never verified, never accepted, whatever the acceptance rule
        return OuterOutcome(round_idx, structural, contrastive, candidate, None, validity=validity,
                            probe_coverage=probe_seen, frozen_coverage=frozen_seen)

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
        policy = rule.policy(h)

        async def frozen_set(questions: list[QuestionView] | None = None) -> list[FrozenPair]:
            drawn = pairs if pairs is not None else await gate_pairs(True, questions)
            out = [FrozenPair(p.question, p.plus.response, p.minus.response, p.rationale) for p in drawn or []]
            ctx.run.write_jsonl(f"{folder}/frozen_pairs.jsonl", [p.to_json() for p in out])
            return out

        record: dict[str, object]
        if structural_first:  # eq. 10 may be settled by Φ_str alone: then Γ is never drawn (docs/cost.md)
            covered: list[QuestionView] | None = None  # V_g's questions both objectives rest on (None: all)
            if more is not None and generator_gate:  # the budget: V_g two questions at a time while it lasts
                s_old, s_new, covered = await budgeted_structural_objectives(
                    ctx, audit_order(generator_gate, AuditStop(2, round_idx), 1), generator, candidate, more)
            else:
                s_old, s_new = await together(structural_objective(ctx, generator_gate, generator),
                                              structural_objective(ctx, generator_gate, candidate))
            settled = decided_by_structural(policy, s_old.value, s_new.value)
            c_old = c_new = None
            if settled is None:
                frozen = await frozen_set(covered)
                c_old, c_new = await together(contrastive_objective(ctx, generator, frozen),
                                              contrastive_objective(ctx, candidate, frozen))
            old, new = objectives(s_old, c_old), objectives(s_new, c_new)
            decision = settled or policy.decide(old, new)
            record = {"incumbent": old.__dict__, "candidate": new.__dict__, "decision": decision.__dict__,
                      "incumbent_details": {"structural": s_old.details,
                                            **({"margins": c_old.details} if c_old and c_old.details else {})},
                      "candidate_details": {"structural": s_new.details,
                                            **({"margins": c_new.details} if c_new and c_new.details else {})}}
            if settled is not None:
                record["contrastive_not_computed"] = "the structural objective decided eq. 10"
            if covered is not None:  # the budget sized V_g: the questions verification rests on
                record["budget_questions"] = [q.id for q in covered]
        else:
            frozen = await frozen_set() if m.contrastive_audit else []
            (old, old_details), (new, new_details) = await together(
                audit_objectives(ctx, generator_gate, generator, frozen),
                audit_objectives(ctx, generator_gate, candidate, frozen))
            decision = policy.decide(old, new)
            record = {"incumbent": old.__dict__, "candidate": new.__dict__, "decision": decision.__dict__,
                      "incumbent_details": old_details, "candidate_details": new_details}
        ctx.run.write_json(f"{folder}/verification.json", record)
    if not decision.accepted:
        ctx.forget_generator(candidate)
    return OuterOutcome(round_idx, structural, contrastive, candidate, decision, probe_coverage=probe_seen,
                        frozen_coverage=frozen_seen)

