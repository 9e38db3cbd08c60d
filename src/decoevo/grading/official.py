"""Calling a grader with a benchmark's official prompt: a plain request (no response format, as the
official scorer sends it) whose reply is parsed the way the official scorer parses it.

The official scorers ask again when a reply does not parse (some without end); here a reply that does
not parse is asked for again `retries` times as a fresh sample, and then the item is unknown with a
parse error, never a score.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import replace
from typing import TypeVar

from ..lm import LM, GenParams, LMError, Message
from ..lm.structured import unusable_reply
from .base import GRADE_RETRIES, RETRY_INDEX_STRIDE

T = TypeVar("T")


async def ask_text(
    lm: LM,
    messages: list[Message],
    parse: Callable[[str], T],
    *,
    role: str,
    params: GenParams,
    retries: int = GRADE_RETRIES,
) -> T | LMError:
    """`parse(reply)` of the first reply that parses (parse raises ValueError otherwise), or the error."""
    problem, last = "", ""
    for retry in range(retries + 1):
        try:
            # the official scorers repeat the same request: a new sample (cache key, seed) at their temperature
            again = replace(params, sample_index=params.sample_index + RETRY_INDEX_STRIDE * retry)
            result = await lm.complete(messages, role=role, params=again)
        except LMError as exc:
            return exc
        try:
            return parse(result.text)
        except ValueError as exc:
            problem, last = str(exc), result.text
    model = lm.model_for(role)
    error = unusable_reply(
        role, model, last,
        f"{role}: no reply parsed as the official scorer parses it after {retries + 1} attempt(s): {problem}")
    lm.ledger.record_failure(role, model, error.category)
    return error


def fill(template: str, fields: dict[str, str]) -> str:
    """Fill the `<<name>>` placeholders of a prompt read from an f-string in one pass, as the f-string
    does: a value that itself contains `<<...>>` is never filled again."""
    return re.sub(r"<<(\w+)>>", lambda m: fields.get(m.group(1), m.group(0)), template)
