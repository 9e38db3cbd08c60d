"""The known-truth world itself: valid replies for every role, read from the prompt; the same world in
process and over HTTP; and a run from it through the command line, evaluated and reported."""

from __future__ import annotations

import json
import re

import pytest
import yaml
from typer.testing import CliRunner

from decoevo.cli import app
from decoevo.domain import Criterion, Judgement, QuestionView, Rubric, Skill
from decoevo.domain import CriterionScore as Score
from decoevo.lm.structured import parse_structured, schema_for
from decoevo.lm.types import BackendRequest, GenParams, Message
from decoevo.roles import contrastive_audit, generate_rubric, judge, rewrite_generator, rewrite_solver, solve
from decoevo.roles import structural_audit as structural
from decoevo.roles.contrastive_audit import ContrastiveRecord
from decoevo.roles.structural_audit import StructuralRecord
from decoevo.testing.server import serve_app
from decoevo.testing.sim_backend import openai_body
from decoevo.testing.truth_world import TruthWorld, WorldParams, render_skill, truth_server
from decoevo.testing.truth_world_run import gold_score, write_world_files

from .result_files import result_file

Q = QuestionView.from_text("q001", "Question 1: what should I do about a rash?")


def ask(world: TruthWorld, messages: list[Message], schema=None, temperature: float = 0.0, index: int = 0):
    request = BackendRequest(
        model="sim",
        messages=tuple(messages),
        json_schema=schema_for(schema) if schema else None,
        params=GenParams(temperature=temperature, max_tokens=2048, seed=0, sample_index=index),
    )
    text = world.reply(openai_body(request)).content
    return parse_structured(text, schema) if schema else text


def rubric_of(world: TruthWorld, tags: list[str]) -> Rubric:
    return Rubric(
        question_id=Q.id,
        generator_version=0,
        criteria=tuple(Criterion(text=f"Addresses {t} ({world.name(t)})", weight=3) for t in tags),
    )


def test_parameters_are_a_frozen_dataclass_and_the_world_is_a_function_of_its_seed():
    with pytest.raises(AttributeError):
        WorldParams().judge_noise = 0.5  # type: ignore[misc]
    a, b, c = TruthWorld(seed=4), TruthWorld(seed=4), TruthWorld(seed=5)
    assert a.requirements == b.requirements != c.requirements
    kinds = [r.kind for r in a.requirements]
    assert kinds == ["base"] * 2 + ["spec"] * 2 + ["contrast"] * 2 + ["hidden"]
    spec = a.spec_text()
    assert all(t in spec for t in a.tags("base") + a.tags("spec"))
    assert not any(t in spec for t in a.tags("contrast") + a.tags("hidden"))


def test_answers_follow_the_strategy_in_the_prompt_and_the_judge_reads_the_rubric():
    world = TruthWorld(WorldParams(solver_slip=0.0, spontaneous=0.0, contrast_spontaneous=0.0, judge_noise=0.0))
    base = world.tags("base")
    skill = Skill(kind="solver", version=1, text=render_skill("Cover these.", base, world.name))
    answer = ask(world, solve.messages(Q, skill))
    assert set(re.findall(r"R\d\d", answer)) == set(base)
    assert world.gold(answer) == sum(world.by_tag[t].weight for t in base) / sum(r.weight for r in world.requirements)
    rubric = rubric_of(world, [base[0], world.tags("spec")[0]])
    out = ask(world, judge.joint_messages(Q, answer, rubric), judge.joint_schema(2))
    assert [v.level for v in out.verdicts] == [4, 0]
    generator = Skill(kind="generator", version=0, text=world.initial_generator_skill())
    criteria = ask(world, generate_rubric.messages(Q, generator), generate_rubric.rubric_schema(8)).criteria
    assert [re.findall(r"R\d\d", c.criterion) for c in criteria][:2] == [[base[0]], [base[1]]]


