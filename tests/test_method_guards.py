"""Guards on the method's rules (issue 36, items 7-10): each test fails when the rule it names is broken.

- the blind near-tie audit: both orders decide, and stage 1 never sees a rubric;
- eq. 8: only a margin of at least γ in the blind auditor's direction resolves a pair;
- the controls' token landing rule, as a pure function and where it is wired;
- score decoupling: no generator decision reads the solver's score, on any path (see the decoupling
  tests below).
"""

from __future__ import annotations

import re
from contextvars import ContextVar
from dataclasses import replace
from types import SimpleNamespace
from typing import Any

import pytest

from decoevo.domain import Criterion, Question, Response, Rubric
from decoevo.engine.config import config_from_dict
from decoevo.engine.run import resolve_budget
from decoevo.engine.verify import FrozenPair, contrastive_objective
from decoevo.lm import LM, Budget, BudgetExceeded, GenParams, LMConfig, Message, RequestCache, UsageLedger
from decoevo.lm.budget import refuses_on_tokens
from decoevo.methods import METHODS
from decoevo.roles.contrastive_audit import blind_preference
from decoevo.scoring import contrastive_resolution, pair_margin
from decoevo.testing.scripted import ScriptedBackend

VIEW = Question.from_text("q1", "My knee hurts after running. What should I do?", task="healthbench").view()


# ---- item 7: the blind audit's second order decides ---------------------------------------------------
class _Auditor:
    """A stage-1 auditor answering by position (`fixed`: always that letter) or by content (the response
    containing GOOD), counting its calls."""

    def __init__(self, fixed: str | None = None) -> None:
        self.fixed, self.calls, self.ledger = fixed, 0, None

    async def structured(self, messages, schema, *, role, params):
        self.calls += 1
        if self.fixed is not None:
            letter = self.fixed
        else:
            a = messages[-1].content.split("<response_a>")[1].split("</response_a>")[0]
            letter = "A" if "GOOD" in a else "B"
        return schema(rationale=f"Response {letter} is the better one here", preference=letter)

    def model_for(self, role):
        return "default"


@pytest.mark.parametrize("shortcut", [False, True])
@pytest.mark.parametrize("letter", ["A", "B"])
async def test_a_position_biased_auditor_finds_every_pair_equivalent(shortcut: bool, letter: str) -> None:
    """Always "A" (or always "B") prefers the first response in one order and the other in the second:
    the pair is equivalent. Fails if the second order's answer is ignored (or never asked)."""
    lm = _Auditor(fixed=letter)
    won, _ = await blind_preference(lm, VIEW, "GOOD answer", "weak answer", params=GenParams(),  # type: ignore[arg-type]
                                    second_order_if_decisive=shortcut)
    assert won is None
    assert lm.calls == 2  # a decisive first answer always asks the second order


@pytest.mark.parametrize("shortcut", [False, True])
async def test_an_auditor_consistent_across_orders_decides(shortcut: bool) -> None:
    # the other side of the rule: agreement across orders is a decision, either way round
    for first, second, winner in (("GOOD answer", "weak answer", 0), ("weak answer", "GOOD answer", 1)):
        won, _ = await blind_preference(_Auditor(), VIEW, first, second, params=GenParams(),  # type: ignore[arg-type]
                                        second_order_if_decisive=shortcut)
        assert won == winner


# ---- item 8: eq. 8 resolves a pair only in the auditor's direction -----------------------------------
@pytest.mark.parametrize(("margin", "resolved"), [
    (0.2, 1.0),  # exactly γ: resolved (m ≥ γ)
    (0.2 + 1e-12, 1.0),  # γ up to float error: still resolved
    (0.2 - 1e-6, 0.0),  # just under γ: not
    (0.5, 1.0),
    (0.0, 0.0),
    (-0.2 + 1e-6, 0.0),
    (-0.2, 0.0),  # the rubric prefers r− by γ: the wrong way, not resolved
    (-0.5, 0.0),
    (-1.0, 0.0),
])
def test_eq8_resolves_only_margins_of_at_least_gamma_in_the_auditors_direction(margin: float,
                                                                               resolved: float) -> None:
    assert contrastive_resolution({"q": [margin]}, gamma=0.2) == resolved


