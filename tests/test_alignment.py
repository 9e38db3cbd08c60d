"""Rubric alignment (Table 5) under its stated definition: a generated criterion may state several gold
criteria, so one broad-but-exact criterion can recall more than one gold item; precision counts generated
criteria that state at least one. Boundaries: every gold item covered by one criterion, an empty match,
indices out of range, and the matcher's several numbers reaching the record."""

from __future__ import annotations

import json

import pytest

from decoevo.domain import GoldItem, Question, Turn
from decoevo.evaluation import overlap
from decoevo.evaluation.alignment import macro
from decoevo.evaluation.matcher import match_criterion, match_schema
from decoevo.lm.types import BackendRequest

GOLD = tuple(GoldItem(text=t) for t in ("mentions rest", "mentions ice", "says when to see a doctor"))


def test_one_criterion_may_cover_every_gold_item() -> None:
    # the matcher said: criterion 0 states gold 0, 1 and 2; criterion 1 states nothing
    o = overlap(3, [{0, 1, 2}, set()])
    assert (o.precision, o.recall) == (0.5, 1.0)  # one generated criterion recalls all three
    assert o.f1 == pytest.approx(2 * 0.5 * 1.0 / 1.5)
    # with one gold item per generated criterion the recall ceiling is m / n: 2 criteria, 3 gold -> 2/3
    assert overlap(3, [{0}, {1}]).recall == pytest.approx(2 / 3)


def test_boundaries() -> None:
    exact = overlap(2, [{0}, {1}])
    assert (exact.precision, exact.recall, exact.f1) == (1.0, 1.0, 1.0)
    none = overlap(2, [set()])
    assert (none.precision, none.recall, none.f1) == (0.0, 0.0, 0.0)
    with pytest.raises(ValueError, match="outside"):
        overlap(2, [{2}])
    with pytest.raises(ValueError):
        overlap(0, [{0}])
    # macro: the mean of per-question values (F1 is the mean of F1s, not the F1 of the means)
    avg = macro([overlap(1, [{0}]), overlap(4, [{0}, set()])])
    assert avg is not None
    assert avg.precision == pytest.approx((1 + 0.5) / 2) and avg.recall == pytest.approx((1 + 0.25) / 2)
    assert avg.f1 == pytest.approx((1 + 2 * 0.5 * 0.25 / 0.75) / 2)


async def test_matcher_returns_several_gold_items(make_lm) -> None:
    assert match_schema(3).model_json_schema()["properties"]["matches"]["maxItems"] == 3
    question = Question(id="q", turns=(Turn(role="user", content="My knee hurts."),))

    def script(request: BackendRequest) -> str:
        return json.dumps({"rationale": "asks for rest and ice", "matches": [2, 1, 2]})

    lm, _ = make_lm(script)
    assert await match_criterion(lm, question.view(), "Recommends rest and ice.", GOLD) == {0, 1}
