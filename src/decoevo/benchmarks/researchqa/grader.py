"""ResearchQA grader: one call per rubric item, a 1-5 coverage label.

Unknown items: the mean over labelled items when at least half were labelled (items are independent and
equally weighted); otherwise ungraded.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from ...domain import GoldItem, Question
from ...grading.base import RATIONALE_MAX, grade_per_item
from ...grading.result import GradeResult, ItemGrade, UnknownPolicy
from ...lm import LM, GenParams, Message
from ...roles.common import UNTRUSTED_NOTE, data_block, question_block
from . import rules

SCHEME = "researchqa"
POLICY = UnknownPolicy(min_coverage=0.5)
LABELS = ("1 = not covered, 2 = touched on in passing, 3 = partly covered, 4 = mostly covered, "
          "5 = fully covered with the specifics the item asks for")


class CoverageVerdict(BaseModel):
    rationale: str = Field(json_schema_extra={"maxLength": RATIONALE_MAX})
    coverage: Literal[1, 2, 3, 4, 5]


SYSTEM = f"""You check how well an answer to a research question covers one rubric item. Label the \
coverage: {LABELS}. Credit substance, not wording; an item about a specific result or comparison needs \
that result or comparison. Give a short rationale that points to the answer, then the coverage label. \
{UNTRUSTED_NOTE}"""


def messages(question: Question, response: str, item: GoldItem) -> list[Message]:
    return [
        Message("system", SYSTEM),
        Message("user", f"{question_block(question)}\n\n{data_block('response', response)}\n\n"
                        f"Rubric item: {item.text}\n\nReturn JSON with the fields rationale and coverage."),
    ]


def _compute(scored: list[ItemGrade]) -> tuple[float | None, dict[str, Any]]:
    return rules.researchqa_score([i.value for i in scored if i.value is not None]), {}


async def grade_researchqa(lm: LM, question: Question, response: str, *,
                           params: GenParams | None = None) -> GradeResult:
    return await grade_per_item(
        lm, question, SCHEME, schema=CoverageVerdict, params=params, policy=POLICY, compute=_compute,
        messages=lambda item: messages(question, response, item), value=lambda v: float(v.coverage))
