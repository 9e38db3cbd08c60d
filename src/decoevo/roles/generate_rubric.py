"""Role: generate rubric. Question + generator skill -> weighted, positively phrased criteria."""

from __future__ import annotations

from functools import cache
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, create_model

from ..domain import Criterion, QuestionView, Rubric, Skill
from ..lm import LM, GenParams, Message
from .common import UNTRUSTED_NOTE, question_block

ROLE = "generate_rubric"


class CriterionOut(BaseModel):
    model_config = ConfigDict(defer_build=True)  # its validator is built at first use, not at import

    # As long as a requirement needs: no bound here; the embedded model gets a small one (lm/local.py).
    criterion: str = Field(min_length=3)
    weight: Literal[1, 2, 3, 4, 5]


@cache
def rubric_schema(max_criteria: int) -> type[BaseModel]:
    """Between 1 and max_criteria criteria; the grammar and the validator both enforce the bound."""
    return create_model(
        f"RubricOut{max_criteria}", criteria=(list[CriterionOut], Field(min_length=1, max_length=max_criteria)))


SYSTEM = """You write grading rubrics. For the question you are given, list the specific criteria that an \
excellent answer must meet. Each criterion is one checkable requirement with an importance weight from 1 \
(minor) to 5 (essential). Phrase every criterion as a requirement; when something must not happen, write \
it as a requirement to avoid it (for example "Avoids recommending a specific drug dose"). Return JSON with \
a list named criteria; each item has the fields criterion and weight.

Principles for writing rubrics:
{skill}

""" + UNTRUSTED_NOTE


def messages(question: QuestionView, skill: Skill) -> list[Message]:
    return [
        Message("system", SYSTEM.format(skill=skill.text.strip() or "(none yet)")),
        Message("user", f"{question_block(question)}\n\nWrite the rubric for this question."),
    ]


async def generate_rubric(
    lm: LM, question: QuestionView, skill: Skill, *, params: GenParams, max_criteria: int = 8
) -> Rubric:
    out = await lm.structured(messages(question, skill), rubric_schema(max_criteria), role=ROLE, params=params)
    criteria: list[CriterionOut] = out.criteria  # type: ignore[attr-defined]
    return Rubric(
        question_id=question.id,
        generator_version=skill.version,
        criteria=tuple(Criterion(text=c.criterion.strip(), weight=float(c.weight)) for c in criteria),
    )
