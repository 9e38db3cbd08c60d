"""Turning a server's chat message into a Completion: the one place that decides whether a reply
has an answer at all. Shared by every backend, so no backend can score a missing answer as ""."""

from __future__ import annotations

import re
from typing import Any

from .errors import EmptyReplyError
from .types import Completion


def no_answer_hint(max_tokens: int, finish_reason: str) -> str:
    if finish_reason == "length":
        return (f"it stopped at the token limit (max_tokens={max_tokens}) before any answer text; a reasoning "
                f"model spends tokens thinking first: raise max_tokens (e.g. to {max(4 * max_tokens, 2048)}) "
                "or lower reasoning_effort")
    return f"finish_reason was '{finish_reason}'; check that the model answers in plain chat content"


# A leading reasoning block: `<think>...</think>` (Qwen3, DeepSeek-R1 and kin); some chat templates open
# the tag in the prompt, so the reply holds only the closing one. Only a block at the start is reasoning:
# an answer may mention the tag later.
_OPEN = re.compile(r"^\s*<(think|thinking|reasoning)>", re.IGNORECASE)


def split_reasoning(content: str) -> tuple[str, str]:
    """(answer, reasoning) of a reply's content. An opened block that never closes (the token limit hit
    mid-thought) is all reasoning."""
    if "</" not in content and "<" not in content[:64]:
        return content, ""  # the common case: no tag at all
    opened = _OPEN.match(content)
    tag = opened.group(1).lower() if opened else "think"
    close = re.search(rf"</{tag}>", content, re.IGNORECASE)
    if close is None:
        return ("", content[opened.end():]) if opened else (content, "")
    if not opened and content.lower().count("<think>") > 0:
        return content, ""  # a closing tag after an opening one elsewhere: not a leading block
    start = opened.end() if opened else 0
    return content[close.end():].lstrip(), content[start:close.start()]


def completion_from_message(message: dict[str, Any], usage: dict[str, Any], finish_reason: str,
                            max_tokens: int, *, whole_content: bool = False) -> Completion:
    """A Completion from an OpenAI-style `message` and `usage`. A null content, or an empty one cut at
    the token limit, is an EmptyReplyError with a hint, never an empty answer. With `whole_content` the
    text is the content as sent, a leading reasoning block included (GenParams.whole_content)."""
    content = message.get("content")
    if content is not None and not isinstance(content, str):
        raise TypeError(f"message content is {type(content).__name__}, not a string")
    side = message.get("reasoning_content") or message.get("reasoning") or ""
    if not isinstance(side, str):
        raise TypeError(f"message reasoning is {type(side).__name__}, not a string")
    answer, inline = split_reasoning(content) if content else (content, "")
    if whole_content and content is not None and content.strip():
        answer = content
    if answer is None or (not answer.strip() and (finish_reason == "length" or inline)):
        what = "no content (null)" if content is None else "no answer after its reasoning" if inline \
            else "empty content"
        raise EmptyReplyError(f"the model returned {what}: {no_answer_hint(max_tokens, finish_reason)}")
    details = usage.get("completion_tokens_details")
    return Completion(
        text=answer,
        prompt_tokens=token_count(usage, "prompt_tokens"),
        completion_tokens=token_count(usage, "completion_tokens"),
        finish_reason=finish_reason,
        reasoning_chars=len(side) + len(inline),
        reasoning_tokens=token_count(details, "reasoning_tokens") if isinstance(details, dict) else 0,
    )


def token_count(usage: dict[str, Any], name: str) -> int:
    """A usage count; a negative, fractional-infinite or non-numeric one is a malformed reply (ValueError),
    since budgets add these numbers up."""
    value = usage.get(name) or 0
    if (isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < 2**53
            or value != int(value)):  # a fraction of a token is a broken count, not a rounding matter
        raise ValueError(f"usage.{name} is {value!r}, not a token count")
    return int(value)
