"""Turning model text into a validated object, and the messages that ask for a repair."""

from __future__ import annotations

import functools
import json
import re
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from .errors import ParseError, RefusalError
from .types import Message

T = TypeVar("T", bound=BaseModel)

_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL)
_REFUSAL = re.compile(
    r"^\s*(?:i'?m sorry|i am sorry|i can(?:'|no)t (?:help|assist|comply)|i cannot (?:help|assist|comply)|"
    r"i won'?t (?:help|assist)|as an ai\b)",
    re.IGNORECASE,
)


# strict=False accepts raw control characters (newlines, tabs) inside strings: grammar-constrained
# decoders emit them, and they change no value.
_DECODER = json.JSONDecoder(strict=False)


def extract_json(text: str) -> Any:
    """Parse the JSON value in `text`: the whole text, a fenced block, or the first balanced object.
    Raises ValueError when there is none; never guesses a value."""
    stripped = text.strip()
    candidates = [stripped]
    candidates += [m.group(1).strip() for m in _FENCE.finditer(text)]
    start = stripped.find("{")
    if start >= 0:
        try:
            obj, _ = _DECODER.raw_decode(stripped[start:])
            return obj
        except json.JSONDecodeError:
            pass
    for cand in candidates:
        try:
            return _DECODER.decode(cand)
        except json.JSONDecodeError:
            continue
    raise ValueError("no JSON object found in the output")


def parse_structured(text: str, schema: type[T]) -> T:
    """Validate `text` against `schema`. Raises ValueError with a message fit for a repair prompt."""
    data = extract_json(text)
    try:
        return schema.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or '(root)'}: {e['msg']}" for e in exc.errors()[:8]
        )
        raise ValueError(f"the JSON does not match the schema: {problems}") from None


def looks_like_refusal(text: str) -> bool:
    return bool(_REFUSAL.match(text))


def unusable_reply(role: str, model: str, text: str, parse_problem: str) -> RefusalError | ParseError:
    """The error for an answer that never parsed: a refusal when it reads like one, else a parse error
    carrying `parse_problem` and the raw text."""
    if looks_like_refusal(text):
        return RefusalError(f"{role}: the model declined: {text[:200]!r}", role=role, model=model)
    return ParseError(parse_problem, raw=text, role=role, model=model)


@functools.lru_cache(maxsize=512)
def schema_for(model: type[BaseModel]) -> dict[str, Any]:
    """The model's JSON schema, built once per class (pydantic rebuilds it on every call, which cost a
    third of a millisecond per structured request). Shared: treat the result as read-only."""
    return model.model_json_schema()


def without_length_caps(schema: Any) -> Any:
    """The schema with no string length caps (maxLength), as servers get it. Grammar-enforcing servers
    (vLLM, SGLang, llama.cpp) cut a string at its maxLength mid-sentence, and llama.cpp's server turns
    long caps into grammars it cannot parse; caps are checked after decoding instead. Small minimum
    lengths stay: they cost a grammar nothing and stop a small model from answering with empty strings."""
    if isinstance(schema, dict):
        return {k: without_length_caps(v) for k, v in schema.items() if k != "maxLength"}
    if isinstance(schema, list):
        return [without_length_caps(v) for v in schema]
    return schema


def repair_messages(
    messages: tuple[Message, ...], bad_output: str, problem: str, schema: dict[str, Any]
) -> tuple[Message, ...]:
    """The original conversation, the rejected answer, and a request to answer again correctly."""
    shown = bad_output if len(bad_output) <= 4000 else bad_output[:4000] + " [truncated]"
    instruction = (
        f"That reply could not be used: {problem}. Answer again with one JSON object only, no prose, "
        f"that follows this JSON schema exactly:\n{json.dumps(schema, ensure_ascii=False)}"
    )
    return (*messages, Message("assistant", shown), Message("user", instruction))
