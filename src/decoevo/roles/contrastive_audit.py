"""Role: contrastive audit, in two stages.

Stage 1 sees the question and two responses, no rubric and no scores, and states a preference; it is
asked in both orders and a flip counts as equivalent (position bias). Stage 2 then sees the rubric and
the criterion scores and explains what the rubric missed, proposing a principle.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from ..aio import together
from ..domain import Judgement, QuestionView, Rubric
from ..lm import LM, GenParams, Message
from .common import (
    UNTRUSTED_NOTE,
    clip,
    data_block,
    own_verdict,
    question_block,
    render_rubric,
    render_scored_rubric,
)

STAGE1_ROLE = "contrastive_audit_blind"
STAGE2_ROLE = "contrastive_audit_reveal"

Preference = Literal["A", "B", "equivalent"]


# No length caps in the schemas: servers get them unbounded; the embedded model's small caps live in
# lm/local.py.
class PreferenceOut(BaseModel):
    model_config = ConfigDict(defer_build=True)  # its validator is built at first use, not at import

    rationale: str = Field(min_length=3)
    preference: Preference


class RevealOut(BaseModel):
    model_config = ConfigDict(defer_build=True)  # its validator is built at first use, not at import

    why_missed: str = Field(min_length=3)
    principle: str = Field(min_length=3)


class ContrastiveRecord(BaseModel):
    """(q, r+, r−, ξ, κ): r+ is the response the auditor preferred blind, `rationale` its blind reason
    (written about r+ as response A), `missed` the distinction the rubric missed once revealed, and
    `principle` the missing or under-weighted principle κ."""

    question_id: str
    preferred: str
    other: str
    rationale: str
    principle: str = ""
    question: str = ""
    missed: str = ""


STAGE1_SYSTEM = f"""You compare two responses to the same question and decide which one serves the user \
better, considering correctness, safety, completeness, clarity and fit to the request. Length alone is not \
a merit. Explain the decisive difference first, then answer A, B, or equivalent when neither is clearly \
better. Return JSON with the fields rationale and preference. {UNTRUSTED_NOTE}"""

STAGE2_SYSTEM = f"""Earlier you preferred one of two responses for the reason given; the preferred one is \
shown as response A, the other as response B. Now you see the rubric that was used to score both, with \
each criterion's score. The rubric scored them almost the same. Explain why the rubric failed to capture \
the difference you found, and state one general principle for writing rubrics that would capture it on \
similar questions. Return JSON with the fields why_missed and principle. {UNTRUSTED_NOTE}"""


def stage1_messages(question: QuestionView, a: str, b: str, rubric: Rubric | None = None,
                    limit: int = 2500) -> list[Message]:
    shown_rubric = f"\n\nRubric:\n{render_rubric(rubric)}" if rubric is not None else ""
    return [
        Message("system", STAGE1_SYSTEM),
        Message("user", f"{question_block(question)}\n\n{data_block('response_a', clip(a, limit))}\n\n"
                        f"{data_block('response_b', clip(b, limit))}{shown_rubric}"),
    ]


async def blind_preference(
    lm: LM, question: QuestionView, first: str, second: str, *, params: GenParams,
    rubric: Rubric | None = None, second_order_if_decisive: bool = False,
) -> tuple[int | None, str]:
    """Which of (first, second) is better: 0, 1, or None for equivalent. Asked in both orders; the answer
    stands only if both orders agree. `rubric` is shown only in the no-rubric-blind ablation.

    `second_order_if_decisive`: the orders are asked one after the other, and the second only when the
    first preferred a response: after "equivalent" the pair is equivalent whatever the second says."""
    ask = [stage1_messages(question, first, second, rubric), stage1_messages(question, second, first, rubric)]
    if second_order_if_decisive:
        forward = await own_verdict(lm, ask[0], PreferenceOut, role=STAGE1_ROLE, params=params)
        if forward.preference == "equivalent":
            return None, forward.rationale
        backward = await own_verdict(lm, ask[1], PreferenceOut, role=STAGE1_ROLE, params=params)
    else:
        forward, backward = await together(*[own_verdict(lm, m, PreferenceOut, role=STAGE1_ROLE, params=params)
                                             for m in ask])
    # The rationale handed on is the one from the order that showed the winner as response A: stage 2
    # shows the preferred response as A, so "A" in the reason always names the response it calls preferred.
    if forward.preference == "A" and backward.preference == "B":
        return 0, forward.rationale
    if forward.preference == "B" and backward.preference == "A":
        return 1, backward.rationale
    return None, forward.rationale


def stage2_messages(question: QuestionView, preferred: str, other: str, rationale: str, rubric: Rubric,
                    judged_preferred: Judgement, judged_other: Judgement, limit: int = 2000) -> list[Message]:
    return [
        Message("system", STAGE2_SYSTEM),
        Message("user", f"{question_block(question)}\n\nPreferred:\n{data_block('response_a', clip(preferred, limit))}"
                        f"\n\nOther:\n{data_block('response_b', clip(other, limit))}\n\n"
                        f"Your reason:\n{data_block('reason', rationale)}\n\n"
                        f"Rubric scores of the preferred response:\n{render_scored_rubric(rubric, judged_preferred)}"
                        f"\n\nRubric scores of the other response:\n{render_scored_rubric(rubric, judged_other)}"),
    ]


async def reveal(
    lm: LM, question: QuestionView, preferred: str, other: str, rationale: str, rubric: Rubric,
    judged_preferred: Judgement, judged_other: Judgement, *, params: GenParams,
) -> RevealOut:
    msgs = stage2_messages(question, preferred, other, rationale, rubric, judged_preferred, judged_other)
    return await own_verdict(lm, msgs, RevealOut, role=STAGE2_ROLE, params=params)
