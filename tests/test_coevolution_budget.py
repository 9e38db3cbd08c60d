"""The co-evolution budget (`hyper.generator_share`, engine/coevolution_budget.py): the generator's side gets a
token allowance that is a share of the solver loop's projected spend; rounds start only while allowance is left
and their blind audits stop when it runs out. It reads token counts only: the generator's acceptance still
never sees the solver's aggregate score."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest

from decoevo.domain import Question
from decoevo.engine.audits import AuditStop, audit_order
from decoevo.engine.coevolution_budget import CoevolutionBudget, Spend
from decoevo.engine.config import Hyper
from tests.engine_helpers import forbid_solver_score, outer_round_events, toy_engine


def test_the_allowance_is_a_share_of_the_solver_loops_spend_projected_to_the_planned_steps():
    budget = CoevolutionBudget(share=0.5, planned_steps=12)
    spend = Spend(total=30_000, generator=0, steps_done=4)  # the loop paid 7,500 a step so far
    assert spend.solver == 30_000
    assert budget.allowance(spend) == pytest.approx(0.5 * 7_500 * 12)
    assert budget.left(spend) == pytest.approx(45_000) and budget.may_start_round(spend)
    # what the generator's side paid is not the loop's: it is taken out of the total before projecting
    spent = Spend(total=75_000, generator=45_000, steps_done=4)
    assert spent.solver == 30_000 and budget.left(spent) == pytest.approx(0)
    assert not budget.may_start_round(spent) and not budget.may_continue(spent)
    # past the planned steps (a topped-up run) the loop's spend so far is the whole of it
    assert CoevolutionBudget(0.5, 2).allowance(Spend(30_000, 0, 4)) == pytest.approx(15_000)
    assert dataclasses.is_dataclass(budget) and budget.__dataclass_params__.frozen  # type: ignore[attr-defined]


def test_no_share_is_no_budget_every_round_runs_in_full():
    off = CoevolutionBudget(0.0, 12)
    assert not off.on and off.allowance(Spend(1, 10**9, 1)) == math.inf
    assert off.may_start_round(Spend(1, 10**9, 1)) and off.may_continue(Spend(1, 10**9, 1))
    assert Hyper().generator_share == 0.0


def test_a_budgeted_audit_takes_one_question_at_a_time_and_asks_before_each_further_chunk():
    qs = [Question.from_text(f"q{i}", f"question {i}?") for i in range(3)]
    chunks = audit_order(qs, AuditStop(more=lambda: True), 2)
    assert [[q.id for q in c] for c in chunks] == [["q0"], ["q1"], ["q2"]]
    with_enough = audit_order(qs, AuditStop(enough=4, more=lambda: True), 2)  # the stop rule's chunk size stays
    assert [[q.id for q in c] for c in with_enough] == [["q0", "q1"], ["q2"]]


async def test_a_small_share_cuts_the_rounds_and_their_audits_and_never_reads_the_solver_score(tmp_path,
                                                                                              monkeypatch):
    forbid_solver_score(monkeypatch)
    shape = {"steps": 6, "audit_every": 1, "max_stalls": 2}
    free, _ = toy_engine(tmp_path / "free", "decoevo", **shape)
    tight, _ = toy_engine(tmp_path / "tight", "decoevo", generator_share=0.01, **shape)
    free_result, tight_result = await free.run_async(), await tight.run_async()
    assert free_result.state.next_step == tight_result.state.next_step == 6  # both runs completed
    # without a budget a round follows every step; with 1 % of the loop's spend only the first round starts
    assert free_result.state.outer_rounds == 6 and tight_result.state.outer_rounds == 1
    (first,) = outer_round_events(tight_result.run_dir)
    # the round says what the generator's side was allowed and has spent: all of it, so no second round started
    assert first["generator_budget"]["spent"] == tight_result.state.generator_tokens
    assert first["generator_budget"]["spent"] > first["generator_budget"]["allowance"] > 0
    assert not any(r.get("generator_budget") for r in outer_round_events(free_result.run_dir))
    assert first["audits_stopped"]["probe"]["audited"] < first["audits_stopped"]["probe"]["of"]
    # what the round paid is the generator side's, and the state keeps it (a resume reads it back)
    assert 0 < tight_result.state.generator_tokens < tight_result.ledger.total().effective_tokens
    assert free_result.state.generator_tokens > tight_result.state.generator_tokens
    checkpoint = json.loads((tight_result.run_dir / "checkpoint.json").read_text())
    assert checkpoint["state"]["generator_tokens"] == tight_result.state.generator_tokens  # what a resume reads
    # verification is sized too: Φ_str (and Γ) rest on V_g's first two questions, not all three, for both generators
    record = json.loads((tight_result.run_dir / "audits/outer_000/verification.json").read_text())
    assert len(record["budget_questions"]) == 2
    assert len(record["incumbent_details"]["structural"]) == len(record["candidate_details"]["structural"]) == 2
    free_record = json.loads((free_result.run_dir / "audits/outer_000/verification.json").read_text())
    assert "budget_questions" not in free_record and len(free_record["incumbent_details"]["structural"]) == 3


def test_the_bench_compares_every_variant_with_paper():
    """bench/cost/lean_schedule.py --variant: each variant gets its own ratio, gain and verdict against paper."""
    from bench.cost.lean_schedule import compare

    cells = []
    for seed in range(3):
        for label, gold, tokens in (("skillopt", 40.0, 100), ("paper", 50.0 + seed, 300), ("lean", 50.0 + seed, 200),
                                    ("cheap", 40.0, 120)):
            cells.append({"world": 1, "seed": seed, "label": label, "gold": gold, "tokens": tokens,
                          "outer_rounds": 1, "generator_accepts": 0})
    out = compare(cells)
    assert out["non_inferior"] is True
    cheap = out["variants"]["cheap"]
    assert cheap["tokens_ratio"]["median"] == 1.2 and cheap["within_target"] == 3
    assert cheap["minus_paper"]["mean"] == -11.0 and cheap["non_inferior"] is False
