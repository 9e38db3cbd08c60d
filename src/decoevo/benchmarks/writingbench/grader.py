"""WritingBench grader: one call per checklist criterion, a 1-10 score guided by the criterion's bands.

Unknown criteria: the query's score is the mean of the scored criteria when at least half were scored
(the rule is an unweighted mean of independent criteria); otherwise ungraded.
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

SCHEME = "writingbench"
POLICY = UnknownPolicy(min_coverage=0.5)


class CriterionVerdict(BaseModel):
    rationale: str = Field(json_schema_extra={"maxLength": RATIONALE_MAX})
    score: Literal[1, 2, 3, 4, 5, 6, 7, 8, 9, 10]


SYSTEM = f"""You grade a response to a writing request on one criterion, with an integer from 1 (fails \
the criterion) to 10 (meets it completely). The criterion comes with descriptions of what each score band \
looks like; pick the band that fits, then the score inside it. The request may be in Chinese or English. \
Give a short rationale that points to the response, then the score. {UNTRUSTED_NOTE}"""


def messages(question: Question, response: str, item: GoldItem) -> list[Message]:
    bands = item.extra.get("bands") or {}
    band_text = "\n".join(f"  {band}: {text}" for band, text in bands.items())
    name = item.extra.get("name", "")
    desc = item.extra.get("description", item.text)
    return [
        Message("system", SYSTEM),
        Message("user", f"{question_block(question)}\n\n{data_block('response', response)}\n\n"
                        f"Criterion: {name}\n{desc}" + (f"\nScore bands:\n{band_text}" if band_text else "")
                        + "\n\nReturn JSON with the fields rationale and score."),
    ]


def _compute(scored: list[ItemGrade]) -> tuple[float | None, dict[str, Any]]:
    return rules.writingbench_score([i.value for i in scored if i.value is not None]), {}


async def grade_writingbench(lm: LM, question: Question, response: str, *,
                             params: GenParams | None = None) -> GradeResult:
    return await grade_per_item(
        lm, question, SCHEME, schema=CriterionVerdict, params=params, policy=POLICY, compute=_compute,
        messages=lambda item: messages(question, response, item), value=lambda v: float(v.score))
