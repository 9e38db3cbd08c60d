"""ResearchQA graded as its official scorer does: rubric items in batches of 8, five coverage labels
normalised by (label - 1) / 4, and a question with a batch that cannot be judged skipped (ungraded),
never scored from part of its rubric. Our prompt and the official one (a synthetic stand-in here)."""

from __future__ import annotations

import json
import re

import pytest

from decoevo.benchmarks import grade
from decoevo.benchmarks.record import OfficialPrompts
from decoevo.benchmarks.researchqa.official import PROMPTS, parse_labels
from decoevo.domain import GoldItem, GoldRubric, Question, Turn
from decoevo.lm.types import BackendRequest

ITEMS = tuple(GoldItem(text=f"item {k}") for k in range(10))
QUESTION = Question(
    id="rq",
    turns=(Turn(role="user", content="How do transformers scale?"),),
    gold=GoldRubric(scheme="researchqa", items=ITEMS),
)
SYNTHETIC = OfficialPrompts("researchqa", {"grader": "SYN R=<<response>>\nQS:\n<<questions>>\nEND"}, PROMPTS)
WORDS = ["Not at all", "Barely", "Moderately", "Mostly", "Completely"]


def _numbers(request: BackendRequest) -> list[int]:
    return [int(n) for n in re.findall(r"item (\d+)", request.messages[-1].content)]


async def test_our_prompt_judges_batches_of_8_and_skips_a_question_with_a_failed_batch(make_lm) -> None:
    def script(request: BackendRequest) -> str:
        ks = _numbers(request)
        return json.dumps({"rationale": "r", "labels": [1 + k % 5 for k in ks]})

    lm, backend = make_lm(script)
    result = await grade(lm, QUESTION, "an answer")
    assert sorted(len(_numbers(c)) for c in backend.calls) == [2, 8]  # one request per batch, rubric order
    assert result.score == pytest.approx(100 * sum((k % 5) / 4 for k in range(10)) / 10)

    def second_batch_broken(request: BackendRequest) -> str:
        ks = _numbers(request)
        return "no labels" if 9 in ks else json.dumps({"rationale": "r", "labels": [5] * len(ks)})

    lm, _ = make_lm(second_batch_broken)
    skipped = await grade(lm, QUESTION, "another answer")  # not the cached request above
    # 8 of 10 items judged "completely" would be 100 from part of the rubric; the official scorer skips it
    assert skipped.score is None and skipped.unknown == 2 and skipped.ungraded_reason


async def test_official_prompt_is_filled_verbatim_and_parsed_by_lines(make_lm) -> None:
    seen: list[str] = []

    def script(request: BackendRequest) -> str:
        assert [m.role for m in request.messages] == ["user"]  # no system message, as the official scorer
        text = request.messages[0].content
        seen.append(text)
        ks = _numbers(request)
        if len(seen) <= 2:  # first answers: one line short, then a label outside the five
            return "\n".join(WORDS[k % 5] for k in ks[1:]) if len(seen) == 1 else "Somewhat\n" * len(ks)
        return "\n\n".join(WORDS[k % 5] for k in ks) + "\n"

    lm, backend = make_lm(script)
    result = await grade(lm, QUESTION, "the answer", official=SYNTHETIC)
    first = next(t for t in seen if "item 0" in t)
    assert first == "SYN R=the answer\nQS:\n" + "\n".join(f"item {k}" for k in range(8)) + "\nEND"
    assert result.score == pytest.approx(100 * sum((k % 5) / 4 for k in range(10)) / 10)
    assert all(c.params.temperature == 0.0 and c.json_schema is None for c in backend.calls)


def test_official_label_parse() -> None:
    assert parse_labels("Completely\n\n Barely \n", 2) == [5, 2]
    with pytest.raises(ValueError, match="expected 3"):
        parse_labels("Completely\nBarely", 3)
    with pytest.raises(ValueError, match="five labels"):
        parse_labels("completely", 1)  # spelled exactly, as the official lookup


async def test_official_batch_that_never_parses_skips_the_question(make_lm) -> None:
    lm, backend = make_lm(lambda request: "Mostly")  # always one line, whatever the batch size
    result = await grade(lm, QUESTION, "x", official=SYNTHETIC)
    assert result.score is None and result.unknown == 10
    assert len(backend.calls) == 2 * 3  # two batches, 3 attempts each (the official retry count)
    assert {i.error for i in result.items} == {"parse"}
