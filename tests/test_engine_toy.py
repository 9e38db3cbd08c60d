"""The engine's logic end to end on a deterministic toy world (see decoevo.testing.world)."""

from __future__ import annotations

import asyncio
import json

import pytest

from decoevo.engine import outer as outer_module
from decoevo.methods import METHODS
from decoevo.rundir import RunReader

from .engine_helpers import toy_engine


async def test_decoevo_learns_the_solver_and_writes_a_readable_run(tmp_path):
    engine, _backend = toy_engine(tmp_path, "decoevo")
    result = await engine.run_async()
    run = result.run_dir
    # The solver rewriter's SAFETY skill raises J on V_s, so the gate accepts it at step 0.
    assert result.state.solver.version == 1 and "SAFETY" in result.state.solver.text
    for rel in ("config.yaml", "events.jsonl", "calls.jsonl", "ledger.json", "summary.json", "splits.json",
                "skills/solver/v000.md", "skills/solver/v001.md", "skills/solver/v001.diff",
                "skills/generator/v000.md", "final_solver_skill.md", "audits/outer_000/structural_probe.jsonl",
                "audits/outer_000/contrastive_probe.jsonl", "audits/outer_000/verification.json"):
        assert (run / rel).is_file(), rel
    # The toy rewriter's EASY rubrics regress Φ_str beyond η: eq. 10 rejects them whatever Φ_ctr says, so the
    # decision short cut never draws V_g's frozen near-tie set (docs/cost.md).
    verdict = json.loads((run / "audits/outer_000/verification.json").read_text())
    assert verdict["decision"]["accepted"] is False and "contrastive_not_computed" in verdict
    assert not (run / "audits/outer_000/frozen_pairs.jsonl").exists()
    events = [json.loads(line)["event"] for line in (run / "events.jsonl").read_text().splitlines()]
    assert events[0] == "start" and events[-1] == "finish" and events.count("inner_step") == 2
    assert "+SAFETY first" in (run / "skills/solver/v001.diff").read_text()
    structural = [json.loads(x) for x in (run / "audits/outer_000/structural_probe.jsonl").read_text().splitlines()]
    assert len(structural) == 2 and all(r["adequacy"] == 0.8 for r in structural)
    contrastive = (run / "audits/outer_000/contrastive_probe.jsonl").read_text().splitlines()
    assert contrastive and "detail" in json.loads(contrastive[0])["principle"]
    config = (run / "config.yaml").read_text()
    for name in ("epsilon", "tau_tie", "pairs_per_question", "gamma", "delta", "eta", "rollout_temperature"):
        assert name in config


async def test_score_decoupling_sc_coevo_accepts_an_easier_rubric_decoevo_does_not(tmp_path):
    """The toy generator rewriter proposes EASY rubrics that any answer satisfies. The solver's aggregate
    score rises under them, so the score-coupled rule accepts; the audits see the rubric got worse."""
    sc, _ = toy_engine(tmp_path, "sc_coevo")
    sc_result = await sc.run_async()
    deco, _ = toy_engine(tmp_path, "decoevo")
    deco_result = await deco.run_async()
    assert sc_result.state.generator_accepts >= 1 and "EASY" in sc_result.state.generator.text
    assert deco_result.state.generator_accepts == 0 and deco_result.state.generator.version == 0
    verdict = json.loads((deco_result.run_dir / "audits/outer_000/verification.json").read_text())
    assert verdict["decision"]["accepted"] is False
    assert verdict["candidate"]["structural"] < verdict["incumbent"]["structural"]
    assert "solver_score" not in json.dumps(verdict)


async def test_decoevo_path_never_reaches_the_solver_score(tmp_path, monkeypatch):
    """Make the aggregate solver score explode: DecoEvo (and its ablations with verification) still run."""

    async def forbidden(*args, **kwargs):
        raise AssertionError("the generator acceptance looked at the solver's aggregate score")

    monkeypatch.setattr(outer_module, "solver_score_objective", forbidden)
    for method in ("decoevo", "no_structural", "no_contrastive", "no_rubric_blind", "random_pairs",
                   "no_distillation"):
        engine, _ = toy_engine(tmp_path, method)
        result = await engine.run_async()
        assert result.state.outer_rounds >= 1, method
    engine, _ = toy_engine(tmp_path, "sc_coevo")
    with pytest.raises(AssertionError, match="aggregate score"):
        await engine.run_async()


