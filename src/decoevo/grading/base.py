"""Machinery shared by the graders: calling a grader role without letting a failure become a score,
and grading a rubric one criterion per call."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, TypeVar

from pydantic import BaseModel

from ..domain import GoldItem, Question
from ..lm import LM, GenParams, LMError, Message
from ..lm.errors import ConfigError
from ..roles.common import own_verdict
from .result import GradeResult, ItemGrade, UnknownPolicy, conclude

T = TypeVar("T", bound=BaseModel)

# Per-criterion verdicts are a short rationale plus a small integer; 200 tokens leaves room for both.
ITEM_PARAMS = GenParams(temperature=0.0, max_tokens=200)
RATIONALE_MAX = 160


def role_name(scheme: str) -> str:
    """The LM role a benchmark's grader calls; map it to its own model with `LMConfig.roles`."""
    return f"grader_{scheme}"


def gold_items(question: Question, scheme: str) -> tuple[GoldItem, ...]:
    if question.gold is None or question.gold.scheme != scheme:
        got = question.gold.scheme if question.gold else "no gold rubric"
        raise ConfigError(f"question {question.id}: the {scheme} grader needs a '{scheme}' gold rubric, got {got}")
    return question.gold.items


async def ask(lm: LM, messages: list[Message], schema: type[T], *, role: str, params: GenParams) -> T | LMError:
    """The validated verdict, or the typed error the LM raised after its bounded repair (or for a verdict
    copied from the material). Anything else (a budget stop, a bug) propagates."""
    try:
        return await own_verdict(lm, messages, schema, role=role, params=params)
    except LMError as exc:
        return exc


async def grade_per_item(
    lm: LM, question: Question, scheme: str, *, schema: type[T], params: GenParams | None,
    messages: Callable[[GoldItem], list[Message]], value: Callable[[T], float], policy: UnknownPolicy,
    compute: Callable[[list[ItemGrade]], tuple[float | None, dict[str, Any]]],
) -> GradeResult:
    """One grader call per gold criterion, concurrently (the LM bounds in-flight requests)."""
    items = gold_items(question, scheme)
    role = role_name(scheme)
    outs = await asyncio.gather(*[ask(lm, messages(it), schema, role=role, params=params or ITEM_PARAMS)
                                  for it in items])
    grades = [
        ItemGrade.failed(k, it.text, it.points, out) if isinstance(out, LMError)
        else ItemGrade(index=k, criterion=it.text, points=it.points, value=value(out),
                       rationale=str(getattr(out, "rationale", "")))
        for k, (it, out) in enumerate(zip(items, outs, strict=True))
    ]
    return conclude(question.id, scheme, grades, policy, compute)
