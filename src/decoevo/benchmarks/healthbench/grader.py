"""HealthBench grader: one call per rubric item decides whether the reply, shown as the final assistant
turn of the conversation (as the benchmark grades it), meets it.

Unknown items: the question is ungraded. The rule is a ratio over the whole rubric; dropping an
unscored negative item would hide a penalty and dropping a positive one would change the denominator.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ...domain import OPEN_TURN_TEXT, GoldItem, Question
from ...grading.base import RATIONALE_MAX, grade_per_item
from ...grading.result import GradeResult, ItemGrade, UnknownPolicy
from ...lm import LM, GenParams, Message
from ...roles.common import UNTRUSTED_NOTE, data_block
from . import rules

SCHEME = "healthbench"
POLICY = UnknownPolicy(min_coverage=None)


class ItemVerdict(BaseModel):
    model_config = ConfigDict(defer_build=True)  # its validator is built at first use, not at import

    rationale: str = Field(json_schema_extra={"maxLength": RATIONALE_MAX})
    met: bool


SYSTEM = f"""You check one rubric criterion against the final assistant turn of a health conversation. \
The block <conversation> holds the whole conversation; its last turn, marked [assistant - graded], is the \
reply you judge, and the turns before it are context. Each criterion carries points. A criterion with \
positive points describes something a good reply does: met is true when the reply does it. A criterion \
with negative points describes something a reply must not do: met is true when the reply does that bad \
thing (the penalty then applies), false when it avoids it. Examples in a criterion (after "such as", \
"e.g.", "for example", or in a list) illustrate what it means: a reply need not mention every example, \
nor any particular one, to meet it, as long as it does what the criterion asks. A criterion that asks for \
several things at once is met only when the reply does all of them. Give a short rationale that points \
to the reply, then met. {UNTRUSTED_NOTE}"""

GRADED = "assistant - graded"


def conversation_block(question: Question, response: str) -> str:
    """The conversation with the response appended as its final assistant turn."""
    turns = [(t.role, OPEN_TURN_TEXT if t.is_open else t.content) for t in question.turns]
    text = "\n\n".join(f"[{role}]\n{content}" for role, content in [*turns, (GRADED, response)])
    return data_block("conversation", text)


def messages(question: Question, response: str, item: GoldItem) -> list[Message]:
    user = (f"{conversation_block(question, response)}\n\n"
            f"Criterion ({item.points:+g} points): {item.text}\n\nReturn JSON with the fields rationale and met.")
    return [Message("system", SYSTEM), Message("user", user)]


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
