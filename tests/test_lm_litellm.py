"""The optional LiteLLM backend against a fake OpenAI-wire server on 127.0.0.1 (LiteLLM's `openai/`
provider with an api_base): our cache, ledger, retries, parsing and redaction around its call."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from decoevo.lm import LM, InfrastructureError, LMConfig, Message, ModelSpec
from decoevo.lm.errors import EmptyReplyError
from decoevo.testing.fake_anthropic import AnthropicReply, FakeAnthropic
from decoevo.testing.fake_openai import FakeOpenAI, Reply
from decoevo.testing.server import serve_app

pytest.importorskip("litellm")
pytest.importorskip("uvicorn")
pytestmark = pytest.mark.filterwarnings("ignore:Items? .*ReadOnly:UserWarning")  # LiteLLM's own typing

KEY = "sk-litellm-test-0123456789abcdef"


class Answer(BaseModel):
    answer: str


@pytest.fixture
async def litellm_lm(monkeypatch, cache):
    monkeypatch.setenv("DECOEVO_TEST_KEY", KEY)
    made: list[LM] = []

    def make(url: str, **kwargs) -> LM:
        spec = ModelSpec(backend="litellm", model="openai/fake", base_url=f"{url}/v1", api_key_env="DECOEVO_TEST_KEY",
                         backoff_base_s=0.01, **kwargs)
        made.append(LM(LMConfig(models={"default": spec}), cache=cache))
        return made[-1]

    yield make
    for lm in made:
        await lm.aclose()


async def test_plain_and_structured_calls_are_cached_and_counted(litellm_lm):
    server = FakeOpenAI(lambda body, n: Reply(content='{"answer": "42"}'))
    with serve_app(server.app()) as url:
        lm = litellm_lm(url)
        first = await lm.complete([Message("user", "q")], role="judge", schema=Answer)
        again = await lm.complete([Message("user", "q")], role="judge", schema=Answer)
    assert first.value == again.value == Answer(answer="42") and again.cached
    assert len(server.requests) == 1
    assert server.requests[0]["response_format"]["type"] == "json_schema"
    row = lm.ledger.rows[("judge", "default")]
    assert (row.calls, row.cache_hits) == (1, 1) and row.prompt_tokens > 0


async def test_our_retries_not_litellms_handle_a_429(litellm_lm):
    server = FakeOpenAI(lambda body, n: Reply(status=429, headers={"Retry-After": "0"}) if n == 0
                        else Reply(content="ok"))
    with serve_app(server.app()) as url:
        lm = litellm_lm(url)
        result = await lm.complete([Message("user", "q")], role="solve")
    assert result.text == "ok" and len(server.requests) == 2
    assert lm.ledger.total().retries == 1


async def test_no_content_is_an_empty_reply_failure(litellm_lm):
    server = FakeOpenAI(lambda body, n: Reply(content=None, finish_reason="length"))
    with serve_app(server.app()) as url:
        lm = litellm_lm(url)
        with pytest.raises(EmptyReplyError, match="raise max_tokens"):
            await lm.complete([Message("user", "q")], role="solve")


async def test_a_refused_key_says_how_to_fix_it_and_never_shows_the_key(litellm_lm):
    server = FakeOpenAI(lambda body, n: Reply(status=401, error_message=f"bad key {KEY}"))
    with serve_app(server.app()) as url:
        lm = litellm_lm(url)
        with pytest.raises(InfrastructureError) as info:
            await lm.complete([Message("user", "q")], role="solve")
    text = f"{info.value} {info.value!r}"
    assert "HTTP 401" in text and "Check the API key" in text and KEY not in text
    assert len(server.requests) == 1


async def test_a_server_that_refuses_json_schema_gets_the_schema_in_the_prompt(litellm_lm):
    def respond(body, n):
        if "response_format" in body:
            return Reply(status=400, error_message="response_format is not supported")
        return Reply(content='{"answer": "plain"}')

    server = FakeOpenAI(respond)
    with serve_app(server.app()) as url:
        lm = litellm_lm(url)
        result = await lm.complete([Message("user", "q")], role="judge", schema=Answer)
    assert result.value == Answer(answer="plain")
    assert "JSON schema" in server.requests[-1]["messages"][0]["content"]


# ---- a provider with its own wire format: Anthropic's Messages API ------------------------------
def system_text(body) -> str:
    system = body["system"]
    return system if isinstance(system, str) else " ".join(block["text"] for block in system)


@pytest.fixture
async def claude_lm(monkeypatch, cache):
    monkeypatch.setenv("DECOEVO_TEST_KEY", KEY)
    made: list[LM] = []

    def make(url: str, **kwargs) -> LM:
        spec = ModelSpec(backend="litellm", model="anthropic/claude-test", base_url=url,
                         api_key_env="DECOEVO_TEST_KEY", backoff_base_s=0.01, **kwargs)
        made.append(LM(LMConfig(models={"default": spec}), cache=cache))
        return made[-1]

    yield make
    for lm in made:
        await lm.aclose()


async def test_anthropic_wire_format_through_litellm_with_our_cache_and_ledger(claude_lm):
    server = FakeAnthropic(lambda body, n: AnthropicReply(text="Paris.", thinking="The capital of France..."))
    with serve_app(server.app()) as url:
        lm = claude_lm(url)
        first = await lm.complete([Message("system", "Be brief."), Message("user", "Capital of France?")],
                                  role="solve")
        again = await lm.complete([Message("system", "Be brief."), Message("user", "Capital of France?")],
                                  role="solve")
    assert first.text == again.text == "Paris." and again.cached and len(server.requests) == 1
    body, headers = server.requests[0], server.headers[0]
    assert system_text(body) == "Be brief."
    assert body["max_tokens"] == 512 and "seed" not in body  # Anthropic takes no seed: dropped
    assert headers["x-api-key"] == KEY
    row = lm.ledger.rows[("solve", "default")]
    assert row.calls == 1 and row.reasoning_chars == len("The capital of France...")


async def test_anthropic_max_tokens_stop_is_flagged_truncated_and_a_429_is_retried_by_us(claude_lm):
    replies = [AnthropicReply(status=429, error_type="rate_limit_error", error_message="slow down",
                              headers={"retry-after": "0"}),
               AnthropicReply(text="The answer is", stop_reason="max_tokens")]
    server = FakeAnthropic(lambda body, n: replies[n])
    with serve_app(server.app()) as url:
        lm = claude_lm(url)
        result = await lm.complete([Message("user", "q")], role="solve")
    assert result.truncated and result.text == "The answer is"
    assert len(server.requests) == 2 and lm.ledger.total().retries == 1


@pytest.mark.parametrize("form", ["auto", "none"])
async def test_anthropic_structured_output_is_validated_after_decoding(claude_lm, form):
    """auto: LiteLLM translates json_schema into Anthropic's own form; none: the schema goes in the prompt."""
    server = FakeAnthropic(lambda body, n: AnthropicReply(text='{"answer": "yes"}'))
    with serve_app(server.app()) as url:
        lm = claude_lm(url, structured_output=form)
        result = await lm.complete([Message("user", "q")], role="judge", schema=Answer)
    assert result.value == Answer(answer="yes")
    if form == "none":
        assert "JSON schema" in system_text(server.requests[0])