def test_eq8_a_wrong_way_pair_counts_as_unresolved_in_the_question_balanced_mean() -> None:
    # q1: one pair resolved, one resolved the wrong way (0.5 of q1); q2: wrong way only (0): mean 0.25.
    # |m| ≥ γ would say 1.0.
    margins = {"q1": [pair_margin(0.9, 0.4), pair_margin(0.4, 0.9)], "q2": [pair_margin(0.1, 0.7)]}
    assert margins == {"q1": [pytest.approx(0.5), pytest.approx(-0.5)], "q2": [pytest.approx(-0.6)]}
    assert contrastive_resolution(margins, gamma=0.2) == pytest.approx(0.25)


def _rubric(qid: str) -> Rubric:
    return Rubric(question_id=qid, generator_version=0, criteria=(Criterion(text="names red flags", weight=1),))


def _scripted_context(scores: dict[str, float], **extra: object) -> SimpleNamespace:
    """An engine context whose judge scores each response by its text (`scores`), γ = 0.2."""

    async def rubric(q, generator):
        return _rubric(q.id)

    async def judge(q, response, rubric):
        return SimpleNamespace(score=scores[response.text])

    async def gather(fn, items):
        return [await fn(i) for i in items]

    return SimpleNamespace(rubric=rubric, judge=judge, gather=gather, hyper=SimpleNamespace(gamma=0.2), **extra)


def response(text: str) -> Response:
    return Response(question_id="q1", skill_version=0, text=text)


async def test_the_signed_resolutions_per_frozen_pair_follow_the_margins_sign() -> None:
    """The per-pair items the paired-bound rule reads: +1 when m ≥ γ, −1 when m ≤ −γ, 0 between."""
    scores = {"p0": 0.9, "m0": 0.7, "p1": 0.7, "m1": 0.9, "p2": 0.8, "m2": 0.75, "p3": 0.75, "m3": 0.8,
              "p4": 0.9, "m4": 0.69, "p5": 0.69, "m5": 0.9}  # margins: γ, −γ, +small, −small, >γ, <−γ


    ctx = _scripted_context(scores)

    frozen = [FrozenPair(VIEW, response(f"p{k}"), response(f"m{k}"), "A") for k in range(6)]
    out = await contrastive_objective(ctx, None, frozen)  # type: ignore[arg-type]
    assert [out.items[f"q1#{k}"] for k in range(6)] == [1.0, -1.0, 0.0, 0.0, 1.0, -1.0]
    assert out.value == pytest.approx(2 / 6)  # eq. 8: the two pairs resolved the right way


@pytest.mark.parametrize("good_first", [True, False])
async def test_an_audited_pair_puts_the_response_the_blind_auditor_preferred_first(good_first: bool) -> None:
    """r+ of an audited pair (the side eq. 7's margin must favour) is the response the blind auditor
    preferred in both orders, whichever rollout it was; swapping them inverts every margin after."""
    from decoevo.engine.audits import audited_pairs
    from decoevo.engine.context import Scored

    texts = ["GOOD answer", "weak answer"] if good_first else ["weak answer", "GOOD answer"]

    async def respond(q, solver, *, sample_index, temperature):
        return Response(question_id=q.id, skill_version=0, text=texts[sample_index])

    async def rubric(q, generator):
        return _rubric(q.id)

    async def judge(q, response, rubric):
        return Scored(q, response, rubric, None, 0.5)  # type: ignore[arg-type]

    async def gather(fn, items):
        return [await fn(i) for i in items]

    hyper = SimpleNamespace(rollouts=2, pairs_per_question=1, tau_tie=0.1, rollouts_early_stop=False,
                            rollout_temperature=1.0, max_tokens_audit=64, decision_shortcuts=False)
    ctx = SimpleNamespace(hyper=hyper, method=SimpleNamespace(pair_selection="near_tie", rubric_blind=True),
                          lm=_Auditor(), params=lambda n: GenParams(max_tokens=n), rubric=rubric,
                          respond=respond, judge=judge, gather=gather)
    [pair] = await audited_pairs(ctx, [VIEW], None, None, "probe")  # type: ignore[arg-type]
    assert pair.plus.response.text == "GOOD answer" and pair.minus.response.text == "weak answer"


