"""A guard that cannot tell good from bad says so (issue 45, part 4): a run whose judge gives every criterion
of every answer the same level is measured as not discriminating, and `rubric`, `export` and the report
warn; a run whose judge discriminates (the toy world's) gets no warning. Reading writes nothing."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from decoevo.analysis.discrimination import (
    MIN_JUDGEMENTS,
    copied_criteria,
    discrimination_of,
    discrimination_warnings,
    gate_answers,
    judged_answers,
    run_discrimination,
)
from decoevo.cli import app
from decoevo.report import build_report
from decoevo.report.render import page
from decoevo.rundir import TranscriptEntry
from decoevo.testing.flat_judge import flat_judge_server
from decoevo.testing.server import serve_app
from decoevo.testing.toy_server import toy_run_args, toy_server, write_toy_questions


def _judge(reply: object, user: str = "q") -> TranscriptEntry:
    return TranscriptEntry(key=hashlib.sha256(json.dumps([reply, user]).encode()).hexdigest(), role="judge",
                           model="m", messages=[{"role": "user", "content": user}], reply=json.dumps(reply))


def _joint(*levels: int) -> dict[str, object]:
    return {"verdicts": [{"rationale": "r", "level": x} for x in levels]}


# ---- the pure measure ----------------------------------------------------------------------------

def test_a_judge_giving_one_level_everywhere_is_constant_and_warned() -> None:
    answers, unreadable = judged_answers([_judge(_joint(2, 2, 2), f"answer {i}") for i in range(6)])
    d = discrimination_of(answers, "transcripts", unreadable)
    assert (d.verdict, d.discriminates, d.judgements, d.scores, d.answer_scores) == ("constant", False, 6, 18, 1)
    assert d.warning is not None and "same score (level 2 of 0-4)" in d.warning and "6 answers" in d.warning


def test_a_judge_that_separates_answers_is_not_warned() -> None:
    answers, _ = judged_answers([_judge(_joint(4, 2), "a"), _judge(_joint(0, 2), "b"), _judge(_joint(4, 4), "c"),
                                 _judge(_joint(0, 0), "d")])
    d = discrimination_of(answers, "transcripts")
    assert d.verdict == "discriminates" and d.discriminates is True and d.warning is None
    assert d.answer_scores == 4


def test_nearly_constant_is_warned_and_too_few_says_nothing() -> None:
    nearly = [(0.5, 0.5, 0.5, 0.5)] * 9 + [(0.5, 0.5, 0.5, 1.0)]  # 39 of 40 scores at one level
    d = discrimination_of(nearly, "transcripts")
    assert d.verdict == "nearly constant" and d.warning is not None and "98% of 40" in d.warning
    few = discrimination_of([(0.5,)] * (MIN_JUDGEMENTS - 1), "transcripts")
    assert few.verdict == "too few" and few.discriminates is None and few.warning is None


def test_one_pattern_for_every_answer_is_warned_though_its_levels_vary() -> None:
    # SmolLM2-135M's judge answered 3, 2, 1 down the rubric for each answer it was shown
    answers, _ = judged_answers([_judge(_joint(3, 2, 1), f"answer {i}") for i in range(5)])
    d = discrimination_of(answers, "transcripts")
    assert d.verdict == "answers alike" and d.answer_scores == 1 and len(d.level_counts) == 3
    assert d.warning is not None and "the same score (0.50 of 1, its criteria's mean) to 100% of the 5" in d.warning


def test_rubrics_that_only_repeat_their_question_are_warned() -> None:
    def rubric(question: str, *criteria: str) -> TranscriptEntry:
        return TranscriptEntry(key=question, role="generate_rubric", model="m", messages=[
            {"role": "system", "content": "Principles: be specific about safety and doses"},
            {"role": "user", "content": f"<question>\n  {question}\n</question>\n\nWrite the rubric."}],
            reply=json.dumps({"criteria": [{"criterion": c, "weight": 3} for c in criteria]}))

    # what SmolLM2-135M's generator wrote: the question's own words
    echo = [rubric("I have postpartum depression, what now?", "postpartum depression", "Postpartum depression!"),
            rubric("My elderly aunt is shaking and stumbling", "elderly", "shaking", "stumbling")]
    assert copied_criteria(echo) == (5, 5)
    d = discrimination_of([(0.0, 1.0)] * 4 + [(1.0, 1.0)] * 4, "transcripts", 0, copied_criteria(echo))
    assert d.warning is None and d.rubric_warning is not None and "5 of the 5 criteria" in d.rubric_warning
    assert d.warnings == [d.rubric_warning]
    # criteria that ask for something the question does not say are no echo
    real = [rubric("My knee hurts after running. What should I do?", "Mentions safety and when to seek care",
                   "Gives a direct answer", "Says what to do about the knee"),
            rubric("Is ibuprofen safe?", "States the maximum safe daily dose", "ibuprofen")]
    assert copied_criteria(real) == (5, 1)
    varied = [(0.0, 1.0), (1.0, 1.0), (0.0, 0.0), (0.5, 1.0)]
    assert discrimination_of(varied, "transcripts", 0, copied_criteria(real)).warnings == []


def test_per_criterion_replies_group_by_answer_and_bad_replies_are_counted() -> None:
    entries = [_judge({"rationale": "r", "level": lvl}, f"<response>{ans}</response>\nCriterion: {c}")
               for ans, levels in (("A", (4, 0)), ("B", (2, 2))) for c, lvl in zip("xy", levels, strict=True)]
    entries += [_judge("not json at all"), _judge({"verdicts": [{"level": 9}]}),
                TranscriptEntry(key="k", role="grader_healthbench", model="m", reply=json.dumps(_joint(1)))]
    answers, unreadable = judged_answers(entries)
    assert sorted(answers) == [(0.5, 0.5), (1.0, 0.0)] and unreadable == 2  # the gold grader is not the judge


def test_gate_records_are_read_when_there_are_no_transcripts() -> None:
    records = [{"step": 0, "accepted": False, "questions": [
        {"id": "q1", "criteria": ["a", "b"], "incumbent": [0.5, 0.5], "candidate": [0.5, 0.5]},
        {"id": "q2", "criteria": ["a"], "incumbent": [0.5], "candidate": ["bad"]}]}]
    assert gate_answers(records) == [(0.5, 0.5), (0.5, 0.5), (0.5,)]


# ---- on runs: the flat judge and the toy world's --------------------------------------------------

def _digest(run: Path) -> dict[str, str]:
    return {str(p.relative_to(run)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(run.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("flat", [True, False], ids=["flat-judge", "toy-judge"])
def test_rubric_export_and_report_warn_only_for_a_judge_that_cannot_discriminate(
        flat: bool, toy_env: Path) -> None:
    runner = CliRunner()
    data = write_toy_questions(toy_env / "toy.jsonl")
    server = flat_judge_server() if flat else toy_server()
    with serve_app(server.app()) as url:
        done = runner.invoke(app, toy_run_args(f"{url}/v1", data, toy_env / "runs", "mine", steps=2))
        assert done.exit_code == 0, done.output
        run = toy_env / "runs" / "mine"
        before = _digest(run)
        measured = run_discrimination(run)
        rubric = runner.invoke(app, ["rubric", str(run), "--data", str(data), "-o", str(toy_env / "rubrics.jsonl")])
        exported = runner.invoke(app, ["export", str(run), "-o", str(toy_env / "skill.md")])
        html = page(build_report([run]))
    assert rubric.exit_code == 0 and exported.exit_code == 0, (rubric.output, exported.output)
    assert _digest(run) == before  # rubric, export, report and the measure only read the run
    assert measured.source == "transcripts" and measured.judgements >= MIN_JUDGEMENTS
    said = "cannot tell a better answer from a worse one"
    if flat:
        assert measured.verdict == "constant" and measured.warning is not None
        for out in (rubric.output, exported.output):
            assert "warning:" in out and said in " ".join(out.split()), out
        assert "The rubric and judge cannot tell good from bad" in html and said in html
        assert discrimination_warnings(run) == [measured.warning]
    else:
        assert measured.verdict == "discriminates" and measured.answer_scores > 1
        assert said not in " ".join(rubric.output.split()) + " ".join(exported.output.split())
        assert "cannot tell good from bad" not in html
        assert discrimination_warnings(run) == []
