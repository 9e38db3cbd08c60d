"""ResearchQA grader, with the official scorer's semantics (realliyifei/ResearchQA `compute_coverage.py`):
rubric items are judged in batches of 8 (one request per batch, in rubric order), each item gets one of
five coverage labels (1 = not at all, 2 = barely, 3 = moderately, 4 = mostly, 5 = completely), and a
question any of whose batches could not be judged is skipped: left ungraded, never scored from part of
its rubric. The question's score is the mean of (label - 1) / 4 over its items.

This module asks with our own prompt and a structured reply; `official.py` asks with the official prompt,
fetched and used verbatim, and parses its plain-text reply as the official scorer does.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import cache
from typing import Any, Literal

from pydantic import BaseModel, Field, create_model

from ...aio import gather_all
from ...domain import GoldItem, Question
from ...grading.base import ask, gold_items, role_name
from ...grading.result import GradeResult, ItemGrade, UnknownPolicy, conclude
from ...lm import LM, GenParams, LMError, Message
from ...roles.common import UNTRUSTED_NOTE, data_block, question_block
from . import rules

SCHEME = "researchqa"
POLICY = UnknownPolicy(min_coverage=None)  # the official scorer skips a question whose batch failed
BATCH_SIZE = 8  # the official scorer's default batch size
PARAMS = GenParams(temperature=0.0, max_tokens=700)

Label = Literal[1, 2, 3, 4, 5]
MEANINGS = ("1 = not at all: nothing in the answer lets a reader infer it; 2 = barely: not stated, though a "
            "reader could infer it; 3 = moderately: stated, but important details are missing; 4 = mostly: "
            "stated, with some details missing; 5 = completely: stated with enough detail")


@cache
def labels_schema(n: int) -> type[BaseModel]:
    """A short rationale and exactly n labels, one per item of the batch, in order."""
    return create_model(f"CoverageLabels{n}", rationale=(str, Field(json_schema_extra={"maxLength": 300})),
                        labels=(list[Label], Field(min_length=n, max_length=n)))


SYSTEM = f"""You judge how far an answer to a research question addresses each item of a numbered list. \
Give every item one coverage label: {MEANINGS}. Judge substance, not wording; an item about a specific \
result or comparison needs that result or comparison. Give one short overall rationale, then the labels \
in the order of the items. {UNTRUSTED_NOTE}"""


def messages(question: Question, response: str, batch: tuple[GoldItem, ...]) -> list[Message]:
    listing = "\n".join(f"{k + 1}. {it.text}" for k, it in enumerate(batch))
    return [Message("system", SYSTEM),
            Message("user", f"{question_block(question)}\n\n{data_block('response', response)}\n\nItems:\n{listing}"
                            f"\n\nReturn JSON with the fields rationale and labels (a list of {len(batch)} "
                            "integers from 1 to 5, one per item in order).")]


def batches(items: tuple[GoldItem, ...], size: int = BATCH_SIZE) -> list[tuple[GoldItem, ...]]:
    return [items[i:i + size] for i in range(0, len(items), size)]


def batch_calls(question: Question) -> int:
    """Grader calls for one answer: one per batch of `BATCH_SIZE` rubric items, as the official scorer."""
    return len(batches(gold_items(question, SCHEME))) if question.gold is not None else 0


def _compute(scored: list[ItemGrade]) -> tuple[float | None, dict[str, Any]]:
    return rules.researchqa_score([i.value for i in scored if i.value is not None]), {}


async def grade_batched(question: Question,
                        judge: Callable[[tuple[GoldItem, ...]], Awaitable[list[int] | LMError]]) -> GradeResult:
    """Judge each batch of the rubric; a failed batch leaves its items unknown, so the question is skipped."""
    items = gold_items(question, SCHEME)
    groups = batches(items)
    outs = await gather_all(*[judge(b) for b in groups])
    grades: list[ItemGrade] = []
    for batch, out in zip(groups, outs, strict=True):
        for j, it in enumerate(batch):
            k = len(grades)
            grades.append(ItemGrade.failed(k, it.text, it.points, out) if isinstance(out, LMError)
                          else ItemGrade(index=k, criterion=it.text, points=it.points, value=float(out[j])))
    return conclude(question.id, SCHEME, grades, POLICY, _compute)


async def grade_researchqa(lm: LM, question: Question, response: str, *,
                           params: GenParams | None = None) -> GradeResult:
    async def judge(batch: tuple[GoldItem, ...]) -> list[int] | LMError:
        out = await ask(lm, messages(question, response, batch), labels_schema(len(batch)),
                        role=role_name(SCHEME), params=params or PARAMS)
        return out if isinstance(out, LMError) else list(out.labels)  # type: ignore[attr-defined]

    return await grade_batched(question, judge)
