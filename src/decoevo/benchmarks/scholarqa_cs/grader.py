"""ScholarQA-CS grader: one call per annotated criterion, scored 0-10; weighted by the annotated weights.

Unknown criteria: the weighted mean over scored criteria (weights renormalised) when they carry at
least half of the total weight; otherwise ungraded.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from ...domain import GoldItem, Question
from ...grading.base import RATIONALE_MAX, grade_per_item
from ...grading.result import GradeResult, ItemGrade, UnknownPolicy
from ...lm import LM, GenParams, Message
from ...roles.common import UNTRUSTED_NOTE, clip, data_block, question_block
from . import rules

SCHEME = "scholarqa_cs"
POLICY = UnknownPolicy(min_coverage=0.5, weighted=True)
MAX_EVIDENCE = 3  # excerpts shown per criterion; they illustrate it, the full set adds little


class CriterionVerdict(BaseModel):
    rationale: str = Field(json_schema_extra={"maxLength": RATIONALE_MAX})
    score: Literal[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10]


SYSTEM = f"""You grade an answer to a computer-science research question on one criterion written by an \
expert, with an integer from 0 (the answer does not address it) through 5 (partly, or vaguely) to 10 \
(fully and precisely). The excerpts, when given, show the literature the expert had in mind; the answer \
need not quote them but must convey the same substance. Give a short rationale that points to the \
answer, then the score. {UNTRUSTED_NOTE}"""


def messages(question: Question, response: str, item: GoldItem) -> list[Message]:
    evidence = [clip(e, 400) for e in item.extra.get("evidence", [])[:MAX_EVIDENCE]]
    shown = "\n".join(f"- {e}" for e in evidence)
    return [
        Message("system", SYSTEM),
        Message("user", f"{question_block(question)}\n\n{data_block('response', response)}\n\n"
                        f"Criterion: {item.text}" + (f"\nExcerpts:\n{shown}" if shown else "")
                        + "\n\nReturn JSON with the fields rationale and score."),
    ]


def _compute(scored: list[ItemGrade]) -> tuple[float | None, dict[str, Any]]:
    return rules.scholarqa_score([i.value for i in scored if i.value is not None], [i.points for i in scored]), {}


async def grade_scholarqa_cs(lm: LM, question: Question, response: str, *,
                             params: GenParams | None = None) -> GradeResult:
    return await grade_per_item(
        lm, question, SCHEME, schema=CriterionVerdict, params=params, policy=POLICY, compute=_compute,
        messages=lambda item: messages(question, response, item), value=lambda v: float(v.score))