@pytest.mark.parametrize(("first_two", "drawn"), [((0.5, 0.5), 2), ((0.1, 0.9), 6)])
async def test_early_stop_draws_the_rest_only_when_the_first_rollouts_lack_the_pairs(
        first_two: tuple[float, float], drawn: int) -> None:
    """`rollouts_early_stop`: the first 2H rollouts are drawn; the other L − 2H only when those hold fewer
    than H near-tie pairs (a tie among the first two here: done; no tie: all six drawn)."""
    from decoevo.engine.audits import _rollouts
    from decoevo.engine.context import Scored

    asked: list[int] = []
    scores = [*first_two, 0.3, 0.3, 0.7, 0.7]

    async def respond(q, solver, *, sample_index, temperature):
        asked.append(sample_index)
        return Response(question_id=q.id, skill_version=0, text=str(sample_index))

    async def rubric(q, generator):
        return _rubric(q.id)

    async def judge(q, response, rubric):
        return Scored(q, response, rubric, None, scores[int(response.text)])  # type: ignore[arg-type]

    hyper = SimpleNamespace(rollouts=6, pairs_per_question=1, tau_tie=0.1, rollouts_early_stop=True,
                            rollout_temperature=1.0)
    ctx = SimpleNamespace(hyper=hyper, method=SimpleNamespace(pair_selection="near_tie"), rubric=rubric,
                          respond=respond, judge=judge)
    scored = await _rollouts(ctx, VIEW, None, None, 0)  # type: ignore[arg-type]
    assert sorted(asked) == list(range(drawn)) and len(scored) == drawn


async def test_audit_objectives_carry_both_objectives_their_items_and_records(monkeypatch) -> None:
    """What verification hands the acceptance policy and the verification file: Φ_ctr judged on the
    frozen pairs given, Φ_str with its per-question items (the paired-bound rule reads them) and each
    objective's records; a frozen pair's record names its question and keeps both responses verbatim."""
    import json

    import decoevo.engine.verify as verify
    from decoevo.engine.verify import Objective, audit_objectives

    scores = {"p0": 0.9, "m0": 0.6, "p1": 0.8, "m1": 0.7}


    structural = Objective(0.75, {"q1": 0.5, "q2": 1.0}, [{"question_id": "q1"}, {"question_id": "q2"}])

    async def structural_objective(ctx, questions, generator):
        return structural

    monkeypatch.setattr(verify, "structural_objective", structural_objective)
    ctx = _scripted_context(scores, method=SimpleNamespace(structural_audit=True, contrastive_audit=True))


    frozen = [FrozenPair(VIEW, response(f"p{k}"), response(f"m{k}"), f"why {k}") for k in range(2)]
    got, details = await audit_objectives(ctx, [VIEW], None, frozen)  # type: ignore[arg-type]
    assert got.contrastive == pytest.approx(0.5)  # margins 0.3 ≥ γ and 0.1 < γ
    assert dict(got.contrastive_items) == {"q1#0": 1.0, "q1#1": 0.0}
    assert got.structural == 0.75 and dict(got.structural_items) == {"q1": 0.5, "q2": 1.0}
    assert details["structural"] == structural.details and details["margins"] == {"q1": [pytest.approx(0.3),
                                                                                      pytest.approx(0.1)]}
    record = json.loads(json.dumps(frozen[0].to_json()))
    assert record == {"question_id": "q1", "preferred": "p0", "other": "m0", "rationale": "why 0"}


