"""Role: rubric matcher (evaluation only). Decides which gold criteria, if any, one generated criterion
states (none, one or several). It never proposes or selects updates."""

from __future__ import annotations

from functools import cache
from typing import Literal

from pydantic import BaseModel, Field, create_model

from ..domain import GoldItem, QuestionView
from ..lm import LM, GenParams, Message
from ..roles.common import UNTRUSTED_NOTE, question_block
from .models import MATCHER_ROLE

RATIONALE_MAX = 160
PARAMS = GenParams(temperature=0.0, max_tokens=240)


@cache
def match_schema(n_gold: int) -> type[BaseModel]:
    """`matches` lists reference criteria by number (1..n), none, one or several; the grammar allows
    nothing else. A repeated number counts once."""
    choices = Literal[tuple(range(1, n_gold + 1))]  # type: ignore[valid-type]
    return create_model(f"MatchOut{n_gold}",
                        rationale=(str, Field(json_schema_extra={"maxLength": RATIONALE_MAX})),
                        matches=(list[choices], Field(max_length=n_gold)))  # type: ignore[valid-type]


SYSTEM = f"""You compare rubrics written for the same question. You get one criterion from a generated \
rubric and a numbered list of reference criteria. List every reference criterion whose requirement the \
generated criterion states: the same behaviour asked of an answer, even in other words, at a similar \
level of detail. A generated criterion may state several reference requirements at once (one that asks \
for X and for Y states both the reference criterion asking for X and the one asking for Y). A reference \
criterion marked (penalty) describes something an answer must not do; a generated criterion asking to \
avoid that thing states it. A generated criterion that is only on the same topic, or much vaguer than a \
reference criterion (asks for "accuracy" where the reference names a specific fact), does not state it. \
Give a short rationale, then the numbers of the reference criteria it states, or an empty list. \
{UNTRUSTED_NOTE}"""


def render_gold(items: tuple[GoldItem, ...]) -> str:
    return "\n".join(f"{k + 1}. {'(penalty) ' if it.points < 0 else ''}{it.text}" for k, it in enumerate(items))


def messages(question: QuestionView, criterion: str, gold: tuple[GoldItem, ...]) -> list[Message]:
    return [
        Message("system", SYSTEM),
        Message("user", f"{question_block(question)}\n\nReference criteria:\n{render_gold(gold)}\n\n"
                        f"Generated criterion: {criterion}\n\nReturn JSON with the fields rationale and matches."),
    ]


async def match_criterion(lm: LM, question: QuestionView, criterion: str, gold: tuple[GoldItem, ...],
                          *, params: GenParams = PARAMS) -> frozenset[int]:
    """The 0-based indices of the gold criteria the generated criterion states (empty: none)."""
    out = await lm.structured(messages(question, criterion, gold), match_schema(len(gold)), role=MATCHER_ROLE,
                              params=params)
    return frozenset(int(k) - 1 for k in out.matches)  # type: ignore[attr-defined]
