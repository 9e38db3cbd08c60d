"""Role: judge. Scores a response against every criterion of a rubric, in one call (joint mode) or one
call per criterion (per-criterion mode, for graders that need it)."""

from __future__ import annotations

from functools import cache
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, create_model

from ..aio import gather_all
from ..domain import CriterionScore, Judgement, QuestionView, Rubric
from ..lm import LM, GenParams, Message
from .common import UNTRUSTED_NOTE, data_block, one_line, own_verdict, question_block, render_rubric

ROLE = "judge"

Level = Literal[0, 1, 2, 3, 4]
LEVELS = "0 = not met at all, 1 = barely, 2 = partly, 3 = mostly, 4 = fully met"


class CriterionVerdict(BaseModel):
    model_config = ConfigDict(defer_build=True)  # its validator is built at first use, not at import

    rationale: str  # unbounded here; the embedded model's cap lives in lm/local.py
    level: Level


@cache
def joint_schema(n: int) -> type[BaseModel]:
    """A schema with exactly n verdicts, so the grammar and the validator both enforce the count."""
    return create_model(
        f"JointVerdicts{n}", verdicts=(list[CriterionVerdict], Field(min_length=n, max_length=n))
    )


SYSTEM = f"""You grade a response against a rubric. For each numbered criterion, in order, give a short \
rationale that points to what the response does or lacks, then a level: {LEVELS}. Judge only what the \
response contains; do not reward length for its own sake. {UNTRUSTED_NOTE}"""


def joint_messages(question: QuestionView, response: str, rubric: Rubric) -> list[Message]:
    return [
        Message("system", SYSTEM),
        Message("user", f"{question_block(question)}\n\n{data_block('response', response)}\n\n"
                        f"Rubric:\n{render_rubric(rubric)}\n\nReturn JSON with a list named verdicts holding "
                        f"{len(rubric.criteria)} items, one per criterion in order."),
    ]


def criterion_messages(question: QuestionView, response: str, criterion: str) -> list[Message]:
    return [
        Message("system", SYSTEM),
        Message("user", f"{question_block(question)}\n\n{data_block('response', response)}\n\n"
                        f"Criterion: {one_line(criterion)}\n\nReturn JSON with the fields rationale and level."),
    ]


async def judge(
    lm: LM, question: QuestionView, response: str, rubric: Rubric, *, params: GenParams,
    mode: Literal["joint", "per_criterion"] = "joint", role: str = ROLE,
) -> Judgement:
    if mode == "joint":
        schema = joint_schema(len(rubric.criteria))
        out = await own_verdict(lm, joint_messages(question, response, rubric), schema, role=role, params=params)
        verdicts: list[CriterionVerdict] = out.verdicts  # type: ignore[attr-defined]
    else:
        verdicts = list(await gather_all(*[
            own_verdict(lm, criterion_messages(question, response, c.text), CriterionVerdict, role=role,
                        params=params)
            for c in rubric.criteria
        ]))
    return Judgement(
        question_id=question.id,
        scores=tuple(CriterionScore(score=v.level / 4, rationale=v.rationale) for v in verdicts),
    )
