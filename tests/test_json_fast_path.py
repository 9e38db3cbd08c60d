"""The JSON written and read on every paid call goes through pydantic-core's encoder and parser (issue 47.1);
what they write and read must be what the standard library writes and reads, on any value, hostile text
included: a line the run's readers parse differently, a NaN turned into null, or a secret escaped otherwise
than the masking expects would be silent damage."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from decoevo.lm.openai_backend import _BODY_TEXT, body_bytes, parse_json
from decoevo.rundir.files import dumps_json_line, dumps_line

# Any text: lone surrogates, control characters, U+2028, non-BMP, quotes and backslashes.
TEXT = st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=0x10FFFF, exclude_categories=()), max_size=40)
SCALARS = (st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70)
           | st.floats(allow_nan=True, allow_infinity=True) | TEXT)
NATIVE = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
                      max_leaves=20)


def canonical(value: Any) -> str:
    """A parsed value as comparable text: NaN equals NaN here, and -0.0 differs from 0.0."""
    return json.dumps(value, ensure_ascii=True, sort_keys=False)


def parsed(line: str) -> Any:
    return json.loads(line.encode("utf-8", "surrogatepass"))


@settings(max_examples=400, deadline=None)
@given(NATIVE)
def test_a_fast_line_holds_the_value_the_standard_line_holds(value: Any) -> None:
    fast, slow = dumps_json_line(value), dumps_line(value)
    assert "\n" not in fast and "\r" not in fast  # one line of a JSONL file
    assert canonical(parsed(fast)) == canonical(parsed(slow))


@settings(max_examples=400, deadline=None)
@given(TEXT)
def test_a_string_is_escaped_as_the_standard_library_escapes_it(text: str) -> None:
    """The masking reads the line's text: a secret inside a string must read the same in both encodings."""
    assert dumps_json_line(text) == dumps_line(text)


def test_non_finite_numbers_are_written_as_the_standard_library_writes_them() -> None:
    line = dumps_json_line({"a": math.nan, "b": [math.inf, -math.inf]})
    assert line == '{"a":NaN,"b":[Infinity,-Infinity]}'  # never null: a float field read back as None breaks
    value = parsed(line)
    assert math.isnan(value["a"]) and value["b"] == [math.inf, -math.inf]


def test_a_lone_surrogate_is_escaped_not_a_crash() -> None:
    line = dumps_json_line({"reply": "half \ud83d of a pair"})
    assert line == dumps_line({"reply": "half \ud83d of a pair"})
    assert parsed(line) == {"reply": "half \ud83d of a pair"}


BODY_TEXT = st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=0x10FFFF, exclude_categories=("Cs",)),
                    max_size=60)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.fixed_dictionaries({"role": st.sampled_from(["system", "user"]), "content": BODY_TEXT}),
                min_size=1, max_size=3),
       st.floats(min_value=0, max_value=2), st.integers(0, 2**31))
def test_a_request_body_is_the_standard_librarys_text(messages: list[dict[str, str]], temperature: float,
                                                       seed: int) -> None:
    body = {"model": "m", "messages": messages, "temperature": temperature, "max_tokens": 64, "seed": seed}
    fast, slow = body_bytes(body), _BODY_TEXT.encode(body).encode("utf-8")
    assert json.loads(fast) == json.loads(slow)
    without_float = {k: v for k, v in body.items() if k != "temperature"}  # a float may be spelt otherwise
    assert body_bytes(without_float) == _BODY_TEXT.encode(without_float).encode("utf-8")


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_a_body_with_a_non_finite_parameter_is_refused(bad: float) -> None:
    with pytest.raises(ValueError):
        body_bytes({"model": "m", "messages": [], "temperature": bad})


def test_a_body_with_a_lone_surrogate_fails_as_before() -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": "x\udc80"}]}
    with pytest.raises(UnicodeEncodeError):
        _BODY_TEXT.encode(body).encode("utf-8")
    with pytest.raises(UnicodeEncodeError):
        body_bytes(body)


def _same_parse(raw: bytes) -> None:
    try:
        expected: Any = ("ok", canonical(json.loads(raw)))
    except (ValueError, UnicodeDecodeError) as exc:
        expected = ("error", type(exc))
    try:
        got: Any = ("ok", canonical(parse_json(raw)))
    except (ValueError, UnicodeDecodeError) as exc:
        got = ("error", type(exc))
    assert got == expected


@settings(max_examples=400, deadline=None)
@given(NATIVE, st.booleans())
def test_a_reply_body_parses_as_the_standard_library_parses_it(value: Any, ascii_only: bool) -> None:
    _same_parse(json.dumps(value, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass"))


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=40) | st.sampled_from([b"\xef\xbb\xbf{\"a\": 1}", '{"a": "\u00e9"}'.encode("utf-16"),
                                                 b'{"a": 1} trailing', b'{"a": "\\ud800"}', b'{"a":1,"a":2}',
                                                 b'[1e400, -0.0, 0.1]', b'  {"a": NaN}  ']))
def test_any_reply_bytes_parse_or_fail_as_the_standard_library_does(raw: bytes) -> None:
    _same_parse(raw)


SECRETS = ["sk-test-9f8e7d6c5b4a39281706", "clé-secrète-ünï cødé-7f3a9b"]  # neither holds a JSON escape


@settings(max_examples=300, deadline=None)
@given(NATIVE, st.data(), st.sampled_from(SECRETS))
def test_a_secret_anywhere_in_a_reply_body_is_found_by_the_one_scan(value: Any, data: st.DataObject,
                                                                     secret: str) -> None:
    """`mask_tree` decides from one encoded text whether a body holds a secret (redact.py): a secret planted in
    any string or key of any body must be masked, and a body without one returned as the very object."""
    from decoevo import redact

    saved = redact._known
    redact._known = ()  # other tests register hostile secrets, which send every body down the walk
    try:
        clean = redact.mask_tree(value, [secret])
        if secret[:redact.PARTIAL] not in json.dumps(value, ensure_ascii=False):
            assert clean is value
        prefix, suffix = data.draw(TEXT), data.draw(TEXT)
        planted = {prefix + secret + suffix: [value, prefix + secret[:redact.PARTIAL + 2] + suffix]}
        masked = redact.mask_tree(planted, [secret])
        assert secret[:redact.PARTIAL] not in json.dumps(masked, ensure_ascii=False)
    finally:
        redact._known = saved


@pytest.mark.parametrize("secret", SECRETS)
def test_a_secret_beside_a_lone_surrogate_is_masked(secret: str) -> None:
    """pydantic-core refuses a lone surrogate: that body is checked string by string, never passed as clean."""
    from decoevo import redact

    body = {"choices": [{"message": {"content": f"half \ud83d a pair, and {secret}"}}]}
    masked = redact.mask_tree(body, [secret])
    assert masked["choices"][0]["message"]["content"] == f"half \ud83d a pair, and {redact.MASK}"
