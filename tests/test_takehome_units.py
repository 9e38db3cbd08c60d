"""The pure parts of what a user takes home: result file names and which grading is the run's result, the
comparison's terminal table at 80 columns, its per-question grid in the report (escaped), the folded line."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from decoevo.cli.compare import per_question_table
from decoevo.evaluation.compare import changed_criteria
from decoevo.evaluation.session import GradedResponse
from decoevo.grading import GradeResult
from decoevo.grading.result import ItemGrade
from decoevo.report.lead import grid
from decoevo.report.render import environment
from decoevo.rundir.evalfiles import foreign, grader_slug, result_stem, results_of, shipped_comparison
from decoevo.rundir.records import CompareFile
from decoevo.sweep.steps import STEPS


@dataclass(frozen=True)
class _Ev:
    name: str
    skill_version: int | None
    self_graded: bool | None = None
    n_graded: int = 4
    grader_prompt: str | None = "ours"


def test_a_result_file_is_named_by_evaluation_version_and_grader() -> None:
    assert result_stem("test", 3, "gpt-4.1", "official") == "test-v003-gpt-4.1-official"
    assert result_stem("transfer-llmeval_med", 0, "/models/SmolLM2 135M.Q4.gguf", None).startswith(
        "transfer-llmeval_med-v000-smollm2-135m.q4-")  # a path: its stem and a hash (tests/test_grader_names.py)
    assert grader_slug("openai/gpt-4o", "ours") == "gpt-4o-ours"
    assert grader_slug("../../x", "ours").startswith("x-") and grader_slug("", None) == "grader-ours"
    # two versions or two graders never share a file
    names = {result_stem("test", v, g, p) for v in (0, 1) for g in ("a", "b") for p in ("ours", "official")}
    assert len(names) == 8


def test_the_run_s_result_is_the_shipped_version_s_grading() -> None:
    evals = {"test-v000-x-ours": _Ev("test", 0), "test-v002-x-ours": _Ev("test", 2, self_graded=True),
             "test-v002-y-ours": _Ev("test", 2, self_graded=False, n_graded=3),
             "transfer-a-v000-x-ours": _Ev("transfer-a", 0)}
    assert results_of(evals, 2) == {"test": "test-v002-y-ours"}  # an independent grader wins over coverage
    assert results_of(evals, 0) == {"test": "test-v000-x-ours", "transfer-a": "transfer-a-v000-x-ours"}
    # a file written before the layout (test.json) that says no version counts; one of another version does not
    assert results_of({"test": _Ev("test", None)}, 2) == {"test": "test"}
    assert results_of({"test": _Ev("test", 0)}, 2) == {}


def test_the_shipped_comparison_is_initial_against_shipped() -> None:
    def cmp(before: int, after: int, self_graded: bool = True, name: str = "test") -> CompareFile:
        return CompareFile(name=name, kind="test", benchmark="weighted", method="decoevo", seed=0,
                           before_version=before, after_version=after, self_graded=self_graded, n_questions=2,
                           n_paired=2)

    found = {"a": cmp(0, 1), "b": cmp(0, 2), "c": cmp(0, 2, self_graded=False), "d": cmp(1, 2),
             "e": cmp(0, 2, name="transfer-x")}
    assert shipped_comparison(found, 2) == "c" and shipped_comparison(found, 3) is None


def test_a_sweep_cell_s_test_step_is_done_by_either_layout(tmp_path: Path) -> None:
    step = STEPS["test"]
    assert not step.done(tmp_path)
    (tmp_path / "eval").mkdir()
    (tmp_path / "eval" / "test-v001-x-ours.json").write_text("{}")
    assert step.done(tmp_path)
    (tmp_path / "eval" / "test-v001-x-ours.json").unlink()
    (tmp_path / "eval" / "test.json").write_text("{}")
    assert step.done(tmp_path)


def _graded(values: list[float | None]) -> GradedResponse:
    items = tuple(ItemGrade(index=i, criterion=f"criterion {i}", value=v, rationale=f"why {i}")
                  for i, v in enumerate(values))
    return GradedResponse("q", "an answer", GradeResult(question_id="q", scheme="weighted", score=50.0, items=items))


def test_changed_criteria_are_the_ones_graded_differently() -> None:
    changed = changed_criteria(_graded([0, 1, None, 1]), _graded([1, 1, 0, None]))
    assert [(c["index"], c["before"], c["after"]) for c in changed] == [(0, 0, 1), (2, None, 0), (3, 1, None)]


def _record(n: int, question: str, criterion: str, k: int) -> dict:
    rows = [{"question_id": f"question-{i:03d}-with-a-long-id", "question": question,
             "before": {"score": 12.5 * (i % 9)}, "after": {"score": None if i == 1 else 100.0},
             "delta": None if i == 1 else 100.0 - 12.5 * (i % 9),
             "changed": [{"criterion": f"{criterion} {j}", "before": 0, "after": 1} for j in range(k)]}
            for i in range(n)]
    return {"before_version": 0, "after_version": 12, "rows": rows, "n_paired": n - 1, "before_score": 40.0,
            "after_score": 100.0, "mean_delta": 60.0, "ci_low": 41.25, "ci_high": 78.75, "note": None}


@settings(max_examples=60, deadline=None)
@given(question=st.text(min_size=0, max_size=400), criterion=st.text(min_size=0, max_size=300),
       k=st.integers(0, 6), width=st.integers(60, 140))
def test_the_per_question_table_fits_any_width(question: str, criterion: str, k: int, width: int) -> None:
    lines = per_question_table(_record(3, question, criterion, k), width)
    assert all(len(line) <= width for line in lines), "\n".join(lines)
    assert lines[0].split()[:4] == ["question", "v000", "v012", "Δ"]
    mean = next(i for i, line in enumerate(lines) if line.startswith("mean (2 paired)"))
    assert "95% CI [+41.2, +78.8]" in " ".join(lines[mean:])


def test_the_per_question_table_at_80_columns() -> None:
    long = "My knee hurts after running every morning and I do not know whether to rest or keep going. " * 3
    advice = "Advises rest and ice for the first 48 hours, then a gradual return"
    lines = per_question_table(_record(2, long, advice, 5))
    assert all(len(line) <= 80 for line in lines), "\n".join(lines)
    first = [line for line in lines if line.startswith("question-000")]
    assert len(first) == 1 and re.search(r" 0\.0 +100\.0 +\+100\.0  \+ Advises", first[0]), first
    assert any("+ Advises rest" in line for line in lines) and any("… 2 more" in line for line in lines)
    ungraded = next(line for line in lines if line.startswith("question-001"))
    assert " — " in ungraded  # an ungraded answer is a dash, never a 0


def test_the_report_grid_shows_both_answers_escaped() -> None:
    planted = "<script>alert(1)</script>"
    side = {"response": f"answer {planted}", "score": 0.0,
            "grade": {"score": 0.0, "items": [{"index": 0, "criterion": f"crit {planted}", "points": 2, "value": 0,
                                                 "rationale": f"reason {planted}"}]}}
    after = {"response": "better", "score": 100.0,
             "grade": {"score": 100.0, "items": [{"index": 0, "criterion": f"crit {planted}", "points": 2, "value": 1,
                                                  "rationale": "now met"}]}}
    cmp = CompareFile(name="test", kind="test", benchmark="weighted", method="decoevo", seed=0, before_version=0,
                      after_version=2, n_questions=1, n_paired=1, before_score=0.0, after_score=100.0,
                      mean_delta=100.0, rows=[{"question_id": "q1", "question": f"ask {planted}", "before": side,
                                               "after": after, "delta": 100.0,
                                               "changed": [{"index": 0, "before": 0, "after": 1}]}])
    pairs = grid(cmp)
    assert pairs[0].n_changed == 1 and pairs[0].criteria[0].after_reason == "now met"
    html = str(environment().get_template("compare.html.j2").module.compare_grid(cmp, pairs))  # type: ignore[attr-defined]
    assert planted not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    for text in ("answer &lt;script&gt;", "better", "reason &lt;script&gt;", "now met", "v000 (initial)",
                 "v002 (shipped)", 'class="changed"'):
        assert text in html, text


@pytest.mark.parametrize(("prompts", "said"), [(["official"], "the benchmark's official grading prompt"),
                                               (["ours"], "decoevo's grading prompt"), ([], "decoevo's grading prompt"),
                                               (["ours", "official"], "official and decoevo's grading prompts")])
def test_the_score_axis_names_the_prompt_that_graded(prompts: list[str], said: str) -> None:
    from decoevo.report.plots import grading_prompt_label

    assert grading_prompt_label(prompts) == said


def test_an_old_result_grading_questions_outside_the_runs_split_is_not_the_runs_own() -> None:
    """A record from before run ids were kept is judged by its questions: one the run's test split does not
    hold means it was copied from another run (named, with the first such question); its own questions pass."""
    split = {"test": ["q1", "q2"]}
    copied = SimpleNamespace(run_id=None, name="test", kind="test",
                             items=[{"question_id": "q1"}, {"question_id": "q9"}])
    why = foreign(copied, "run-a", split)
    assert why is not None and "1 question(s)" in why and "q9" in why and "copied from another run" in why
    own = SimpleNamespace(run_id=None, name="test", kind="test", items=[{"question_id": "q2"}])
    assert foreign(own, "run-a", split) is None
    other = SimpleNamespace(run_id="run-b", name="test", kind="test", items=[])
    assert "run-b" in (foreign(other, "run-a", split) or "")
