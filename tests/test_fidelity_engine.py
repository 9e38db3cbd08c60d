"""Issue 9 on the toy world: fresh evidence per outer round, Direct Audit routing, the records the
generator rewriter reads, invalid candidates never gated or shipped, and one solver version after a
budget stop inside an outer round."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from decoevo.lm import Budget
from decoevo.rundir import RunReader
from decoevo.testing import world
from decoevo.testing.scripted import ScriptedBackend

from .engine_helpers import toy_engine
from .test_validity import ISSUE_9_SKILL


def _title(request) -> str:
    return (request.json_schema or {}).get("title", "")


def _toy(request) -> str:
    return world.respond([m.as_dict() for m in request.messages], request.json_schema, request.params.sample_index)


def _jsonl(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


async def test_consecutive_rounds_with_unchanged_skills_draw_new_rollouts(tmp_path):
    engine, backend = toy_engine(tmp_path, "decoevo", steps=3)
    result = await engine.run_async()
    rounds = [e for e in RunReader(engine.run.path).jsonl("events.jsonl") if e["event"] == "outer_round"]
    assert len(rounds) == 3 and result.state.generator.version == 0
    # the solver was accepted at step 0, before round 0: rounds 0, 1 and 2 audit the same two skills
    assert result.state.solver.version == 1 and result.state.solver_accepts == 1
    probes = [_jsonl(result.run_dir / f"audits/outer_{r:03d}/contrastive_probe.jsonl") for r in range(3)]
    seen = [{(p["preferred"], p["other"]) for p in records} for records in probes]
    assert all(seen) and not (seen[0] & seen[1]) and not (seen[1] & seen[2])
    rollouts = [c.params.sample_index for c in backend.calls if not c.json_schema and c.params.temperature > 0]
    assert set(rollouts) == set(range(3 * 4))  # L = 4 rollouts per round, disjoint indexes per round
    rewrites = [c for c in backend.calls if _title(c) == "GeneratorSkillOut"]
    assert sorted({c.params.sample_index for c in rewrites}) == [0, 1, 2]  # each round its own draw
    # the indexes follow from the round number, so the same run again (or a resumed round) is all cache hits
    again, again_backend = toy_engine(tmp_path, "decoevo", run_name="again", steps=3)
    assert (await again.run_async()).state == result.state and not again_backend.calls


async def test_direct_audit_records_reach_only_the_next_solver_rewrite(tmp_path):
    # K = 2: round 0 runs after step 1; step 2's rewrite reads its records, step 3's must not.
    engine, backend = toy_engine(tmp_path, "direct_audit", steps=4, audit_every=2, max_stalls=5)
    await engine.run_async()
    rewrites = [c.messages[-1].content for c in backend.calls if _title(c) == "SkillOut"]
    assert [("Audit findings" in m) for m in rewrites] == [False, False, True, False]
    routed = rewrites[2]
    assert "Structural record" in routed and "Contrastive record" in routed and "My knee hurts" in routed


async def test_generator_rewriter_reads_question_rubric_and_pair_records(tmp_path):
    engine, backend = toy_engine(tmp_path, "decoevo")
    await engine.run_async()
    prompt = next(c for c in backend.calls if _title(c) == "GeneratorSkillOut").messages[-1].content
    for part in ("My knee hurts after running", "Mentions safety and when to seek care",
                 "Omitted or unclear: the rubric covers safety", "Suggested repair: ask for safety advice",
                 "Extra detail", "judged without the rubric: more detail helps",
                 "What the rubric missed: no criterion on detail", "Principle: reward specific detail"):
        assert part in prompt, part
    record = _jsonl(engine.run.path / "audits/outer_000/contrastive_probe.jsonl")[0]
    assert record["missed"] == "no criterion on detail" and record["principle"] == "reward specific detail"


def _bad_solver_rewrite(request):
    """The solver rewriter returns the issue's broken skill; any answer written under it happens to
    please the judge, so a gate that saw it would accept it."""
    if _title(request) == "SkillOut":
        return json.dumps({"analysis": "rewrote", "skill": ISSUE_9_SKILL + "\n" * 6})
    if not request.json_schema and "content: {" in request.messages[0].content:
        return "For your safety, see a doctor if it gets worse."
    return _toy(request)


async def test_the_issue_9_skill_is_an_invalid_candidate_never_gated_or_shipped(tmp_path):
    engine, backend = toy_engine(tmp_path, "skillopt", backend=ScriptedBackend(_bad_solver_rewrite))
    result = await engine.run_async()
    run = result.run_dir
    assert result.state.solver.version == 0 and result.state.consecutive_rejections == 2
    assert not any("content: {" in c.messages[0].content for c in backend.calls if not c.json_schema)  # never gated
    invalid = [e for e in RunReader(engine.run.path).jsonl("events.jsonl") if e["event"] == "invalid_candidate"]
    assert [e["step"] for e in invalid] == [0, 1] and invalid[0]["problem"] == "fragment"
    assert invalid[0]["skill"] == "solver" and invalid[0]["text"] == ISSUE_9_SKILL
    assert ISSUE_9_SKILL in (run / "candidates/solver_step000_invalid.md").read_text()
    steps = [e for e in RunReader(engine.run.path).jsonl("events.jsonl") if e["event"] == "inner_step"]
    assert all(e["accepted"] is False and e["invalid"] == "fragment" for e in steps)
    assert "content: {" not in (run / "final_solver_skill.md").read_text()
    summary = json.loads((run / "summary.json").read_text())
    assert summary["solver_version"] == 0 and summary["final_solver"].startswith("initial:")


async def test_an_invalid_generator_candidate_is_never_accepted_even_without_verification(tmp_path):
    def script(request):
        if _title(request) == "GeneratorSkillOut":
            return json.dumps({"analysis": "x", "skill": '{\n  "criteria": [\n    {"criterion": '})
        return _toy(request)

    engine, _ = toy_engine(tmp_path, "no_verification", backend=ScriptedBackend(script))
    result = await engine.run_async()
    assert result.state.generator.version == 0 and result.state.generator_accepts == 0
    invalid = [e for e in RunReader(engine.run.path).jsonl("events.jsonl")
               if e["event"] == "invalid_candidate" and e["skill"] == "generator"]
    assert len(invalid) == 2 and all(e["problem"] == "fragment" for e in invalid)
    assert (result.run_dir / "candidates/generator_round000_invalid.md").is_file()
    # each round's own event says its candidate was invalid and why (issue 46.2: a round event without it,
    # read as a round with no candidate, survived the mutation bench)
    rounds = [e for e in RunReader(engine.run.path).jsonl("events.jsonl") if e["event"] == "outer_round"]
    assert len(rounds) == 2 and all(e["accepted"] is False and e["invalid"] == "fragment" and e["reason"]
                                    and e["outcome"] == "invalid" for e in rounds), rounds
    summary = json.loads((result.run_dir / "summary.json").read_text())
    assert summary["final_solver"].startswith("improved:")


def _learner(accept_at: int) -> ScriptedBackend:
    """Solver rewrites before step `accept_at` are useless (the gate rejects them); then it learns safety."""
    rewrites = []

    def script(request):
        if _title(request) == "SkillOut":
            rewrites.append(1)
            if len(rewrites) <= accept_at:
                return json.dumps({"analysis": "tone", "skill": "Be polite and brief in every reply to users."})
        return _toy(request)

    return ScriptedBackend(script)


@pytest.mark.parametrize("step", [0, 1])  # step 0: no checkpoint yet; step 1: one after step 0
async def test_a_budget_stop_inside_an_outer_round_leaves_one_solver_version(tmp_path, step):
    from decoevo.cli import app
    from decoevo.evaluation.run_view import RunView

    reference, _ = toy_engine(tmp_path, "decoevo", backend=_learner(step), run_name="reference")
    paid_at: dict[int, int] = {}

    def watch(event, state):
        if event.event == "inner_step":
            paid_at[event.step] = reference.lm.ledger.total().calls
    reference.observer = watch
    ref = await reference.run_async()
    assert ref.state.solver.version == 1 and ref.state.solver.parent == 0  # accepted at `step`

    # its own cache (a new directory: an empty RequestCache is falsy), so it pays for its calls again
    engine, _ = toy_engine(tmp_path / "own", "decoevo", backend=_learner(step), run_name="stopped")
    engine.lm.budget = Budget(max_calls=paid_at[step] + 3)  # runs out three calls into that step's round
    result = await engine.run_async()
    run = result.run_dir
    stop = next(e for e in RunReader(engine.run.path).jsonl("events.jsonl") if e["event"] == "budget_stop")
    assert stop["dropped_solver_version"] == 1 and stop["solver_version"] == 0
    summary = json.loads((run / "summary.json").read_text())
    final = (run / "final_solver_skill.md").read_text().strip()
    exported = CliRunner().invoke(app, ["export", str(run)]).stdout.strip()
    evaluated = RunView(run).final("solver")
    assert summary["solver_version"] == evaluated.version == 0 and summary["stopped"]
    assert final == exported == evaluated.text.strip()
    assert RunView(run).timeline()[-1].solver_version == 0  # dynamics see no version of the dropped step
    if step == 1:
        checkpoint = json.loads((run / "checkpoint.json").read_text())["state"]["solver"]
        assert checkpoint["version"] == 0 and checkpoint["text"].strip() == final


def _grammar_cut(value, schema, defs):
    """What a grammar-enforcing server does to a string longer than its schema's maxLength: cuts it."""
    if "$ref" in schema:
        schema = defs[schema["$ref"].split("/")[-1]]
    if isinstance(value, str):
        return value[: schema.get("maxLength", len(value))]
    if isinstance(value, list):
        return [_grammar_cut(v, schema.get("items", {}), defs) for v in value]
    if isinstance(value, dict):
        props = schema.get("properties", {})
        return {k: _grammar_cut(v, props.get(k, {}), defs) for k, v in value.items()}
    return value


