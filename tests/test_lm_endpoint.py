"""Negotiating with an endpoint: structured-output form, reasoning models' parameters, and a clear
message for every refusal decoevo cannot fix. Fake servers on 127.0.0.1 speak each dialect."""

from __future__ import annotations

import asyncio
import json

import pytest
from pydantic import BaseModel, Field

from decoevo.lm import InfrastructureError, Message, ModelSpec, RequestCache
from decoevo.lm.endpoint import EndpointProfile, is_reasoning_model
from decoevo.testing.fake_openai import FakeOpenAI, Reply
from decoevo.testing.server import serve_app

pytest.importorskip("uvicorn")


class Answer(BaseModel):
    answer: str = Field(max_length=400)


def form(body) -> str:
    fmt = body.get("response_format")
    return fmt["type"] if fmt else "none"


def llama_cpp_like(body, n) -> Reply:
    """llama-cpp-python's server: a 500 for json_schema, json_object + schema works."""
    if form(body) == "json_schema":
        return Reply(status=500, error_message="'json_schema'")
    return Reply(content='{"answer": "ok"}')


async def test_a_server_that_fails_on_json_schema_is_negotiated_down_and_remembered_across_processes(
        tmp_path, openai_lm):
    server = FakeOpenAI(llama_cpp_like)
    cache_path = tmp_path / "cache" / "requests.sqlite"
    with serve_app(server.app()) as url:
        lm = openai_lm(url, RequestCache(cache_path))
        first = await lm.complete([Message("user", "q1")], role="judge", schema=Answer)
        second = await lm.complete([Message("user", "q2")], role="judge", schema=Answer)
        # Another process sharing the cache directory starts with what this one learned.
        other = openai_lm(url, RequestCache(cache_path))
        third = await other.complete([Message("user", "q3")], role="judge", schema=Answer)
    assert first.value == second.value == third.value == Answer(answer="ok")
    # json_schema twice (a 500 may pass), then json_object; later calls and processes go straight there.
    assert [form(b) for b in server.requests] == ["json_schema", "json_schema", "json_object", "json_object",
                                                  "json_object"]
    assert lm.backend("default").profile.structured == "json_object"
    learned = json.loads((cache_path.parent / "endpoints.json").read_text())
    assert learned[lm.backend("default").identity]["structured"] == "json_object"
    assert lm.ledger.total().retries == 0 and lm.ledger.total().calls == 2  # negotiation is not a fault


async def test_requests_queued_behind_the_first_probe_go_together_once_the_form_is_known(cache, openai_lm):
    server = FakeOpenAI(lambda body, n: Reply(content='{"answer": "ok"}', delay_s=0.2))
    with serve_app(server.app()) as url:
        lm = openai_lm(url, cache)
        await asyncio.gather(*(lm.complete([Message("user", f"q{i}")], role="judge", schema=Answer)
                               for i in range(12)))
    # The first request finds the form alone; the 11 that waited for it then run side by side (they were
    # sent one at a time under the probe's lock).
    assert lm.backend("default").profile.structured == "json_schema"
    assert len(server.requests) == 12 and server.max_in_flight == 11


async def test_a_server_without_response_format_gets_the_schema_in_the_prompt_and_validation_after(cache, openai_lm):
    def respond(body, n):
        if "response_format" in body:
            return Reply(status=400, error_message="response_format is not supported by this server")
        return Reply(content='Sure: {"answer": "fine"}')

    server = FakeOpenAI(respond)
    with serve_app(server.app()) as url:
        lm = openai_lm(url, cache)
        result = await lm.complete([Message("system", "You judge."), Message("user", "q")], role="judge",
                                   schema=Answer)
    assert result.value == Answer(answer="fine")
    assert [form(b) for b in server.requests] == ["json_schema", "json_object", "none"]
    system = server.requests[-1]["messages"][0]
    assert system["role"] == "system" and system["content"].startswith("You judge.")
    assert '"answer"' in system["content"] and "JSON schema" in system["content"]


async def test_one_passing_500_does_not_give_up_json_schema(cache, openai_lm):
    server = FakeOpenAI(lambda body, n: Reply(status=500) if n == 0 else Reply(content='{"answer": "a"}'))
    with serve_app(server.app()) as url:
        lm = openai_lm(url, cache)
        await lm.complete([Message("user", "q")], role="judge", schema=Answer)
    assert [form(b) for b in server.requests] == ["json_schema", "json_schema"]
    assert lm.backend("default").profile.structured == "json_schema"


async def test_a_server_that_fails_on_everything_is_an_error_that_says_what_was_tried(cache, openai_lm):
    server = FakeOpenAI(lambda body, n: Reply(status=500, error_message="boom"))
    with serve_app(server.app()) as url:
        lm = openai_lm(url, cache, max_retries=0)
        with pytest.raises(InfrastructureError, match=r"server error 500 .*boom \(after trying structured"):
            await lm.complete([Message("user", "q")], role="judge", schema=Answer)
    assert len(server.requests) == 4  # json_schema twice, json_object, none
    assert lm.backend("default").profile.structured is None  # nothing learned from a broken server


