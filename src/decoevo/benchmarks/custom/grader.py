"""Grader for users' own gold rubrics (JSONL `"gold": {"scheme": "weighted", ...}`): one call per item
decides whether the reply meets it; a question scores the points of met items over the positive points,
clipped to [0, 1] and x100. Negative points mark behaviour to avoid, as in HealthBench, but the clip is
per question here: users compare questions one by one, and a negative score has no reading for them.

Unknown items: the question is ungraded (the ratio needs every item, as in HealthBench).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ...domain import GoldItem, Question
from ...grading.base import RATIONALE_MAX, grade_per_item
from ...grading.result import GradeResult, ItemGrade, UnknownPolicy
from ...lm import LM, GenParams, Message
from ...roles.common import UNTRUSTED_NOTE, data_block, question_block

SCHEME = "weighted"
POLICY = UnknownPolicy(min_coverage=None)


class WeightedVerdict(BaseModel):
    model_config = ConfigDict(defer_build=True)  # its validator is built at first use, not at import

    rationale: str = Field(json_schema_extra={"maxLength": RATIONALE_MAX})
    met: bool


SYSTEM = f"""You check one rubric criterion against a reply to a question. A criterion with positive \
points describes something a good reply does: met is true when the reply does it. A criterion with \
negative points describes something a reply must not do: met is true when the reply does that thing. \
Judge only the reply; the question is context. Give a short rationale that points to the reply, then \
met. {UNTRUSTED_NOTE}"""


def signed_item_prompt(question: Question, response: str, item: GoldItem) -> str:
    """The user turn of a met / not-met verdict on one signed-points criterion."""
    return (f"{question_block(question)}\n\n{data_block('response', response)}\n\n"
            f"Criterion ({item.points:+g} points): {item.text}\n\nReturn JSON with the fields rationale and met.")


def messages(question: Question, response: str, item: GoldItem) -> list[Message]:
    return [Message("system", SYSTEM), Message("user", signed_item_prompt(question, response, item))]


def _compute(scored: list[ItemGrade]) -> tuple[float | None, dict[str, Any]]:
    # HealthBench's ratio, imported when a question is graded: importing it imports HealthBench's whole folder,
    # which a run on users' own data does not need before its first call (benchmarks/registry.py)
    from ..healthbench import rules

    fraction = rules.healthbench_fraction([i.points for i in scored], [i.value == 1.0 for i in scored])
    if fraction is None:
        return None, {"reason": "the rubric has no positive points"}
    return min(1.0, max(0.0, fraction)) * 100, {"fraction": fraction}


async def grade_weighted(lm: LM, question: Question, response: str, *,
                         params: GenParams | None = None) -> GradeResult:
    return await grade_per_item(
        lm, question, SCHEME, schema=WeightedVerdict, params=params, policy=POLICY, compute=_compute,
        messages=lambda item: messages(question, response, item), value=lambda v: 1.0 if v.met else 0.0)
