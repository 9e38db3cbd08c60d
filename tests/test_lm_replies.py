"""What a reply means: no content is a typed failure (never an answer scored as ""), a reply cut at
the token limit is flagged, and reasoning text never reaches a role."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from decoevo.lm import FailureCategory, Message
from decoevo.lm.errors import EmptyReplyError, ParseError
from decoevo.lm.reply import split_reasoning
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


# ---- truncation and reasoning -------------------------------------------------------------------


@pytest.mark.parametrize(("content", "answer", "reasoning"), [
    ("<think>step 1\nstep 2</think>\n\nParis.", "Paris.", "step 1\nstep 2"),
    ("  <THINKING>hmm</THINKING>Paris.", "Paris.", "hmm"),
    ("the template opened it</think>Paris.", "Paris.", "the template opened it"),
    ("<think>never closed because the limit hit", "", "never closed because the limit hit"),
    ("Paris. (Models write <think> tags first.)", "Paris. (Models write <think> tags first.)", ""),
    ("Use <think> then </think> in prompts.", "Use <think> then </think> in prompts.", ""),
    ("plain answer", "plain answer", ""),
])
def test_split_reasoning(content, answer, reasoning):
    assert split_reasoning(content) == (answer, reasoning)


async def test_reasoning_is_stripped_before_any_role_sees_it_and_counted(cache, openai_lm):
    usage = {"prompt_tokens": 12, "completion_tokens": 90, "completion_tokens_details": {"reasoning_tokens": 70}}
    replies = [Reply(content='<think>the user wants JSON</think>{"answer": "42"}', usage=usage),
               Reply(content="Paris.", reasoning_content="Let me recall capitals.", usage=usage)]
    server = FakeOpenAI(lambda body, n: replies[n])
    records = []
    with serve_app(server.app()) as url:
        lm = openai_lm(url, cache)
        lm.on_call = records.append
        first = await lm.complete([Message("user", "q")], role="judge", schema=Answer)
        second = await lm.complete([Message("user", "capital?")], role="solve")
    assert first.value == Answer(answer="42") and first.text == '{"answer": "42"}'
    assert second.text == "Paris." and second.reasoning_tokens == 70
    total = lm.ledger.total()
    stripped = len("the user wants JSON") + len("Let me recall capitals.")
    assert (total.reasoning_tokens, total.reasoning_chars) == (140, stripped)
    assert [r.reasoning_tokens for r in records] == [70, 70]


async def test_only_reasoning_before_the_limit_is_an_empty_reply(cache, openai_lm):
    server = FakeOpenAI(lambda body, n: Reply(content="<think>still thinking about", finish_reason="length"))
    with serve_app(server.app()) as url:
        lm = openai_lm(url, cache)
        with pytest.raises(EmptyReplyError, match=r"no answer after its reasoning.*raise max_tokens"):
            await lm.complete([Message("user", "q")], role="solve")


async def test_a_reply_cut_by_max_tokens_is_flagged_in_the_result_the_record_and_the_ledger(cache, openai_lm):
    server = FakeOpenAI(lambda body, n: Reply(content="The answer is that", finish_reason="length"))
    records = []
    with serve_app(server.app()) as url:
        lm = openai_lm(url, cache)
        lm.on_call = records.append
        paid = await lm.complete([Message("user", "q")], role="solve")
        replayed = await lm.complete([Message("user", "q")], role="solve")
    assert paid.truncated and paid.text == "The answer is that"
    assert replayed.cached and replayed.truncated  # the cache keeps finish_reason
    assert [(r.cached, r.truncated) for r in records] == [(False, True), (True, True)]
    assert lm.ledger.rows[("solve", "default")].truncated == 1  # paid replies only


def test_the_embedded_backend_applies_the_same_rules(tmp_path):
    """The local backend builds its Completion with the same function: no content is an EmptyReplyError,
    reasoning is stripped (a GGUF reasoning model writes <think> blocks too)."""
    from decoevo.lm import GenParams, ModelSpec
    from decoevo.lm.local import LocalBackend
    from decoevo.lm.types import BackendRequest

    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    replies = iter([{"content": None}, {"content": "<think>hmm</think>Paris."}])

    class FakeLlama:
        def create_chat_completion(self, **kwargs):
            return {"choices": [{"message": next(replies), "finish_reason": "length"}],
                    "usage": {"prompt_tokens": 3, "completion_tokens": 8}}

    backend = LocalBackend(ModelSpec(gguf_path=str(gguf)))
    backend._llama = FakeLlama()
    request = BackendRequest("default", (Message("user", "q"),), GenParams(max_tokens=8))
    with pytest.raises(EmptyReplyError, match="raise max_tokens"):
        backend._run(request)
    done = backend._run(request)
    assert done.text == "Paris." and done.truncated and done.reasoning_chars == 3