def test_auditors_read_the_spec_the_rubric_and_the_responses_they_are_shown():
    world = TruthWorld(WorldParams(audit_miss=0.0, audit_noise=0.0, reveal_error=0.0, pref_accuracy=1.0))
    spec_tag, contrast_tag, base = world.tags("spec")[0], world.tags("contrast")[0], world.tags("base")
    out = ask(world, structural.messages(world.spec_text(), Q, rubric_of(world, base)), structural.StructuralOut)
    assert spec_tag in out.repair and out.adequacy == 5  # two of four specification requirements
    out = ask(
        world, structural.messages("A good answer is helpful.", Q, rubric_of(world, base)), structural.StructuralOut
    )
    assert out.adequacy == 10 and not re.findall(r"R\d\d", out.repair)  # nothing in the spec: nothing missing
    plus = f"It addresses {base[0]}. It addresses {contrast_tag}."
    minus = f"It addresses {base[0]}."
    blind = contrastive_audit.PreferenceOut
    assert ask(world, contrastive_audit.stage1_messages(Q, plus, minus), blind).preference == "A"
    assert ask(world, contrastive_audit.stage1_messages(Q, minus, plus), blind).preference == "B"
    rubric = rubric_of(world, [base[0]])
    judged = Judgement(question_id=Q.id, scores=(Score(score=1.0),))
    out = ask(
        world,
        contrastive_audit.stage2_messages(Q, plus, minus, "A covers more", rubric, judged, judged),
        contrastive_audit.RevealOut,
    )
    assert contrast_tag in out.principle
    swapped = ask(
        world,
        contrastive_audit.stage2_messages(Q, minus, plus, "A covers more", rubric, judged, judged),
        contrastive_audit.RevealOut,
    )
    assert contrast_tag not in swapped.principle  # the evidence is the pair as shown


def test_rewriters_change_principles_only_from_the_evidence_in_their_prompt():
    world = TruthWorld(
        WorldParams(
            generator_rewrite_miss=0.0,
            generator_rewrite_drop=0.0,
            generator_rewrite_decoy=0.0,
            solver_rewrite_miss=0.0,
            solver_rewrite_drop=0.0,
            solver_rewrite_decoy=0.0,
        )
    )
    spec_tag, contrast_tag = world.tags("spec")[0], world.tags("contrast")[0]
    generator = Skill(kind="generator", version=0, text=world.initial_generator_skill())
    record = StructuralRecord(
        question_id=Q.id,
        adequacy=0.5,
        rationale=f"no criterion checks {spec_tag}",
        repair=f"Add a criterion for {spec_tag}.",
        question=Q.as_text(),
        rubric="1. x",
    )
    pair = ContrastiveRecord(
        question_id=Q.id,
        preferred=f"It addresses {contrast_tag}.",
        other="Plain.",
        rationale="A covers more",
        principle=f"Rubrics should check {contrast_tag}.",
    )
    out = ask(world, rewrite_generator.messages(generator, [record], [pair]), rewrite_generator.GeneratorSkillOut)
    assert spec_tag in out.skill and contrast_tag in out.skill
    silent = record.model_copy(update={"rationale": "x", "repair": "y"})
    out = ask(world, rewrite_generator.messages(generator, [silent], []), rewrite_generator.GeneratorSkillOut)
    assert out.skill == generator.text  # no finding names a requirement: nothing to add
    solver = Skill(kind="solver", version=0, text="Answer well.")
    rubric = rubric_of(world, [spec_tag])
    failure = rewrite_solver.Failure(Q, "Plain.", rubric, Judgement(question_id=Q.id, scores=(Score(score=0.0),)), 0.0)
    out = ask(world, rewrite_solver.messages(solver, [failure]), rewrite_solver.SkillOut)
    assert spec_tag in out.skill


def test_the_same_world_answers_alike_in_process_and_over_http():
    import urllib.request

    world = TruthWorld(seed=3)
    request = BackendRequest(
        model="sim",
        messages=tuple(solve.messages(Q, Skill(kind="solver", version=0, text="x"))),
        params=GenParams(temperature=0.8, max_tokens=100, seed=1, sample_index=2),
    )
    body = openai_body(request)
    with serve_app(truth_server(world).app()) as url:
        post = urllib.request.Request(
            f"{url}/v1/chat/completions", data=json.dumps(body).encode(), headers={"content-type": "application/json"}
        )
        with urllib.request.urlopen(post, timeout=30) as reply:
            served = json.loads(reply.read())["choices"][0]["message"]["content"]
    assert served == world.reply(body).content


