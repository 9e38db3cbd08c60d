"""Machinery shared by the graders: calling a grader role without letting a failure become a score,
and grading a rubric one criterion per call."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any, TypeVar

from pydantic import BaseModel

from ..aio import gather_all
from ..domain import GoldItem, Question
from ..lm import LM, GenParams, LMError, Message, ParseError
from ..lm.errors import ConfigError
from ..roles.common import own_verdict
from .result import GradeResult, ItemGrade, UnknownPolicy, conclude

T = TypeVar("T", bound=BaseModel)

# Per-criterion verdicts are a short rationale plus a small integer; 200 tokens leaves room for both.
ITEM_PARAMS = GenParams(temperature=0.0, max_tokens=200)
RATIONALE_MAX = 160
# A grader output that stays unparseable after the LM's own repairs is asked for again, this many times, as a
# fresh sample; only then is the criterion unknown (an ungraded question drops out of every comparison).
GRADE_RETRIES = 2
RETRY_INDEX_STRIDE = 10_000  # past the LM's repair offsets (1000 per repair): a retry never replays a repair


def role_name(scheme: str) -> str:
    """The LM role a benchmark's grader calls; map it to its own model with `LMConfig.roles`."""
    return f"grader_{scheme}"


def gold_items(question: Question, scheme: str) -> tuple[GoldItem, ...]:
    if question.gold is None or question.gold.scheme != scheme:
        got = question.gold.scheme if question.gold else "no gold rubric"
        raise ConfigError(f"question {question.id}: the {scheme} grader needs a '{scheme}' gold rubric, got {got}")
    return question.gold.items


def retry_params(params: GenParams, retry: int) -> GenParams:
    """Sampling for grader retry number `retry` (1-based): a new sample index (a new cache key and backend
    seed) and a little temperature, since a greedy grader asked again would repeat its unparseable answer."""
    return replace(params, sample_index=params.sample_index + RETRY_INDEX_STRIDE * retry,
                   temperature=max(params.temperature, 0.3))


async def ask(lm: LM, messages: list[Message], schema: type[T], *, role: str, params: GenParams,
              retries: int = GRADE_RETRIES) -> T | LMError:
    """The validated verdict, or the typed error the LM raised after its bounded repair (or for a verdict
    copied from the material). A parse failure is retried `retries` times as a new sample first; a refusal
    or an infrastructure failure is not (asking again does not change either). Anything else (a budget
    stop, a bug) propagates."""
    unparsed: ParseError | None = None
    for retry in range(retries + 1):
        try:
            return await own_verdict(lm, messages, schema, role=role,
                                     params=retry_params(params, retry) if retry else params)
        except ParseError as exc:
            unparsed = exc
        except LMError as exc:
            return exc
    assert unparsed is not None  # every attempt ended in a parse failure
    return unparsed


async def grade_per_item(
    lm: LM, question: Question, scheme: str, *, schema: type[T], params: GenParams | None,
    messages: Callable[[GoldItem], list[Message]], value: Callable[[T], float], policy: UnknownPolicy,
    compute: Callable[[list[ItemGrade]], tuple[float | None, dict[str, Any]]],
) -> GradeResult:
    """One grader call per gold criterion, concurrently (the LM bounds in-flight requests)."""
    items = gold_items(question, scheme)
    role = role_name(scheme)
    outs = await gather_all(*[ask(lm, messages(it), schema, role=role, params=params or ITEM_PARAMS)
                                  for it in items])
    grades = [
        ItemGrade.failed(k, it.text, it.points, out) if isinstance(out, LMError)
        else ItemGrade(index=k, criterion=it.text, points=it.points, value=value(out),
                       rationale=str(getattr(out, "rationale", "")))
        for k, (it, out) in enumerate(zip(items, outs, strict=True))
    ]
    return conclude(question.id, scheme, grades, policy, compute)
