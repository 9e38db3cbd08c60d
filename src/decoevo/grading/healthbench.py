"""HealthBench grader: one call per rubric item decides whether the reply meets it.

Unknown items: the question is ungraded. The rule is a ratio over the whole rubric; dropping an
unscored negative item would hide a penalty and dropping a positive one would change the denominator.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from ..domain import GoldItem, Question
from ..lm import LM, GenParams, Message
from ..roles.common import UNTRUSTED_NOTE, data_block, question_block
from . import rules
from .base import RATIONALE_MAX, grade_per_item
from .result import GradeResult, ItemGrade, UnknownPolicy

SCHEME = "healthbench"
POLICY = UnknownPolicy(min_coverage=None)


class ItemVerdict(BaseModel):
    rationale: str = Field(json_schema_extra={"maxLength": RATIONALE_MAX})
    met: bool


SYSTEM = f"""You check one rubric criterion against the last assistant reply in a health conversation. \
Each criterion carries points. A criterion with positive points describes something a good reply does: \
met is true when the reply does it. A criterion with negative points describes something a reply must \
not do: met is true when the reply does that bad thing (the penalty then applies), false when it avoids \
it. The conversation is context; judge only the reply. Give a short rationale that points to the reply, \
then met. {UNTRUSTED_NOTE}"""


def signed_item_prompt(question: Question, response: str, item: GoldItem) -> str:
    """The user turn of a met / not-met verdict on one signed-points criterion (also the `weighted` grader's)."""
    return (f"{question_block(question)}\n\n{data_block('response', response)}\n\n"
            f"Criterion ({item.points:+g} points): {item.text}\n\nReturn JSON with the fields rationale and met.")


def messages(question: Question, response: str, item: GoldItem) -> list[Message]:
    return [Message("system", SYSTEM), Message("user", signed_item_prompt(question, response, item))]


def _compute(scored: list[ItemGrade]) -> tuple[float | None, dict[str, Any]]:
    fraction = rules.healthbench_fraction([i.points for i in scored], [i.value == 1.0 for i in scored])
    if fraction is None:
        return None, {"reason": "the rubric has no positive points"}
    # Per conversation the fraction is reported unclipped (it may be below 0); `aggregate` clips the mean.
    return fraction * 100, {"fraction": fraction}


async def grade_healthbench(lm: LM, question: Question, response: str, *,
                            params: GenParams | None = None) -> GradeResult:
    return await grade_per_item(
        lm, question, SCHEME, schema=ItemVerdict, params=params, policy=POLICY, compute=_compute,
        messages=lambda item: messages(question, response, item), value=lambda v: 1.0 if v.met else 0.0)