# ---- item 10: the controls' token landing rule -------------------------------------------------------
@pytest.mark.parametrize(("used", "next_tokens", "refused"), [
    (9_000, 1_000, False),  # ends at 10,000: on the target
    (9_000, 1_999, False),  # ends 999 over rather than 1,000 under: nearer, taken
    (9_000, 2_000, True),  # as far either way: refused
    (9_000, 2_001, True),  # farther with the call: refused
    (9_000, 4_500, True),
    (9_999, 1, False),
    (9_999, 2, True),
    (10_000, 0, True),  # at the target: nothing more
    (10_500, 0, True),
    (0, 19_999, False),
    (0, 20_000, True),
])
def test_a_landing_target_refuses_exactly_the_calls_that_end_the_run_farther_from_it(
        used: int, next_tokens: int, refused: bool) -> None:
    assert refuses_on_tokens(used, 10_000, next_tokens, land=True) is refused
    # the rule is the distance comparison itself
    assert refused == (abs(10_000 - (used + next_tokens)) >= abs(10_000 - used))


@pytest.mark.parametrize(("used", "refused"), [(0, False), (9_999, False), (10_000, True), (12_000, True)])
def test_a_token_cap_refuses_only_once_reached_whatever_the_next_call(used: int, refused: bool) -> None:
    assert refuses_on_tokens(used, 10_000, 50_000, land=False) is refused


def test_a_control_matched_to_a_run_lands_on_its_tokens_and_an_explicit_cap_does_not(tmp_path) -> None:
    paired = tmp_path / "paired"
    paired.mkdir()
    ledger = UsageLedger()
    ledger.record_call("judge", "m", 9_000, 1_000, 0.0)
    (paired / "ledger.json").write_text(ledger.to_json(), encoding="utf-8")

    def budget(**b: Any) -> Budget:
        config = config_from_dict({"method": "sc_coevo", "data": {"path": "unused.jsonl"}, "budget": b})
        return resolve_budget(config, METHODS[config.method])

    matched = budget(match_run=str(paired), match_on="tokens")
    assert matched.max_tokens == 10_000 and matched.land_on_tokens
    assert not budget(match_run=str(paired), max_tokens=5_000).land_on_tokens  # an explicit cap is a cap
    assert not budget(max_tokens=5_000).land_on_tokens


async def test_the_client_refuses_a_call_that_would_land_farther_and_a_cap_admits_it(tmp_path) -> None:
    """Wiring: the client hands the budget the call's expected tokens (its prompt, and the completion its
    role has averaged). 200 tokens used of 260: a 200-token call would end 140 over rather than 60 under."""
    def lm_with(budget: Budget) -> tuple[LM, ScriptedBackend]:
        backend = ScriptedBackend(lambda r: "x" * 400)  # 100 completion tokens
        cache = RequestCache(tmp_path / f"cache-{budget.land_on_tokens}.sqlite")
        return LM(LMConfig(), backends={"default": backend}, cache=cache, budget=budget), backend

    for land in (True, False):
        lm, backend = lm_with(Budget(max_tokens=260, land_on_tokens=land))
        await lm.complete([Message("user", "a" * 400)], role="judge", params=GenParams(max_tokens=200))
        assert lm.ledger.total().effective_tokens == 200
        big = lm.complete([Message("user", "b" * 400)], role="judge", params=GenParams(max_tokens=200))
        if land:
            with pytest.raises(BudgetExceeded, match="land further"):
                await big
            # a small call (10 prompt + at most 10 completion tokens) still lands nearer: taken
            await lm.complete([Message("user", "c" * 40)], role="judge", params=GenParams(max_tokens=10))
            assert len(backend.calls) == 2
        else:
            await big  # a cap admits any call while under it
            assert len(backend.calls) == 2


def test_stage1_rubric_free_shape() -> None:
    # the stage-1 user message the blind checks below rely on: three data blocks and nothing else
    from decoevo.roles.contrastive_audit import stage1_messages

    user = stage1_messages(VIEW, "first", "second")[-1].content
    assert STAGE1_SHAPE.fullmatch(user)
    assert not STAGE1_SHAPE.fullmatch(stage1_messages(VIEW, "first", "second", _rubric("q1"))[-1].content)