async def test_the_schema_sent_to_a_server_carries_no_length_bound(cache, openai_lm):
    server = FakeOpenAI(lambda body, n: Reply(content=json.dumps({"answer": "x" * 400})))
    with serve_app(server.app()) as url:
        lm = openai_lm(url, cache, structured_output="json_schema")
        result = await lm.complete([Message("user", "q")], role="judge", schema=Answer)
    assert len(result.value.answer) == 400
    assert "maxLength" not in json.dumps(server.requests[0]["response_format"])


def test_reasoning_models_are_known_by_name():
    assert all(is_reasoning_model(m) for m in ("o1", "o3-mini", "o4-mini", "gpt-5", "gpt-5-mini", "openai/o3"))
    assert not any(is_reasoning_model(m) for m in ("gpt-4o", "gpt-4.1-mini", "llama-3.1-8b", "qwen3:8b"))
    spec = ModelSpec(backend="openai", model="o3-mini", base_url="http://127.0.0.1:1/v1")
    assert EndpointProfile.initial(spec) == EndpointProfile(None, "max_completion_tokens", False)
    forced = spec.model_copy(update={"token_limit_param": "max_tokens", "send_temperature": True})
    assert EndpointProfile.initial(forced) == EndpointProfile(None, "max_tokens", True)


async def test_a_reasoning_model_gets_max_completion_tokens_effort_and_no_temperature(cache, openai_lm):
    server = FakeOpenAI(lambda body, n: Reply(content="hi"))
    with serve_app(server.app()) as url:
        lm = openai_lm(url, cache, reasoning_effort="low")
        lm.config.models["default"] = lm.config.models["default"].model_copy(update={"model": "gpt-5-mini"})
        await lm.complete([Message("user", "q")], role="solve")
    body = server.requests[0]
    assert body["max_completion_tokens"] == 512 and "max_tokens" not in body
    assert "temperature" not in body and body["reasoning_effort"] == "low"


@pytest.mark.parametrize("status", [400, 422])  # 422: what FastAPI-based proxies answer a refused parameter
async def test_refused_parameters_are_fixed_from_the_message_and_remembered(cache, openai_lm, status):
    """What OpenAI answers a reasoning model that is not known by name (e.g. behind a proxy's alias)."""
    def respond(body, n):
        if "max_tokens" in body:
            return Reply(status=status, error_message="Unsupported parameter: 'max_tokens' is not supported with "
                                                      "this model. Use 'max_completion_tokens' instead.")
        if "temperature" in body and body["temperature"] != 1:
            return Reply(status=status, error_message="Unsupported value: 'temperature' does not support 0.0 with "
                                                      "this model. Only the default (1) value is supported.")
        return Reply(content="done")

    server = FakeOpenAI(respond)
    with serve_app(server.app()) as url:
        lm = openai_lm(url, cache)
        first = await lm.complete([Message("user", "q1")], role="solve")
        second = await lm.complete([Message("user", "q2")], role="solve")
    assert first.text == second.text == "done"
    assert len(server.requests) == 4  # two refusals once, then each call goes through at once
    assert lm.backend("default").profile == EndpointProfile(None, "max_completion_tokens", False)
    assert lm.ledger.total().failures["infrastructure"] == 0


@pytest.mark.parametrize(("status", "message", "fix"), [
    (400, "Unsupported value: 'reasoning_effort' does not support 'minimal' with this model.",
     "remove or change reasoning_effort"),
    (400, "This model's maximum context length is 8192 tokens.", "lower max_tokens"),
    (401, "Incorrect API key provided.", "$OPENAI_API_KEY"),  # the variable to set or check
    (403, "Project does not have access to model.", "$OPENAI_API_KEY"),
    (404, "The model `nope` does not exist.", "Is the model name 'fake' served there?"),
    (413, "Request too large.", "lower max_tokens"),
    (422, "Input should be a valid integer: seed.", "its message above names it"),
    (429, "You exceeded your current quota, please check your plan and billing details.", "retrying will not help"),
])
async def test_every_refusal_that_cannot_be_fixed_says_how_to_fix_it(cache, openai_lm, status, message, fix):
    server = FakeOpenAI(lambda body, n: Reply(status=status, error_message=message))
    with serve_app(server.app()) as url:
        lm = openai_lm(url, cache)
        with pytest.raises(InfrastructureError) as info:
            await lm.complete([Message("user", "q")], role="solve")
    assert f"HTTP {status}" in str(info.value) and message[:20] in str(info.value) and fix in str(info.value)
    assert len(server.requests) == 1  # not retried


