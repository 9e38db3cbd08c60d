"""What a reply means: no content is a typed failure (never an answer scored as ""), a reply cut at
the token limit is flagged, and reasoning text never reaches a role."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from decoevo.lm import FailureCategory, Message
from decoevo.lm.errors import EmptyReplyError, ParseError
from decoevo.testing.fake_openai import FakeOpenAI, Reply
from decoevo.testing.server import serve_app

pytest.importorskip("uvicorn")


class Answer(BaseModel):
    answer: str


@pytest.mark.parametrize(("content", "finish"), [(None, "length"), (None, "stop"), ("", "length"), ("  ", "length")])
async def test_a_reply_without_content_is_a_failure_with_a_hint(cache, openai_lm, content, finish):
    server = FakeOpenAI(lambda body, n: Reply(content=content, finish_reason=finish))
    with serve_app(server.app()) as url:
        lm = openai_lm(url, cache)
        with pytest.raises(EmptyReplyError) as info:
            await lm.complete([Message("user", "q")], role="solve")
    err = info.value
    assert err.category == FailureCategory.EMPTY and isinstance(err, ParseError)  # a step failure, not a score
    assert err.role == "solve"
    if finish == "length":
        assert "raise max_tokens" in str(err) and "max_tokens=512" in str(err)
    assert len(server.requests) == 1  # not retried: the same request would run out the same way
    row = lm.ledger.rows[("solve", "default")]
    assert row.failures["empty"] == 1 and row.calls == 0
    assert len(cache) == 0  # nothing cached: a later call with more tokens is a new request anyway


async def test_a_structured_call_without_content_is_not_repaired_into_an_answer(cache, openai_lm):
    server = FakeOpenAI(lambda body, n: Reply(content=None, finish_reason="length"))
    with serve_app(server.app()) as url:
        lm = openai_lm(url, cache)
        with pytest.raises(EmptyReplyError):
            await lm.complete([Message("user", "q")], role="judge", schema=Answer)
    assert len(server.requests) == 1


async def test_an_empty_answer_that_stopped_normally_is_still_an_answer(cache, openai_lm):
    server = FakeOpenAI(lambda body, n: Reply(content="", finish_reason="stop"))
    with serve_app(server.app()) as url:
        lm = openai_lm(url, cache)
        result = await lm.complete([Message("user", "q")], role="solve")
    assert result.text == ""


@pytest.mark.parametrize("usage", [{"prompt_tokens": -5, "completion_tokens": 3},
                                   {"prompt_tokens": 1e300, "completion_tokens": 3},
                                   {"prompt_tokens": "many", "completion_tokens": 3}])
async def test_impossible_usage_is_a_malformed_reply(cache, openai_lm, usage):
    server = FakeOpenAI(lambda body, n: Reply(content="ok", usage=usage))
    with serve_app(server.app()) as url:
        lm = openai_lm(url, cache, max_retries=0)
        with pytest.raises(Exception, match=r"malformed response body.*not a token count"):
            await lm.complete([Message("user", "q")], role="solve")
    assert lm.ledger.total().tokens == 0