def test_a_run_from_the_world_over_http_is_evaluated_and_reported_like_any_other(tmp_path):
    world = TruthWorld(seed=0)
    files = write_world_files(world, tmp_path / "world", 30)
    config = {
        "method": "decoevo",
        "seed": 0,
        "data": {"path": str(files.questions), "format": "jsonl", "task_spec": str(files.spec)},
        "splits": {"train": 8, "probe": 3, "solver_gate": 4, "generator_gate": 3, "diagnostic": 0, "test": 8},
        "hyper": {"steps": 4, "batch_size": 3, "audit_every": 2, "rollouts": 4},
        "initial_generator_skill": world.initial_generator_skill(),
    }
    (tmp_path / "run.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    runner = CliRunner()
    with serve_app(truth_server(world).app()) as url:
        done = runner.invoke(
            app,
            [
                "run",
                "-c",
                str(tmp_path / "run.yaml"),
                "--base-url",
                f"{url}/v1",
                "--model",
                "sim",
                "--preset",
                "default",
                "--runs-root",
                str(tmp_path / "runs"),
                "--name",
                "tw",
            ],
        )
        assert done.exit_code == 0, done.output
        graded = runner.invoke(app, ["eval", str(tmp_path / "runs" / "tw")])  # the run's own server
        assert graded.exit_code == 0, graded.output
    run_dir = tmp_path / "runs" / "tw"
    record = json.loads(result_file(run_dir).read_text())
    splits = json.loads((run_dir / "splits.json").read_text())
    questions = {q["id"]: QuestionView.from_text(q["id"], q["prompt"]) for q in world.questions(30)}
    final = (run_dir / "final_solver_skill.md").read_text()
    # The gold grader's score is the world's truth about the final skill's answers.
    assert record["score"] == pytest.approx(gold_score(world, final.strip(), [questions[i] for i in splits["test"]]))
    assert json.loads((run_dir / "summary.json").read_text())["generator_accepts"] >= 1
    out = tmp_path / "report.html"
    reported = runner.invoke(app, ["report", str(run_dir), "-o", str(out)])
    assert reported.exit_code == 0, reported.output
    assert "decoevo" in out.read_text()


def test_expected_gold_is_the_mean_gold_of_sampled_answers():
    world = TruthWorld(seed=2)
    text = render_skill("Cover these.", world.tags("base") + world.tags("spec")[:1] + ["D03"], world.name)
    skill = Skill(kind="solver", version=1, text=text)
    golds = [world.gold(ask(world, solve.messages(Q, skill), temperature=0.8, index=k)) for k in range(600)]
    assert sum(golds) / len(golds) == pytest.approx(world.expected_gold(text), abs=0.02)
    recall, decoys = world.generator_truth(text)
    assert decoys == 1 and recall == pytest.approx(
        sum(world.by_tag[t].weight for t in world.tags("base") + world.tags("spec")[:1])
        / sum(r.weight for r in world.requirements)
    )


_RUN_ONE = """
import json, sys, tempfile
from pathlib import Path
from decoevo.testing.truth_world import TruthWorld, WorldParams
from decoevo.testing.truth_world_run import run_in_process, world_config, write_world_files
world = TruthWorld(WorldParams(n_contrast=4, weight_min=3, weight_max=3), seed=4)  # equal weights: ties
with tempfile.TemporaryDirectory() as tmp:
    files = write_world_files(world, Path(tmp) / "w", 30)
    splits = {"train": 8, "probe": 4, "solver_gate": 4, "generator_gate": 4, "test": 0}
    config = world_config(world, files, "decoevo", 4, splits=splits,
                          hyper={"steps": 4, "batch_size": 3, "audit_every": 2, "rollouts": 6})
    result, trace = run_in_process(world, config, Path(tmp) / "run")
    print(json.dumps([result.state.generator.text, result.ledger.total().calls]))
"""


def test_a_run_in_the_world_is_the_same_in_every_process():
    # Python's string hashes differ between processes; the world must not depend on set order (a tie
    # between equally heavy requirements was once broken by it, and runs of one seed differed).
    import os
    import subprocess
    import sys

    outs = set()
    for hash_seed in ("1", "2", "3"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        done = subprocess.run([sys.executable, "-c", _RUN_ONE], env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
        outs.add(done.stdout.strip().splitlines()[-1])
    assert len(outs) == 1
