"""EQ-Bench Creative Writing v3 grader: one call scores the piece on all 22 criteria, 0-20 each.

Like the benchmark's own judge, the criteria are scored together in one reply, so a failed call leaves
every criterion unknown and the piece ungraded. Items keep the raw score (before inverting the flaws).
"""

from __future__ import annotations

from functools import cache
from typing import Any, Literal

from pydantic import BaseModel, Field, create_model

from ...domain import GoldItem, Question
from ...grading.base import ask, gold_items, role_name
from ...grading.result import GradeResult, ItemGrade, UnknownPolicy, conclude
from ...lm import LM, GenParams, LMError, Message
from ...roles.common import UNTRUSTED_NOTE, data_block, question_block
from . import rules

SCHEME = "eqbench_cw"
POLICY = UnknownPolicy(min_coverage=None)
PARAMS = GenParams(temperature=0.0, max_tokens=400)

Score20 = Literal[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20]


@cache
def scores_schema(n: int) -> type[BaseModel]:
    """Exactly n scores, so the grammar and the validator both enforce the count."""
    return create_model(
        f"CreativeScores{n}",
        rationale=(str, Field(json_schema_extra={"maxLength": 300})),
        scores=(list[Score20], Field(min_length=n, max_length=n)),
    )


SYSTEM = f"""You are a demanding critic of creative writing. Score the piece in <response>, written for \
the prompt in <question>, on each numbered criterion with an integer from 0 to 20: 0 means the quality is \
absent, 20 means it is strongly present. Criteria marked (flaw) name faults: for them a high score means \
the fault is strongly present. Be sparing: competent but unremarkable writing sits mid-scale. Give one \
short overall rationale, then the scores in the order of the criteria. {UNTRUSTED_NOTE}"""


def grader_messages(question: Question, response: str, items: tuple[GoldItem, ...]) -> list[Message]:
    listing = "\n".join(f"{k + 1}. {i.text}" + (" (flaw)" if i.extra.get("negative") else "")
                        for k, i in enumerate(items))
    return [
        Message("system", SYSTEM),
        Message("user", f"{question_block(question)}\n\n{data_block('response', response)}\n\n"
                        f"Criteria:\n{listing}\n\nReturn JSON with the fields rationale and scores "
                        f"(a list of {len(items)} integers, one per criterion in order)."),
    ]


async def grade_eqbench_cw(lm: LM, question: Question, response: str, *,
                           params: GenParams | None = None) -> GradeResult:
    items = gold_items(question, SCHEME)
    out = await ask(lm, grader_messages(question, response, items), scores_schema(len(items)),
                    role=role_name(SCHEME), params=params or PARAMS)
    if isinstance(out, LMError):
        grades = [ItemGrade.failed(k, it.text, 1.0, out) for k, it in enumerate(items)]
        rationale = ""
    else:
        scores: list[int] = out.scores  # type: ignore[attr-defined]
        rationale = out.rationale  # type: ignore[attr-defined]
        grades = [ItemGrade(index=k, criterion=it.text, value=float(s)) for k, (it, s) in
                  enumerate(zip(items, scores, strict=True))]

    def compute(scored: list[ItemGrade]) -> tuple[float | None, dict[str, Any]]:
        negative = [bool(items[g.index].extra.get("negative")) for g in scored]
        return rules.eqbench_score([g.value for g in scored if g.value is not None], negative), {
            "rationale": rationale}

    return conclude(question.id, SCHEME, grades, POLICY, compute)
