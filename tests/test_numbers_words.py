"""Issue 46 part 3: numbers and words that were off. The claims (a tie with SkillOpt against "above every
baseline", claims after a cost-cap stop), the end of a run whose spend log failed mid-run, and the run
estimate's upper bound."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from decoevo.analysis.claims import CONTRADICTED, NOT_ENOUGH, NOT_RUN, TableEvidence, evaluate_claim, load_claims


def _claim(claim_id: str):
    return next(c for c in load_claims() if c.id == claim_id)


# ---- claims ------------------------------------------------------------------------------------------------


def test_every_baseline_claim_tests_each_baseline_it_names_and_a_tie_with_skillopt_contradicts_it():
    """"DecoEvo scores above every baseline (SkillOpt, SC-CoEvo, Zero-shot)" tested SC-CoEvo and Zero-shot only:
    DecoEvo tying SkillOpt on every seed left it supported (fails on the old claims file). An exact tie goes
    against an "above" claim (the tie rule, analysis/claims.py)."""
    claim = _claim("decoevo_above_every_baseline")
    assert {t.b for t in claim.tests} == {"skillopt", "sc_coevo", "zero_shot"}
    tie = {0: 50.0, 1: 52.0, 2: 55.0}
    evidence = TableEvidence({
        ("m", "healthbench", "score", "decoevo"): tie,
        ("m", "healthbench", "score", "skillopt"): tie,
        ("m", "healthbench", "score", "sc_coevo"): {0: 40.0, 1: 41.0, 2: 43.0},
        ("m", "healthbench", "score", "zero_shot"): {0: 30.0, 1: 31.5, 2: 33.0},
    })
    result = evaluate_claim(claim, evidence)
    assert result.verdict == CONTRADICTED, result.reason
    (against,) = result.decisive
    assert against.test.b == "skillopt" and against.mean == 0.0


def test_a_claim_whose_runs_stopped_at_the_cost_cap_says_so_not_not_run():
    """After a cap stop a control that was never started (its paired DecoEvo run stopped at the cap) has no run,
    and Table 1's claims read "not run: the table ... was not run" (fails on the old code). Now they are not
    enough runs, saying the runs stopped at the experiment's cost cap."""
    scores = {("m", "healthbench", "score", "decoevo"): {0: 55.0, 1: 56.0},
              ("m", "healthbench", "score", "skillopt"): {0: 50.0, 1: 50.5}}
    claim = _claim("decoevo_above_every_baseline")
    result = evaluate_claim(claim, TableEvidence(scores, capped_methods=frozenset({"sc_coevo", "zero_shot"})))
    assert result.verdict == NOT_ENOUGH and "stopped at the experiment's cost cap (partial)" in result.reason, result
    assert "sc_coevo" in result.reason
    # a method that simply was not requested still reads "not run"
    assert evaluate_claim(claim, TableEvidence(scores)).verdict == NOT_RUN
    # a capped method with runs but no grades (stopped before its evaluation): partial too, not "no paired runs"
    runs_only = TableEvidence({**scores, ("m", "healthbench", "score", "sc_coevo"): {},
                               ("m", "healthbench", "score", "zero_shot"): {0: 30.0, 1: 31.0}},
                              capped_methods=frozenset({"sc_coevo"}))
    result = evaluate_claim(_claim("sc_coevo_below_skillopt_most"), runs_only)
    assert result.verdict == NOT_ENOUGH and "cost cap" in result.reason, result


def test_the_reports_evidence_knows_which_methods_the_cap_stopped(tmp_path):
    """The report's evidence reads the cap from a run's summary and from the sweep's failed cells (a control
    blocked behind a cap-stopped run has no run directory at all)."""
    from decoevo.report.claim_evidence import RunEvidence
    from decoevo.report.discover import SweepInfo

    sweep = SweepInfo(tmp_path, 1, {"failed": 2}, (
        ("healthbench/sc_coevo-s0", "not run: healthbench/decoevo-s0 (its paired run) stopped at the experiment's "
                                    "cost cap; it runs when the cap is raised"),
        ("healthbench/decoevo-s0", "training stopped at the experiment's cost cap; it continues when the cap is "
                                   "raised"),
        ("healthbench/skillopt-s0", "a model call failed (timeout): ..."),
    ))
    assert RunEvidence([], [sweep]).capped() == {"sc_coevo", "decoevo"}
