"""A request's cache key is the sha256 of its JSON text; the text is now assembled from pydantic-core's strings
(lm/cache.py, issue 47.1). A key that changed would pay again for every answer a user's cache holds: it must
be the standard library's text exactly, for any prompt, parameters and schema."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from decoevo.lm.cache import request_key
from decoevo.lm.types import BackendRequest, GenParams, Message

ANY_TEXT = st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=0x10FFFF, exclude_categories=()), max_size=50)
JSON_LEAF = st.none() | st.booleans() | st.integers() | st.floats() | ANY_TEXT
SCHEMA = st.none() | st.recursive(st.dictionaries(ANY_TEXT, JSON_LEAF, max_size=3),
                                  lambda inner: st.dictionaries(ANY_TEXT, inner | st.lists(inner, max_size=2),
                                                                max_size=3), max_leaves=8)


def reference_key(identity: str, request: BackendRequest) -> str:
    """The key as every earlier version made it: the standard library's sorted, compact text of the payload."""
    payload: dict[str, Any] = {"model": identity, "messages": [m.as_dict() for m in request.messages],
                               "temperature": request.params.temperature, "max_tokens": request.params.max_tokens,
                               "seed": request.params.seed, "sample_index": request.params.sample_index,
                               "schema": request.json_schema}
    if request.params.min_p is not None:
        payload["min_p"] = request.params.min_p
    if request.params.whole_content:
        payload["whole_content"] = True
    text = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def outcome(make: Any, identity: str, request: BackendRequest) -> Any:
    try:
        return make(identity, request)
    except (UnicodeEncodeError, TypeError, ValueError) as exc:  # a lone surrogate: refused as before
        return type(exc)


@settings(max_examples=500, deadline=None)
@given(identity=ANY_TEXT,
       messages=st.lists(st.builds(Message, role=st.sampled_from(["system", "user", "assistant"]), content=ANY_TEXT),
                         max_size=4),
       temperature=st.floats(), max_tokens=st.integers(min_value=-5, max_value=2**40), seed=st.integers(),
       sample_index=st.integers(min_value=0, max_value=50), min_p=st.none() | st.floats(),
       whole_content=st.booleans(), schema=SCHEMA)
def test_the_key_is_the_standard_librarys_for_any_request(identity: str, messages: list[Message], temperature: float,
                                                         max_tokens: int, seed: int, sample_index: int,
                                                         min_p: float | None, whole_content: bool,
                                                         schema: dict[str, Any] | None) -> None:
    params = GenParams(temperature=temperature, max_tokens=max_tokens, seed=seed, sample_index=sample_index,
                       min_p=min_p, whole_content=whole_content)
    request = BackendRequest(model="m", messages=tuple(messages), params=params, json_schema=schema)
    assert outcome(request_key, identity, request) == outcome(reference_key, identity, request)


def test_a_known_key_is_unchanged() -> None:
    """One key written down when it was made: every version must make the same, or caches stop hitting."""
    request = BackendRequest(model="m", messages=(Message("system", "Be brief. «é» \u2028 \"q\" \\ \x01"),
                                                  Message("user", "What is 2+2?")),
                             params=GenParams(temperature=0.7, max_tokens=64, seed=3, sample_index=1),
                             json_schema={"type": "object", "properties": {"b": {"type": "integer"}, "a": {}}})
    assert request_key("openai:toy@http://127.0.0.1", request) == reference_key("openai:toy@http://127.0.0.1", request)
    assert request_key("openai:toy@http://127.0.0.1", request) == KNOWN


KNOWN = "89759885a29fdb30a5aeae316af1d3a514948e21219ff4e8a6bb3ee256b42812"  # made by 7e19cbc


def test_a_max_tokens_that_is_no_int_cannot_move_where_the_messages_go() -> None:
    """The messages are put where the payload's text holds `"messages":0`; only max_tokens sorts before it, and
    a max_tokens that is not an int (a configuration gone wrong) must not move them."""
    for hostile in ({"messages": 0}, [{"messages": 0}], '"messages":0', True, 512.0):
        request = BackendRequest(model="m", messages=(Message("user", "hi"),),
                                 params=GenParams(max_tokens=hostile))  # type: ignore[arg-type]
        assert request_key("i", request) == reference_key("i", request)


def test_a_lone_surrogate_in_a_prompt_fails_as_it_always_did() -> None:
    request = BackendRequest(model="m", messages=(Message("user", "half \ud83d a pair"),), params=GenParams())
    assert outcome(request_key, "i", request) is outcome(reference_key, "i", request) is UnicodeEncodeError