STAGE1_SHAPE = re.compile(r"<question>\n.*?\n</question>\n\n<response_a>\n.*?\n</response_a>\n\n"
                          r"<response_b>\n.*?\n</response_b>", re.DOTALL)


# ---- item 7: the blind auditor never sees a rubric, on the messages actually sent ---------------------
BLIND_METHODS = sorted(name for name, m in METHODS.items() if m.contrastive_audit and m.runs_audits and m.rubric_blind)


@pytest.mark.parametrize("method", [*BLIND_METHODS, "no_rubric_blind"])
async def test_the_blind_auditor_is_sent_no_rubric(tmp_path, method: str, monkeypatch) -> None:
    """Every stage-1 request of a run: our system prompt, then the question and the two responses and
    nothing else; no criterion of any rubric the run generated appears in it. The no-rubric-blind ablation
    is the check's own control: its stage-1 requests carry the rubric."""
    from decoevo.engine import context as context_module
    from decoevo.roles.contrastive_audit import STAGE1_SYSTEM

    from .engine_helpers import toy_engine

    criteria: set[str] = set()
    real = context_module.generate_rubric

    async def recording(*args, **kwargs):
        rubric = await real(*args, **kwargs)
        criteria.update(c.text for c in rubric.criteria)
        return rubric

    monkeypatch.setattr(context_module, "generate_rubric", recording)
    engine, backend = toy_engine(tmp_path, method, decision_shortcuts=False)
    await engine.run_async()
    stage1 = [c for c in backend.calls if (c.json_schema or {}).get("title") == "PreferenceOut"]
    assert stage1 and criteria
    leaks = [c for c in stage1 if not STAGE1_SHAPE.fullmatch(c.messages[-1].content)
             or any(text in m.content for m in c.messages for text in criteria)]
    if method == "no_rubric_blind":
        assert len(leaks) == len(stage1)
        return
    assert not leaks, leaks[0].messages[-1].content
    assert all([m.role for m in c.messages] == ["system", "user"] and c.messages[0].content == STAGE1_SYSTEM
               for c in stage1)


# ---- item 9: no generator decision reads the solver's score, on any path -----------------------------
# Every solver score the outer loop could reach is replaced, while an outer round runs, by a value that
# ranks the candidate generator above the incumbent (sign +1) or below it (sign −1): the per-question
# scores and J through the context (`per_question_scores`, `evaluate`, so `solver_score_objective` too),
# the solver gate's J and batch scores in the events, and the per-criterion scores in gates/*.json. A
# generator proposal or decision that read any of them would differ between the two poisonings.
_OUTER_ROUND: ContextVar[int | None] = ContextVar("outer_round_incumbent", default=None)


def _poison(generator_version: int, sign: int) -> float:
    incumbent = _OUTER_ROUND.get()
    candidate = incumbent is not None and generator_version > incumbent
    return 1.0 if candidate == (sign > 0) else 0.0


def _sim_config(method: str, seed: int, shortcuts: bool, data) -> Any:
    return config_from_dict({
        "method": method, "seed": seed, "data": {"path": str(data), "format": "jsonl"},
        "splits": {"train": 8, "probe": 3, "solver_gate": 3, "generator_gate": 3},
        "hyper": {"steps": 4, "batch_size": 2, "audit_every": 2, "rollouts": 5, "pairs_per_question": 2,
                  "tau_tie": 0.3, "decision_shortcuts": shortcuts}})