async def test_a_400_character_criterion_survives_a_grammar_enforcing_server(tmp_path):
    pytest.importorskip("uvicorn")
    from decoevo.domain import Question, Skill
    from decoevo.lm import LM, GenParams, LMConfig, ModelSpec, RequestCache
    from decoevo.roles.generate_rubric import generate_rubric
    from decoevo.testing.fake_openai import FakeOpenAI, Reply
    from decoevo.testing.server import serve_app

    criterion = ("Explains that knee pain after running that comes with swelling, locking, giving way or an "
                 "inability to bear weight needs an in-person examination within days, names which of these "
                 "signs call for urgent care the same day, and tells the runner how to rest, ice and reload the "
                 "joint gradually in the meantime, including how to judge whether pain during a test jog is "
                 "acceptable or a reason to stop early.")
    assert len(criterion) >= 400

    def responder(body, n):
        schema = world.schema_of(body) or {}
        rubric = {"criteria": [{"criterion": criterion, "weight": 5}]}
        return Reply(content=json.dumps(_grammar_cut(rubric, schema, schema.get("$defs", {}))))

    server = FakeOpenAI(responder)
    with serve_app(server.app()) as url:
        spec = ModelSpec(backend="openai", model="capable", base_url=f"{url}/v1", structured_output="json_object")
        lm = LM(LMConfig(models={"default": spec}), cache=RequestCache(tmp_path / "c.sqlite"))
        question = Question.from_text("q1", "My knee hurts after running. What should I do?").view()
        rubric = await generate_rubric(lm, question, Skill(kind="generator", version=0, text="Be specific."),
                                       params=GenParams(max_tokens=1500))
        await lm.aclose()
    assert rubric.criteria[0].text == criterion
    assert "maxLength" not in json.dumps(server.requests[0])
