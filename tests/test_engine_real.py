"""End to end on the real embedded model and real HealthBench questions: DecoEvo with both audits and
an outer round, SkillOpt and SC-CoEvo. Small sizes; one shared request cache, as a sweep would use."""

from __future__ import annotations

import json

import pytest

from decoevo.benchmarks import load_healthbench
from decoevo.engine.config import config_from_dict
from decoevo.engine.run import Engine
from decoevo.lm import LM, LMConfig, RequestCache
from decoevo.presets import PRESETS, bundled_healthbench

from .real_model import requires_model

# slow: ~85 s; the default suite's DecoEvo run on the embedded model is the DecoEvo cell of
# tests/test_sweep_report_real.py, which checks the same outer round (decoevo_on_the_embedded_model)
pytestmark = [pytest.mark.real_model, pytest.mark.slow, requires_model]

SIZES = {"train": 2, "probe": 1, "solver_gate": 1, "generator_gate": 1}
HYPER = {**PRESETS["quick"]["hyper"], "steps": 1, "batch_size": 1, "audit_every": 1, "rollouts": 2,
         "tau_tie": 1.0, "max_criteria": 3, "max_tokens_solve": 96, "max_tokens_audit": 400}


@pytest.fixture(scope="module")
def shared_cache(tmp_path_factory):
    return RequestCache(tmp_path_factory.mktemp("cache") / "requests.sqlite")


def engine(method, tmp_path, cache):
    config = config_from_dict({"method": method, "seed": 1, "splits": SIZES, "hyper": HYPER,
                               "data": {"path": bundled_healthbench(), "format": "healthbench"}})
    return Engine(config, tmp_path / method, lm=LM(LMConfig(), cache=cache),
                  questions=load_healthbench(bundled_healthbench()))


async def test_decoevo_on_the_embedded_model(tmp_path, shared_cache):
    result = await engine("decoevo", tmp_path, shared_cache).run_async()
    run = result.run_dir
    assert result.state.outer_rounds == 1 and result.state.next_step == 1
    structural = [json.loads(x) for x in (run / "audits/outer_000/structural_probe.jsonl").read_text().splitlines()]
    assert len(structural) == 1 and 0.0 <= structural[0]["adequacy"] <= 1.0 and structural[0]["rationale"]
    # Both audits ran: the pairwise auditor was asked (both orders) on the probe rollouts.
    roles = {(k[0]) for k in result.ledger.rows}
    assert {"solve", "generate_rubric", "judge", "rewrite_solver", "structural_audit",
            "contrastive_audit_blind"} <= roles
    events = [json.loads(x) for x in (run / "events.jsonl").read_text().splitlines()]
    outer = [e for e in events if e["event"] in ("outer_round", "outer_round_failed")]
    assert len(outer) == 1
    # Every way the round can end is accounted for (a 135M model may write an unusable or invalid candidate):
    # verified by the audit objectives alone, rejected as invalid before any gate, or voided with a category.
    verification = run / "audits/outer_000/verification.json"
    invalid = [e for e in events if e["event"] == "invalid_candidate" and e["skill"] == "generator"]
    ended = ("verified" if verification.exists() else "invalid" if invalid
             else "voided" if outer[0]["event"] == "outer_round_failed" else "no candidate")
    assert ended in ("verified", "invalid", "voided"), (ended, outer[0])
    if ended == "verified":
        decided = json.loads(verification.read_text())
        assert outer[0]["policy"] == decided["decision"]["policy"] == "pareto"
        assert set(decided["incumbent"]) <= {"structural", "contrastive"}  # audit objectives, never a score
        assert "solver_score" not in outer[0]["deltas"]
    elif ended == "voided":
        assert outer[0]["category"] in ("parse", "refusal", "empty") and result.state.generator.version == 0
    else:
        assert result.state.generator.version == 0 and (run / "candidates").is_dir()


async def test_skillopt_and_sc_coevo_on_the_embedded_model(tmp_path, shared_cache):
    skillopt = await engine("skillopt", tmp_path, shared_cache).run_async()
    assert skillopt.state.generator.version == 0 and skillopt.state.outer_rounds == 0
    assert "structural_audit" not in {k[0] for k in skillopt.ledger.rows}
    sc = await engine("sc_coevo", tmp_path, shared_cache).run_async()
    assert sc.state.outer_rounds == 1
    verification = sc.run_dir / "audits/outer_000/verification.json"
    events = [json.loads(x) for x in (sc.run_dir / "events.jsonl").read_text().splitlines()]
    # SC-CoEvo's verification is the solver's score, or no verification at all: an invalid or voided candidate
    verified = verification.exists() and "J_candidate" in json.loads(verification.read_text())
    unverified = any(e["event"] in ("invalid_candidate", "outer_round_failed") for e in events)
    assert verified != unverified, events