def _generator_decisions(tmp_path, method: str, shortcuts: bool, sign: int, seed: int = 0) -> dict[str, list[tuple]]:
    """One simulated run; every outer round's proposal (the rewriter's request and its candidate) and
    decision. `sign` 0: nothing poisoned."""
    from decoevo.engine import context as context_module
    from decoevo.engine import inner as inner_module
    from decoevo.engine import run as run_module
    from decoevo.lm import RequestCache
    from decoevo.testing.sim_backend import SimBackend, run_virtual
    from decoevo.testing.sim_model import LatencyModel
    from decoevo.testing.toy_server import write_toy_questions

    rounds: list[tuple] = []
    proposals: list[tuple] = []

    real_complete = LM.complete

    async def complete(self, messages, **kwargs):  # the generator rewriter's request, answered or cached
        messages = list(messages)
        if kwargs.get("role") == "rewrite_generator":
            proposals.append(tuple(m.content for m in messages))
        return await real_complete(self, messages, **kwargs)

    real_outer, real_scores = run_module.outer_step, context_module.EngineContext.per_question_scores
    real_evaluate, real_after_inner = context_module.EngineContext.evaluate, run_module.Engine._after_inner
    real_gate_record = inner_module.gate_record

    async def outer_step(ctx, round_idx, solver, generator, *args, **kwargs):
        token = _OUTER_ROUND.set(generator.version)
        try:
            out = await real_outer(ctx, round_idx, solver, generator, *args, **kwargs)
        finally:
            _OUTER_ROUND.reset(token)
        d = out.decision
        rounds.append((out.round, out.candidate.text if out.candidate else None, out.validity.valid,
                       None if d is None else (d.accepted, d.policy, d.reason, sorted(d.deltas.items()))))
        return out

    async def per_question_scores(self, questions, solver, generator):
        scores = await real_scores(self, questions, solver, generator)
        return scores if _OUTER_ROUND.get() is None else {q: _poison(generator.version, sign) for q in scores}

    async def evaluate(self, question, solver, generator):
        scored = await real_evaluate(self, question, solver, generator)
        return scored if _OUTER_ROUND.get() is None else replace(scored, score=_poison(generator.version, sign))

    def after_inner(self, state, inner):  # the events the outer loop could read back
        d = inner.decision
        poisoned = replace(inner, batch_scores={q: 0.5 + 0.4 * sign for q in inner.batch_scores},
                           decision=None if d is None else replace(d, incumbent=0.5 - 0.4 * sign,
                                                                   candidate=0.5 + 0.4 * sign))
        return real_after_inner(self, state, poisoned)

    def gate_record(step, accepted, incumbent, candidate):
        record = real_gate_record(step, accepted, incumbent, candidate)
        for q in record["questions"]:  # type: ignore[union-attr]
            q["incumbent"] = [0.5 - 0.4 * sign] * len(q["incumbent"])
            q["candidate"] = [0.5 + 0.4 * sign] * len(q["candidate"])
        return record

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(run_module, "outer_step", outer_step)
        mp.setattr(LM, "complete", complete)
        if sign:
            mp.setattr(context_module.EngineContext, "per_question_scores", per_question_scores)
            mp.setattr(context_module.EngineContext, "evaluate", evaluate)
            mp.setattr(run_module.Engine, "_after_inner", after_inner)
            mp.setattr(inner_module, "gate_record", gate_record)
        root = tmp_path / f"{method}-{shortcuts}"  # the three runs share their requests' answers
        root.mkdir(parents=True, exist_ok=True)
        data = write_toy_questions(root / "q.jsonl", 40)
        cache = RequestCache(root / "cache.sqlite")
        lm = LM(LMConfig(), backends={"default": SimBackend(0, LatencyModel.fixed(1.0), 16)}, cache=cache)
        run_virtual(run_module.Engine(_sim_config(method, seed, shortcuts, data), root / f"run{sign}", lm=lm)
                    .run_async())
        cache.close()
    return {"rounds": rounds, "proposals": proposals}


# The default path with and without the decision short cuts (with them, round 0 is decided by eq. 10 on
# both objectives and accepted, round 1 settled by the structural objective alone and rejected; without,
# both on both objectives); the ablations, no-verification's path among them, in the slow run.
DECOUPLED = [("decoevo", True), ("decoevo", False),
             *[pytest.param(m, True, marks=pytest.mark.slow) for m in ("no_verification", "no_structural",
                                                                       "no_contrastive",
                                                                       "no_rubric_blind", "random_pairs",
                                                                       "no_distillation")]]


