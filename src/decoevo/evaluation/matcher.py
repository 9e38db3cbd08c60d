"""Role: rubric matcher (evaluation only). Decides which gold criterion, if any, states the same
behavioural requirement as one generated criterion. It never proposes or selects updates."""

from __future__ import annotations

from functools import cache
from typing import Literal

from pydantic import BaseModel, Field, create_model

from ..domain import GoldItem, QuestionView
from ..lm import LM, GenParams, Message
from ..roles.common import UNTRUSTED_NOTE, question_block
from .models import MATCHER_ROLE

RATIONALE_MAX = 160
PARAMS = GenParams(temperature=0.0, max_tokens=160)


@cache
def match_schema(n_gold: int) -> type[BaseModel]:
    """`match` is a gold criterion's number (1..n) or 0 for none; the grammar allows nothing else."""
    choices = Literal[tuple(range(n_gold + 1))]  # type: ignore[valid-type]
    return create_model(f"MatchOut{n_gold}",
                        rationale=(str, Field(json_schema_extra={"maxLength": RATIONALE_MAX})),
                        match=(choices, ...))  # type: ignore[arg-type]


SYSTEM = f"""You compare rubrics written for the same question. You get one criterion from a generated \
rubric and a numbered list of reference criteria. Find the reference criterion that asks for the same \
behaviour of an answer: the same requirement, even in other words, at a similar level of detail. A \
reference criterion marked (penalty) describes something an answer must not do; it matches a generated \
criterion that asks to avoid that thing. A criterion that is only on the same topic, much broader, or \
much narrower is not a match. Give a short rationale, then the number of the matching reference \
criterion, or 0 if none matches. {UNTRUSTED_NOTE}"""


def render_gold(items: tuple[GoldItem, ...]) -> str:
    return "\n".join(f"{k + 1}. {'(penalty) ' if it.points < 0 else ''}{it.text}" for k, it in enumerate(items))


def messages(question: QuestionView, criterion: str, gold: tuple[GoldItem, ...]) -> list[Message]:
    return [
        Message("system", SYSTEM),
        Message("user", f"{question_block(question)}\n\nReference criteria:\n{render_gold(gold)}\n\n"
                        f"Generated criterion: {criterion}\n\nReturn JSON with the fields rationale and match."),
    ]


async def match_criterion(lm: LM, question: QuestionView, criterion: str, gold: tuple[GoldItem, ...],
                          *, params: GenParams = PARAMS) -> int | None:
    """The 0-based index of the matching gold criterion, or None when nothing matches."""
    out = await lm.structured(messages(question, criterion, gold), match_schema(len(gold)), role=MATCHER_ROLE,
                              params=params)
    k = int(out.match)  # type: ignore[attr-defined]
    return None if k == 0 else k - 1