@pytest.mark.parametrize("method", sorted(METHODS))
async def test_every_method_runs(tmp_path, method):
    hyper = {"budget_step_cap": 2} if method == "budget_matched" else {}
    if method == "budget_matched":  # without a budget the control is refused
        from decoevo.lm.errors import ConfigError

        with pytest.raises(ConfigError, match="needs a budget"):
            toy_engine(tmp_path, method, **hyper)
        reference, _ = toy_engine(tmp_path, "decoevo", run_name="paired")
        await reference.run_async()
        hyper["budget_match"] = str(tmp_path / "paired")
    engine, backend = toy_engine(tmp_path, method, **hyper)
    result = await engine.run_async()
    spec = METHODS[method]
    if not spec.optimize_solver:
        assert result.state.next_step == 0 and not backend.calls
        return
    assert result.state.next_step == engine.total_steps()
    titles = {(c.json_schema or {}).get("title") for c in backend.calls}
    assert ("StructuralOut" in titles) == (spec.structural_audit and spec.runs_audits)
    assert ("PreferenceOut" in titles) == (spec.contrastive_audit and spec.runs_audits)
    assert ("GeneratorSkillOut" in titles) == (spec.evolve_generator and spec.distill)
    if method == "budget_matched":  # it spent (up to) the paired DecoEvo run's calls, in more steps
        paired = json.loads((tmp_path / "paired" / "ledger.json").read_text())["total"]
        assert result.ledger.total().calls <= paired["calls"] and result.state.next_step > 2
    if method == "no_verification":
        assert result.state.generator_accepts >= 1
    if method == "task_prior":
        assert "What this task values" in result.state.generator.text
    if method == "direct_audit":
        solver_rewrites = [c for c in backend.calls if (c.json_schema or {}).get("title") == "SkillOut"]
        assert any("Audit findings" in c.messages[-1].content for c in solver_rewrites)


async def test_budget_cap_stops_cleanly(tmp_path):
    engine, _ = toy_engine(tmp_path, "decoevo")
    engine.config = engine.config.model_copy(update={"budget": engine.config.budget.model_copy(
        update={"max_calls": 25})})
    from decoevo.lm import Budget

    engine.lm.budget = Budget(max_calls=25)
    result = await engine.run_async()
    assert result.state.stopped and "call budget" in result.state.stopped
    assert result.ledger.total().calls <= 25
    assert (result.run_dir / "summary.json").is_file()


async def test_a_budget_stop_leaves_no_call_in_flight_behind_the_run(tmp_path):
    """When one of a step's concurrent calls hits the budget, its siblings' calls already at the server
    finish before the run stops: none is left running past the run's end, where it held a server slot
    (a sweep's endpoint went to 66 requests of 64) and its cost was never recorded."""
    from decoevo.lm import Budget
    from decoevo.testing.scripted import ScriptedBackend
    from decoevo.testing.world import respond

    class Slow(ScriptedBackend):
        in_flight = started = 0

        async def complete(self, request):
            Slow.in_flight += 1
            Slow.started += 1
            try:
                await asyncio.sleep(0.05)  # longer than the run takes to stop
                return await super().complete(request)
            finally:
                Slow.in_flight -= 1

    backend = Slow(lambda r: respond([m.as_dict() for m in r.messages], r.json_schema, r.params.sample_index))
    engine, _ = toy_engine(tmp_path, "decoevo", backend=backend)
    engine.lm.budget = Budget(max_calls=10)  # runs out inside a step's concurrent calls
    result = await engine.run_async()
    assert result.state.stopped and "call budget" in result.state.stopped
    assert Slow.in_flight == 0
    assert [t for t in asyncio.all_tasks() if t is not asyncio.current_task()] == []
    assert result.ledger.total().calls == Slow.started  # every call the server served is recorded


