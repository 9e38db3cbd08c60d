"""The two audits of the outer loop (paper §3.3), on any question set.

Structural: π_str + question + rubric -> (u_q, ξ_q, κ_q); never a response or a score.
Near-tie contrastive: L rollouts of the current solver, scored by the current rubric only to locate
near-ties; a rubric-blind preference in both orders; then, for the proposal side, a rubric reveal.

Rollouts are stochastic in the paper; here every call is seeded and cached, so each outer round draws
its own sample indexes (`first_sample`, set from the round number): a new round sees new rollouts even
when the skills have not changed, and a resumed round asks the same requests again and hits the cache.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..aio import gather_all, together
from ..domain import QuestionView, Skill
from ..roles.contrastive_audit import ContrastiveRecord, blind_preference, reveal
from ..roles.structural_audit import StructuralRecord, structural_audit
from .config import Hyper
from .context import EngineContext, Scored
from .pairs import select_near_tie_pairs, select_random_pairs


async def structural_records(
    ctx: EngineContext, questions: list[QuestionView], generator: Skill
) -> list[StructuralRecord]:
    async def one(q: QuestionView) -> StructuralRecord:
        rubric = await ctx.rubric(q, generator)
        return await structural_audit(ctx.lm, ctx.spec_for(q.task), q, rubric,
                                      params=ctx.params(ctx.hyper.max_tokens_audit))

    return await ctx.gather(one, questions)


@dataclass(frozen=True)
class AuditedPair:
    """A pair the blind auditor decided: r+ preferred over r−, with the scored rollouts behind it."""

    question: QuestionView
    plus: Scored
    minus: Scored
    rationale: str


def first_sample(round_idx: int, rollouts: int) -> int:
    """The first rollout sample index of an outer round: rounds draw disjoint index ranges."""
    return round_idx * rollouts


def frozen_set_sample(solver: Skill, generator: Skill, rollouts: int) -> int:
    """The first sample index of V_g's rollouts under `Hyper.reuse_frozen_set`: one range per (solver,
    generator) pair of incumbent versions (Cantor pairing), so a round in which neither skill changed
    asks the same requests as the round that built the set, and the cache answers them."""
    a, b = solver.version, generator.version
    return ((a + b) * (a + b + 1) // 2 + b) * rollouts


def draw_starts(round_idx: int, solver: Skill, generator: Skill, hyper: Hyper) -> tuple[int, int]:
    """The first sample indexes of a round's probe and V_g rollouts: the round's own range, or under the
    reuse options (docs/cost.md) the skill pair's (an unchanged pair is answered from the cache) or, for
    V_g, the solver version's (the same answers, judged again when the generator changed)."""
    own, paired = first_sample(round_idx, hyper.rollouts), frozen_set_sample(solver, generator, hyper.rollouts)
    gate = solver.version * hyper.rollouts if hyper.reuse_gate_answers else paired if hyper.reuse_frozen_set else own
    return (paired if hyper.reuse_probe_draws else own), gate


async def _draw(ctx: EngineContext, q: QuestionView, solver: Skill, generator: Skill,
                samples: range) -> list[Scored]:
    h = ctx.hyper
    rubric, responses = await together(ctx.rubric(q, generator), gather_all(*[
        ctx.respond(q, solver, sample_index=i, temperature=h.rollout_temperature) for i in samples]))
    return list(await gather_all(*[ctx.judge(q, r, rubric) for r in responses]))


async def _rollouts(ctx: EngineContext, q: QuestionView, solver: Skill, generator: Skill,
                    first: int) -> list[Scored]:
    h = ctx.hyper
    # Early stop (an option): the first 2H rollouts can hold H disjoint near-tie pairs; the rest are
    # drawn only when they do not, and pairs are then selected from all L as without the option.
    early = h.rollouts_early_stop and ctx.method.pair_selection == "near_tie"
    n = min(h.rollouts, 2 * h.pairs_per_question) if early else h.rollouts
    scored = await _draw(ctx, q, solver, generator, range(first, first + n))
    if n < h.rollouts and len(select_near_tie_pairs([s.score for s in scored], h.tau_tie,
                                                    h.pairs_per_question)) < h.pairs_per_question:
        scored += await _draw(ctx, q, solver, generator, range(first + n, first + h.rollouts))
    return scored