@pytest.mark.parametrize(("method", "shortcuts"), DECOUPLED)
def test_no_generator_decision_reads_a_solver_score_on_any_path(tmp_path, method: str, shortcuts: bool) -> None:
    """Every outer round's proposal (the generator rewriter's request and its candidate) and decision
    (accepted, reason, deltas) is the same under both poisonings."""
    up = _generator_decisions(tmp_path, method, shortcuts, +1)
    assert any(r[3] is not None for r in up["rounds"]), "no candidate was verified: the test would test nothing"
    assert _generator_decisions(tmp_path, method, shortcuts, -1) == up


def test_the_poisoned_scores_reach_a_generator_that_reads_them(tmp_path) -> None:
    """The check's own control: SC-CoEvo accepts by J, so its decisions follow the poisoning."""
    def accepted(run: dict[str, list[tuple]]) -> list[bool]:
        return [r[3][0] for r in run["rounds"] if r[3] is not None]

    assert all(accepted(_generator_decisions(tmp_path, "sc_coevo", True, +1)) or [False])
    assert not any(accepted(_generator_decisions(tmp_path, "sc_coevo", True, -1)) or [True])


def test_what_a_score_decoupled_acceptance_can_receive() -> None:
    """Structurally: every score-decoupled policy decides on two AuditObjectives, whose fields are the two
    audit objectives and their per-item values; the objectives are computed from a generator, questions
    and a frozen set, never a solver skill; only SC-CoEvo verifies by the solver's score."""
    import dataclasses
    import inspect
    import typing

    from decoevo import policies
    from decoevo.engine import verify
    from decoevo.engine.config import Hyper

    assert [f.name for f in dataclasses.fields(policies.AuditObjectives)] == [
        "structural", "contrastive", "structural_items", "contrastive_items"]
    scored = {n for n, m in METHODS.items() if isinstance(m.acceptance, policies.VerifyBySolverScore)}
    assert scored == {"sc_coevo"}
    for name, m in METHODS.items():
        if name in scored:
            continue
        policy = m.acceptance.policy(Hyper())
        hints = typing.get_type_hints(type(policy).decide)
        assert hints["incumbent"] is hints["candidate"] is policies.AuditObjectives, name
        assert isinstance(policy, policies.GeneratorAcceptance)
    for hyper in (Hyper(), Hyper(generator_gate="paired_bound")):
        hints = typing.get_type_hints(type(policies.VerifyByAudits().policy(hyper)).decide)
        assert set(hints) - {"return"} == {"incumbent", "candidate"}
        assert hints["incumbent"] is policies.AuditObjectives
    for fn in (verify.audit_objectives, verify.structural_objective, verify.contrastive_objective,
               verify.objectives, verify.decided_by_structural):
        assert "solver" not in inspect.signature(fn).parameters, fn.__name__


# ---- survivors of the mutation bench (docs/reliability.md § Mutation bench) --------------------------
def test_a_cost_budget_refuses_the_next_call_once_spend_reaches_it_exactly() -> None:
    from decoevo.lm.budget import in_flight

    ledger = UsageLedger()
    ledger.record_call("judge", "m", 100, 100, 0.0, cost_usd=0.25)
    Budget(max_cost=0.26).check(ledger)  # under: taken
    with pytest.raises(BudgetExceeded, match="cost budget reached"):
        Budget(max_cost=0.25).check(ledger)  # reached exactly: refused (≥, not >)
    # calls paying now are expected to cost what a call has averaged: 2 paying on 1 answered, $0.25 each
    pending = in_flight(2, ledger)
    assert (pending.calls, pending.tokens, pending.cost_usd) == (2, 400, pytest.approx(0.5))
    with pytest.raises(BudgetExceeded, match="cost budget reached"):
        Budget(max_cost=0.7).check(ledger, pending)  # 0.25 + 0.5 in flight ≥ 0.7
