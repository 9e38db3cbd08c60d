"""Turning a server's chat message into a Completion: the one place that decides whether a reply
has an answer at all. Shared by every backend, so no backend can score a missing answer as ""."""

from __future__ import annotations

from typing import Any

from .errors import EmptyReplyError
from .types import Completion


def no_answer_hint(max_tokens: int, finish_reason: str) -> str:
    if finish_reason == "length":
        return (f"it stopped at the token limit (max_tokens={max_tokens}) before any answer text; a reasoning "
                f"model spends tokens thinking first: raise max_tokens (e.g. to {max(4 * max_tokens, 2048)}) "
                "or lower reasoning_effort")
    return f"finish_reason was '{finish_reason}'; check that the model answers in plain chat content"


def completion_from_message(message: dict[str, Any], usage: dict[str, Any], finish_reason: str,
                            max_tokens: int) -> Completion:
    """A Completion from an OpenAI-style `message` and `usage`. A null content, or an empty one cut at
    the token limit, is an EmptyReplyError with a hint, never an empty answer."""
    content = message.get("content")
    if content is not None and not isinstance(content, str):
        raise TypeError(f"message content is {type(content).__name__}, not a string")
    if content is None or (not content.strip() and finish_reason == "length"):
        what = "no content (null)" if content is None else "empty content"
        raise EmptyReplyError(f"the model returned {what}: {no_answer_hint(max_tokens, finish_reason)}")
    return Completion(
        text=content,
        prompt_tokens=token_count(usage, "prompt_tokens"),
        completion_tokens=token_count(usage, "completion_tokens"),
        finish_reason=finish_reason,
    )


def token_count(usage: dict[str, Any], name: str) -> int:
    """A usage count; a negative, fractional-infinite or non-numeric one is a malformed reply (ValueError),
    since budgets add these numbers up."""
    value = usage.get(name) or 0
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < 2**53:
        raise ValueError(f"usage.{name} is {value!r}, not a token count")
    return int(value)
