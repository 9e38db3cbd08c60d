"""`decoevo eval`, `dynamics` and `align` on toy-world runs served over HTTP, and their pure parts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from decoevo.cli import app
from decoevo.domain import Skill
from decoevo.evaluation import Checkpoint, overlap, parse_skill_markdown, timeline
from decoevo.evaluation.alignment import macro
from decoevo.rundir import make_event, skill_markdown
from decoevo.testing.fake_openai import FakeOpenAI, Reply
from decoevo.testing.server import serve_app
from decoevo.testing.toy_server import toy_reply, toy_run_args, toy_server, write_toy_questions

from .result_files import has_result, result_file

pytest.importorskip("uvicorn")
runner = CliRunner()

SPLITS = "splits={train: 5, probe: 2, solver_gate: 3, generator_gate: 3, diagnostic: 1, test: 2}"


# ---- pure parts ------------------------------------------------------------------------------------
def test_skill_files_read_back_exactly() -> None:
    skill = Skill(kind="generator", version=3, parent=1, reason="audit: add safety -- and detail",
                  text="Line one.\n\n- a bullet with <!-- odd --> text\n")
    back = parse_skill_markdown(skill_markdown(skill))
    assert (back.kind, back.version, back.parent) == ("generator", 3, 1)
    assert back.text == skill.text.strip()
    with pytest.raises(ValueError, match="header"):
        parse_skill_markdown("just text")


def test_timeline_replays_versions_per_step() -> None:
    events = [make_event(kind, **data) for kind, data in [
        ("start", {"method": "decoevo", "seed": 0}),
        ("inner_step", {"step": 0, "solver_version": 1, "accepted": True}),
        ("outer_round", {"round": 0, "generator_version": 1}),
        ("inner_step", {"step": 1, "solver_version": 1, "accepted": False}),
        ("inner_step_failed", {"step": 2, "category": "parse"}),
        ("inner_step", {"step": 3, "solver_version": 2, "accepted": True}),
        ("outer_round", {"round": 1, "generator_version": 1}),
    ]]
    assert timeline(events) == [Checkpoint(0, 0, 0), Checkpoint(1, 1, 1), Checkpoint(2, 1, 1), Checkpoint(4, 2, 1)]


def test_overlap_counts_each_side_once() -> None:
    # generated 0 and 1 both state gold 2; generated 3 states gold 0; 4 generated, 5 gold
    o = overlap(5, [{2}, {2}, set(), {0}])
    assert o.precision == pytest.approx(3 / 4)
    assert o.recall == pytest.approx(2 / 5)
    assert o.f1 == pytest.approx(2 * 0.75 * 0.4 / 1.15)
    assert overlap(3, [set(), set()]).f1 == 0.0
    with pytest.raises(ValueError):
        overlap(3, [])
    avg = macro([overlap(1, [{0}]), overlap(2, [set(), set()])])
    assert avg is not None and (avg.precision, avg.recall, avg.f1) == (0.5, 0.5, 0.5)
    assert macro([]) is None


# ---- on the toy world, through the CLI ---------------------------------------------------------------
def _train(url: str, tmp: Path, method: str) -> Path:
    data = write_toy_questions(tmp / "toy.jsonl")
    args = toy_run_args(f"{url}/v1", data, tmp / "runs", method, steps=2, sets=(SPLITS, f"method={method}"))
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    return tmp / "runs" / method


def _paid(path: Path) -> int:
    return sum(1 for line in path.read_text().splitlines() if not json.loads(line)["cached"]) if path.exists() else 0


def test_eval_dynamics_align_on_toy_runs(toy_env: Path) -> None:
    with serve_app(toy_server().app()) as url:
        decoevo, coupled = _train(url, toy_env, "decoevo"), _train(url, toy_env, "sc_coevo")
        training_calls = (decoevo / "calls.jsonl").read_text()
        base = ["--grader-base-url", f"{url}/v1", "--grader-model", "toy"]
        for cmd in (["eval"], ["dynamics"], ["align"]):
            result = runner.invoke(app, [*cmd, str(decoevo), str(coupled), *base])
            assert result.exit_code == 0, result.output
        paid_once = _paid(decoevo / "eval" / "calls.jsonl")
        assert paid_once > 0
        # rerunning pays nothing: every answer comes from the cache; --json prints the record alone on stdout
        again = runner.invoke(app, ["eval", str(decoevo), *base, "--json"])
        assert again.exit_code == 0, again.output
        assert _paid(decoevo / "eval" / "calls.jsonl") == paid_once
        (printed,) = [json.loads(line) for line in again.stdout.splitlines()]

    assert (decoevo / "calls.jsonl").read_text() == training_calls  # the training spend log is untouched
    test = json.loads(result_file(decoevo).read_text())
    assert printed["run_dir"] == str(decoevo) and printed["score"] == test["score"]
    assert printed["n_graded"] == test["n_graded"]
    # the toy solver learns safety advice, which is what the toy gold rubric rewards: 7 of 7 points
    assert test["skill_version"] >= 1 and test["score"] == pytest.approx(100.0)
    assert test["n_graded"] == 2 and test["n_ungraded"] == 0 and len(test["items"]) == 2
    assert all(i["grade"]["items"] and i["response"] for i in test["items"])

    dyn = json.loads((decoevo / "eval" / "dynamics.json").read_text())
    assert [p["step"] for p in dyn["points"]] == [0, 1, 2]
    gold = [p["gold"] for p in dyn["points"]]
    assert gold[0] == pytest.approx(200 / 7) and gold[-1] == pytest.approx(100.0)  # 2 of 7 points, then 7 of 7
    assert all(p["proxy"] is not None for p in dyn["points"])

    # the toy generator rewriter proposes an EASY generator whose rubric only asks for English:
    # DecoEvo rejects it and keeps criteria that match gold ones; SC-CoEvo accepts it and matches nothing
    aligned = json.loads((decoevo / "eval" / "alignment.json").read_text())
    coupled_aligned = json.loads((coupled / "eval" / "alignment.json").read_text())
    assert aligned["precision"] == pytest.approx(1.0) and aligned["recall"] == pytest.approx(2 / 3)
    assert coupled_aligned["generator_version"] >= 1 and coupled_aligned["f1"] == 0.0
    assert aligned["n_questions"] == 2 and aligned["n_failed"] == 0
    assert aligned["matcher_self_graded"] is True  # the toy grader (the matcher too) is the run's own model
    assert test["self_graded"] is True and dyn["self_graded"] is True


def test_transfer_grades_another_file_with_the_final_skill(toy_env: Path) -> None:
    other = toy_env / "other.jsonl"
    with serve_app(toy_server().app()) as url:
        run = _train(url, toy_env, "decoevo")
        write_toy_questions(other, n=3)
        result = runner.invoke(app, ["eval", str(run), "--data", str(other), "--format", "jsonl",
                                     "--grader-base-url", f"{url}/v1", "--grader-model", "toy"])
        assert result.exit_code == 0, result.output
    record = json.loads(result_file(run, "transfer-jsonl").read_text())
    assert record["kind"] == "transfer" and record["n_graded"] == 3 and record["split"] is None


def _broken_grader(body: dict, n: int) -> Reply:
    schema = (body.get("response_format") or {}).get("json_schema", {}).get("schema", {})
    if schema.get("title") == "WeightedVerdict":
        return Reply(content="met: probably")  # never valid, not even after repair
    return toy_reply(body, n)


def test_an_unparseable_grade_is_ungraded_not_zero(toy_env: Path) -> None:
    with serve_app(toy_server().app()) as url, serve_app(FakeOpenAI(_broken_grader).app()) as broken:
        run = _train(url, toy_env, "skillopt")
        result = runner.invoke(app, ["eval", str(run), "--grader-base-url", f"{broken}/v1", "--grader-model", "b"])
        assert result.exit_code == 1 and "nothing could be graded" in " ".join(result.output.split()), result.output
    assert not has_result(run)  # never a score of nothing; the attempt is kept apart
    record = json.loads(result_file(run, failed=True).read_text())
    assert record["score"] is None and record["n_graded"] == 0 and record["n_ungraded"] == 2
    items = record["items"][0]["grade"]["items"]
    assert items and all(i["value"] is None and i["error"] == "parse" for i in items)


def test_eval_errors_name_what_to_fix(toy_env: Path) -> None:
    def said(result: object) -> str:
        return " ".join(result.output.split())  # type: ignore[attr-defined]

    missing = runner.invoke(app, ["eval", str(toy_env / "nowhere")])
    assert missing.exit_code == 2 and "not a decoevo run directory" in said(missing)
    with serve_app(toy_server().app()) as url:
        run = _train(url, toy_env, "skillopt")
    no_format = runner.invoke(app, ["eval", str(run), "--data", "x.jsonl"])
    assert no_format.exit_code == 2 and "--format" in said(no_format)
    empty = runner.invoke(app, ["eval", str(run), "--split", "pilot"])
    assert empty.exit_code == 2 and "pilot split of this run is empty" in said(empty)
    assert "choose a split it has with --split (questions: " in said(empty) and "test (" in said(empty)
    assert "pilot (" not in said(empty)  # only splits that have questions are offered