@dataclass(frozen=True)
class AuditStop:
    """The stop rule of a blind audit (`Hyper.probe_enough_pairs`, `frozen_enough_pairs`): stop once `enough`
    decided pairs are in hand (0: never), taking the questions in chunks from a start set by `rotate`. With
    `more` (the co-evolution budget, engine/coevolution_budget.py) the next chunk is taken only while it says
    so; it reads token counts, never a score."""

    enough: int = 0
    rotate: int = 0
    more: Callable[[], bool] | None = None

    @property
    def chunked(self) -> bool:
        return self.enough > 0 or self.more is not None


@dataclass
class AuditCoverage:
    """What a stopped audit covered, for the round's record: questions audited of those it had."""

    audited: int = 0
    of: int = 0

    @property
    def stopped(self) -> bool:
        return self.audited < self.of


def audit_order(questions: list[QuestionView], stop: AuditStop, per_question: int) -> list[list[QuestionView]]:
    """The chunks a stopping audit takes its questions in: ⌈enough/H⌉ at a time (the fewest that can hold
    `enough` pairs), the order rotated by `stop.rotate` chunks so successive rounds start on other questions.
    Only a budget: one question a chunk. No stop rule: one chunk of every question, in order."""
    if not stop.chunked or not questions:
        return [questions]
    size = max(1, -(-stop.enough // max(1, per_question))) if stop.enough > 0 else 1
    start = (stop.rotate * size) % len(questions)
    ordered = questions[start:] + questions[:start]
    return [ordered[i:i + size] for i in range(0, len(ordered), size)]


async def audited_pairs(ctx: EngineContext, questions: list[QuestionView], solver: Skill, generator: Skill,
                        label: str, first: int = 0, stop: AuditStop | None = None,
                        coverage: AuditCoverage | None = None) -> list[AuditedPair]:
    """Rollouts (sample indexes from `first`) -> pair selection -> stage 1 (blind, both orders).
    Equivalent pairs are dropped. With a stop rule, questions are audited a chunk at a time until `enough`
    decided pairs are found; the count never reads a score (only the blind verdicts)."""
    h = ctx.hyper

    async def one(q: QuestionView) -> list[AuditedPair]:
        scored = await _rollouts(ctx, q, solver, generator, first)
        z = [s.score for s in scored]
        if ctx.method.pair_selection == "near_tie":
            pairs = select_near_tie_pairs(z, h.tau_tie, h.pairs_per_question)
        else:
            pairs = select_random_pairs(len(z), h.pairs_per_question, ctx.rng("pairs", label, q.id))
        out = []
        verdicts = await together(*[  # the H pairs of a question are independent
            blind_preference(ctx.lm, q, scored[i].response.text, scored[j].response.text,
                             rubric=None if ctx.method.rubric_blind else scored[i].rubric,
                             params=ctx.params(h.max_tokens_audit),
                             second_order_if_decisive=h.decision_shortcuts) for i, j in pairs])
        for (i, j), (winner, rationale) in zip(pairs, verdicts, strict=True):
            if winner is None:
                continue
            plus, minus = (scored[i], scored[j]) if winner == 0 else (scored[j], scored[i])
            out.append(AuditedPair(q, plus, minus, rationale))
        return out

    rule = stop or AuditStop()
    found: list[AuditedPair] = []
    audited = 0
    for chunk in audit_order(questions, rule, h.pairs_per_question):
        if audited and rule.more is not None and not rule.more():  # the generator side's allowance is spent
            break
        found += [p for ps in await ctx.gather(one, chunk) for p in ps]
        audited += len(chunk)
        if rule.enough and len(found) >= rule.enough:
            break
    if coverage is not None:
        coverage.audited, coverage.of = audited, len(questions)
    return found


async def contrastive_records(ctx: EngineContext, questions: list[QuestionView], solver: Skill,
                              generator: Skill, label: str, first: int = 0, stop: AuditStop | None = None,
                              coverage: AuditCoverage | None = None) -> list[ContrastiveRecord]:
    """The proposal side on the probe set: audited pairs plus stage 2 (rubric and scores revealed)."""
    pairs = await audited_pairs(ctx, questions, solver, generator, label, first, stop, coverage)

    async def explain(p: AuditedPair) -> ContrastiveRecord:
        rev = await reveal(ctx.lm, p.question, p.plus.response.text, p.minus.response.text, p.rationale,
                           p.plus.rubric, p.plus.judgement, p.minus.judgement,
                           params=ctx.params(ctx.hyper.max_tokens_audit))
        return ContrastiveRecord(question_id=p.question.id, question=p.question.as_text(),
                                 preferred=p.plus.response.text, other=p.minus.response.text,
                                 rationale=p.rationale, missed=rev.why_missed.strip(),
                                 principle=rev.principle.strip())

    return await ctx.gather(explain, pairs)