async def test_interrupted_run_resumes_to_the_same_skills_without_repaying(tmp_path):
    from decoevo.lm import RequestCache

    reference, _ = toy_engine(tmp_path, "decoevo", run_name="reference", cache=RequestCache(tmp_path / "ref.sqlite"),
                              steps=3)
    ref = await reference.run_async()

    cache = RequestCache(tmp_path / "shared.sqlite")
    first, first_backend = toy_engine(tmp_path, "decoevo", run_name="killed", cache=cache, steps=3)

    def crash(event, state):
        if event.event == "outer_round" and event.round == 1:
            raise KeyboardInterrupt  # dies in the middle of step 1, after its outer round
    first.observer = crash
    with pytest.raises(KeyboardInterrupt):
        await first.run_async()
    paid_before = {c["key"] for c in RunReader(first.run.path).jsonl("calls.jsonl") if not c["cached"]}

    second, second_backend = toy_engine(tmp_path, "decoevo", run_name="killed", cache=cache, steps=3)
    resumed = await second.run_async(resume=True)
    assert resumed.state.solver == ref.state.solver and resumed.state.generator == ref.state.generator
    calls = RunReader(second.run.path).jsonl("calls.jsonl")
    paid_keys = [c["key"] for c in calls if not c["cached"]]
    assert len(paid_keys) == len(set(paid_keys)), "a paid request was repeated"
    from decoevo.lm.cache import request_key

    repaid = paid_before & {request_key(second_backend.identity, r) for r in second_backend.calls}
    assert not repaid, "the resumed run paid again for requests the killed run had already paid for"
    assert len(first_backend.calls) + len(second_backend.calls) == len(set(paid_keys))
    # the ledger counts every paid call once, those the killed run paid after its last checkpoint included
    # (issue 46.2: a resume dropping them survived the mutation bench; budgets and spend read this ledger)
    assert resumed.ledger.total().calls == len(first_backend.calls) + len(second_backend.calls)
    events = [e["event"] for e in RunReader(second.run.path).jsonl("events.jsonl")]
    assert events.count("inner_step") == 3 and "resume" in events


async def test_an_unusable_judge_output_voids_the_step_and_is_logged(tmp_path):
    """Fail closed: the judge's garbage is never scored; the candidate is not accepted; the run goes on."""
    from decoevo.testing import world
    from decoevo.testing.scripted import ScriptedBackend

    def script(request):
        title = (request.json_schema or {}).get("title", "")
        if title.startswith("JointVerdicts") and "For your safety" in request.messages[-1].content:
            return '{"verdicts": "all perfect"}'  # the judge breaks exactly when scoring the candidate
        return world.respond([m.as_dict() for m in request.messages], request.json_schema,
                             request.params.sample_index)

    engine, _ = toy_engine(tmp_path, "skillopt", backend=ScriptedBackend(script))
    result = await engine.run_async()
    assert result.state.solver.version == 0 and result.state.failed_steps == 2
    failed = [e for e in RunReader(engine.run.path).jsonl("events.jsonl") if e["event"] == "inner_step_failed"]
    assert len(failed) == 2 and failed[0]["category"] == "parse" and failed[0]["role"] == "judge"
    assert result.ledger.total().failures["parse"] >= 2


async def test_per_criterion_judge_mode_gives_the_same_scores(tmp_path):
    joint, _ = toy_engine(tmp_path, "skillopt", run_name="joint")
    per, per_backend = toy_engine(tmp_path, "skillopt", run_name="per", judge_mode="per_criterion")
    a, b = await joint.run_async(), await per.run_async()
    assert a.state.solver == b.state.solver
    titles = [(c.json_schema or {}).get("title") for c in per_backend.calls]
    assert "CriterionVerdict" in titles and not any(str(t).startswith("JointVerdicts") for t in titles)
    steps_a = [e for e in RunReader(joint.run.path).jsonl("events.jsonl") if e["event"] == "inner_step"]
    steps_b = [e for e in RunReader(per.run.path).jsonl("events.jsonl") if e["event"] == "inner_step"]
    assert [e.get("J_candidate") for e in steps_a] == [e.get("J_candidate") for e in steps_b]


async def test_exhausted_retries_stop_the_run_with_a_record(tmp_path):
    from decoevo.lm import InfrastructureError
    from decoevo.testing import world
    from decoevo.testing.scripted import ScriptedBackend

    def script(request):
        if (request.json_schema or {}).get("title") == "SkillOut":
            return InfrastructureError("server gone")
        return world.respond([m.as_dict() for m in request.messages], request.json_schema,
                             request.params.sample_index)

    engine, _ = toy_engine(tmp_path, "skillopt", backend=ScriptedBackend(script))
    with pytest.raises(InfrastructureError):
        await engine.run_async()
    stop = [e for e in RunReader(engine.run.path).jsonl("events.jsonl") if e["event"] == "stopped"]
    assert stop and stop[0]["category"] == "infrastructure" and stop[0]["at_step"] == 0
    ledger = json.loads((engine.run.path / "ledger.json").read_text())
    assert ledger["total"]["failures"]["infrastructure"] == 1
