"""The evaluation records (`RUN/eval/`, rundir/evalrecords.py) refuse a damaged file by the field that is wrong, at
each bound, and keep every well-formed one: what `report`, `compare` and the library read is what decoevo wrote."""

from __future__ import annotations

import math
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from decoevo.rundir.evalrecords import (
    AlignmentFile,
    CompareFile,
    DynamicsFile,
    EvalFile,
)

EVAL = {"name": "test", "kind": "test", "benchmark": "healthbench", "method": "decoevo", "seed": 0, "score": 50.0,
        "n_graded": 2, "n_ungraded": 1}


def side(score: float | None) -> dict[str, Any]:
    return {"response": "…", "score": score}


def row(qid: str, before: float | None, after: float | None) -> dict[str, Any]:
    delta = None if before is None or after is None else after - before
    return {"question_id": qid, "before": side(before), "after": side(after), "delta": delta}


ROWS = [row("q0", 40.0, 60.0), row("q1", 50.0, 50.0), row("q2", None, 70.0)]
COMPARE = {"name": "test", "kind": "test", "benchmark": "healthbench", "method": "decoevo", "seed": 0,
           "before_version": 0, "after_version": 3, "n_questions": 3, "n_paired": 2, "before_score": 45.0,
           "after_score": 55.0, "mean_delta": 10.0, "p_value": 0.5, "rows": ROWS}
DYNAMICS = {"method": "decoevo", "seed": 0, "points": [{"step": 0, "skill_version": 0, "proxy": 0.0, "gold": 100.0}]}
ALIGNMENT = {"method": "decoevo", "seed": 0, "precision": 1.0, "recall": 0.0, "f1": 0.5, "n_questions": 0}


def refused(model: type[BaseModel], data: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError) as error:
        model.model_validate(data)
    assert field in str(error.value), str(error.value)


@pytest.mark.parametrize(("model", "base", "field", "edge", "past"), [
    (EvalFile, EVAL, "score", 100.0, 100.01), (EvalFile, EVAL, "score", 0.0, -0.01),
    (EvalFile, EVAL, "n_graded", 0, -1), (EvalFile, EVAL, "n_ungraded", 0, -1),
    (CompareFile, COMPARE, "p_value", 1.0, 1.01), (CompareFile, COMPARE, "p_value", 0.0, -0.01),
    (CompareFile, COMPARE, "before_version", 0, -1), (CompareFile, COMPARE, "after_version", 0, -1),
    (AlignmentFile, ALIGNMENT, "precision", 1.0, 1.01), (AlignmentFile, ALIGNMENT, "recall", 0.0, -0.01),
    (AlignmentFile, ALIGNMENT, "f1", 1.0, 1.5), (AlignmentFile, ALIGNMENT, "n_questions", 0, -1),
    (AlignmentFile, ALIGNMENT, "n_failed", 0, -1)])
def test_each_bound_keeps_its_edge_and_refuses_past_it(model, base, field, edge, past):
    """Scores are 0-100, probabilities and alignment 0-1, counts and versions 0 or more; a file past a bound is
    refused by that field's name. A count is only checked against the rows when rows are listed: the edge cases
    change no count the rows are held to."""
    data = {**base, field: edge}
    if model is CompareFile:
        data["rows"] = []  # the rows' own consistency is the next test's
    assert getattr(model.model_validate(data), field) == edge
    refused(model, {**data, field: past}, field)


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_no_record_holds_nan_or_infinity(value):
    refused(EvalFile, {**EVAL, "score": value}, "score")
    refused(CompareFile, {**COMPARE, "mean_delta": value, "rows": []}, "mean_delta")


@pytest.mark.parametrize("name", ["proxy", "gold"])
def test_a_dynamics_point_is_on_the_0_to_100_scale(name):
    point = DYNAMICS["points"][0]
    for edge in (0.0, 100.0):
        got = DynamicsFile.model_validate({**DYNAMICS, "points": [{**point, name: edge}]})
        assert getattr(got.points[0], name) == edge
    for past in (-0.01, 100.01):
        refused(DynamicsFile, {**DYNAMICS, "points": [{**point, name: past}]}, name)


def test_an_eval_file_lists_one_item_per_counted_question_and_its_coverage_is_the_graded_share():
    items = [{"question_id": f"q{i}"} for i in range(3)]
    whole = EvalFile.model_validate({**EVAL, "items": items})
    assert whole.coverage == pytest.approx(2 / 3)
    assert EvalFile.model_validate({**EVAL, "n_graded": 0, "n_ungraded": 0, "score": None}).coverage == 0.0
    assert EvalFile.model_validate({**EVAL, "n_graded": 4, "n_ungraded": 0}).coverage == 1.0
    with pytest.raises(ValidationError, match=r"lists 2 question.*counts 3.*cut short or edited"):
        EvalFile.model_validate({**EVAL, "items": items[:2]})


def test_a_comparison_is_what_its_rows_say():
    whole = CompareFile.model_validate(COMPARE)
    assert isinstance(whole, CompareFile) and whole.n_paired == 2 and len(whole.rows) == 3
    no_rows = CompareFile.model_validate({**COMPARE, "rows": []})  # a summary alone (older files) is kept
    assert isinstance(no_rows, CompareFile) and no_rows.mean_delta == 10.0
    skill_file = CompareFile.model_validate({**COMPARE, "after_version": None, "after_skill": {"path": "s.md"}})
    assert skill_file.after_skill == {"path": "s.md"}
    with pytest.raises(ValidationError, match="no after_skill names the skill"):
        CompareFile.model_validate({**COMPARE, "after_version": None})
    with pytest.raises(ValidationError, match=r"holds 2 row.*counts 3 question"):
        CompareFile.model_validate({**COMPARE, "rows": ROWS[:2]})
    with pytest.raises(ValidationError, match=r"2 row.*graded under both skills but n_paired is 3"):
        CompareFile.model_validate({**COMPARE, "n_paired": 3})
    for key, wrong in (("before_score", 46.0), ("after_score", 54.0), ("mean_delta", 9.0), ("mean_delta", None)):
        with pytest.raises(ValidationError, match=f"{key} is .* paired row"):
            CompareFile.model_validate({**COMPARE, key: wrong})
    unpaired = [row("q0", None, 60.0), row("q1", 50.0, None)]
    alone = CompareFile.model_validate({**COMPARE, "rows": unpaired, "n_questions": 2, "n_paired": 0,
                                        "before_score": None, "after_score": None, "mean_delta": None})
    assert alone.n_paired == 0