def test_a_damaged_endpoint_memory_costs_only_a_new_probe(tmp_path):
    from decoevo.lm.endpoint import EndpointMemory

    path = tmp_path / "endpoints.json"
    path.write_text("{not json")
    memory = EndpointMemory(path)
    assert memory.get("x") == {}
    memory.remember("x", EndpointProfile("json_object"))
    assert EndpointMemory(path).get("x")["structured"] == "json_object"


async def test_without_a_cache_the_choice_is_kept_in_the_process_only(tmp_path, openai_lm):
    server = FakeOpenAI(llama_cpp_like)
    with serve_app(server.app()) as url:
        lm = openai_lm(url, None)
        await lm.complete([Message("user", "q")], role="judge", schema=Answer)
        await lm.complete([Message("user", "q2")], role="judge", schema=Answer)
    assert [form(b) for b in server.requests][-1] == "json_object" and len(server.requests) == 4


def doctor(url: str, tmp_path, *flags: str):
    import os
    import subprocess
    import sys

    env = {**os.environ, "DECOEVO_CACHE": str(tmp_path / "requests.sqlite"), "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-m", "decoevo", "doctor", "--base-url", f"{url}/v1", "--model", "fake",
                           *flags], env=env, capture_output=True, text=True, timeout=120)


def test_doctor_negotiates_with_a_server_that_rejects_json_schema_and_shows_the_choice(tmp_path):
    server = FakeOpenAI(lambda body, n: Reply(status=500, error_message="'json_schema'") if form(body) == "json_schema"
                        else Reply(content='{"capital": "Paris", "confidence": 0.9}'))
    with serve_app(server.app()) as url:
        auto = doctor(url, tmp_path)
        forced = doctor(url, tmp_path, "--structured-output", "none", "--no-cache")
        bad = doctor(url, tmp_path, "--structured-output", "grammar")
    assert auto.returncode == 0, auto.stdout + auto.stderr
    assert "structured output: json_object (negotiated, remembered in" in auto.stdout
    assert forced.returncode == 0, forced.stdout + forced.stderr
    assert "structured output: none (set in the config)" in forced.stdout
    assert server.requests[-1].get("response_format") is None
    assert bad.returncode == 2 and "structured_output" in bad.stderr and "Traceback" not in bad.stderr


async def test_a_5xx_message_that_echoes_the_key_is_masked(cache, openai_lm, monkeypatch):
    key = "sk-planted-5xx-0123456789abcdef"
    monkeypatch.setenv("DECOEVO_PLANTED", key)
    server = FakeOpenAI(lambda body, n: Reply(status=500, error_message=f"upstream said Bearer {key} failed"))
    with serve_app(server.app()) as url:
        lm = openai_lm(url, cache, max_retries=0, api_key_env="DECOEVO_PLANTED")
        with pytest.raises(InfrastructureError) as info:
            await lm.complete([Message("user", "q")], role="judge", schema=Answer)
    text = f"{info.value} {info.value!r} {info.value.__cause__!r}"
    assert "upstream said" in text and key not in text


def test_doctor_checks_the_models_of_a_config_file_and_takes_set(tmp_path):
    """`doctor --config FILE` probes each of the file's models (a configured endpoint, a judge routed to
    another server); `--set lm.…` changes them; a key outside `lm` is refused by name."""
    import os
    import subprocess
    import sys

    ok = FakeOpenAI(lambda body, n: Reply(content='{"capital": "Paris", "confidence": 0.9}'))
    env = {**os.environ, "DECOEVO_CACHE": str(tmp_path / "requests.sqlite"), "COLUMNS": "80"}
    with serve_app(ok.app()) as url, serve_app(ok.app()) as judge_url:
        config = tmp_path / "run.yaml"
        config.write_text(f"lm:\n  models:\n    default: {{backend: openai, base_url: '{url}/v1', model: main}}\n"
                          f"    judge: {{backend: openai, base_url: 'http://127.0.0.1:9/v1', model: big}}\n"
                          "  roles: {judge: judge}\n")

        def doctor_with(*flags: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run([sys.executable, "-m", "decoevo", "doctor", "--config", str(config), *flags],
                                  env=env, capture_output=True, text=True, timeout=120)

        unreachable = doctor_with("--set", "lm.models.judge.max_retries=0")
        fixed = doctor_with("--set", f"lm.models.judge.base_url={judge_url}/v1")
        refused = doctor_with("--set", "hyper.steps=3")
    assert unreachable.returncode != 0 and "for model 'judge'" in unreachable.stderr, unreachable.stderr
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert "model default (openai: main) OK" in fixed.stdout and "model judge (openai: big) OK" in fixed.stdout
    assert {b["model"] for b in ok.requests} == {"main", "big"}
    assert "…" not in fixed.stdout
    assert refused.returncode == 2 and "hyper.steps" in refused.stderr and "lm.* keys" in refused.stderr