async def test_anthropic_auth_error_has_the_fix_and_no_key(claude_lm):
    server = FakeAnthropic(lambda body, n: AnthropicReply(status=401, error_type="authentication_error",
                                                          error_message=f"invalid x-api-key {KEY}"))
    with serve_app(server.app()) as url:
        lm = claude_lm(url)
        with pytest.raises(InfrastructureError) as info:
            await lm.complete([Message("user", "q")], role="solve")
    assert "Check the API key" in str(info.value) and KEY not in f"{info.value} {info.value!r}"
    assert len(server.requests) == 1


async def test_a_reply_past_the_ceiling_is_refused_and_never_cached(litellm_lm, cache, monkeypatch):
    """Issue 36 item 11: LiteLLM reads a reply whole (no hook bounds its read for every provider, see
    lm/litellm_backend.py), so a reply past MAX_REPLY_BYTES is refused once read: an OversizedReply, not
    retried, nothing cached. A reply under the ceiling still passes."""
    from decoevo.lm import litellm_backend
    from decoevo.lm.errors import OversizedReply

    monkeypatch.setattr(litellm_backend, "MAX_REPLY_BYTES", 64 << 10)
    server = FakeOpenAI(lambda body, n: Reply(content="x" * (80 << 10) if "big" in str(body) else "small"))
    with serve_app(server.app()) as url:
        lm = litellm_lm(url)
        with pytest.raises(OversizedReply, match="past the 65,536"):
            await lm.complete([Message("user", "big")], role="solve")
        assert len(server.requests) == 1  # the same server answers the same way: not retried
        assert (await lm.complete([Message("user", "fine")], role="solve")).text == "small"
        with pytest.raises(OversizedReply):  # nothing of the refused reply was cached
            await lm.complete([Message("user", "big")], role="solve")
