"""The model layer on the real embedded model and on a real llama.cpp OpenAI-compatible server."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, Field

from decoevo.lm import LM, GenParams, LMConfig, Message, ModelSpec, RequestCache

from .real_model import llama_cpp_server, requires_model

pytestmark = [pytest.mark.real_model, requires_model]


class City(BaseModel):
    city: str = Field(max_length=40)
    country: str = Field(max_length=40)


MESSAGES = [
    Message("system", "You answer with a JSON object."),
    Message("user", "Name the capital city of Italy and its country. Use the fields city and country."),
]


async def test_embedded_structured_call_validates_and_second_run_is_free(tmp_path):
    cache = RequestCache(tmp_path / "c.sqlite")
    first = LM(LMConfig(), cache=cache)
    result = await first.complete(MESSAGES, role="probe", schema=City, params=GenParams(max_tokens=60))
    assert isinstance(result.value, City) and result.value.city.strip()
    assert first.ledger.total().calls >= 1 and result.completion_tokens > 0
    await first.aclose()

    second = LM(LMConfig(), cache=RequestCache(tmp_path / "c.sqlite"))
    again = await second.complete(MESSAGES, role="probe", schema=City, params=GenParams(max_tokens=60))
    assert again.value == result.value and again.cached
    total = second.ledger.total()
    assert total.calls == 0 and total.cache_hits >= 1 and total.tokens == 0
    await second.aclose()


async def test_embedded_rollouts_differ_by_sample_index(tmp_path):
    lm = LM(LMConfig(), cache=RequestCache(tmp_path / "c.sqlite"))
    prompt = [Message("user", "Write one short sentence about the sea.")]
    texts = {
        (await lm.complete(prompt, role="solve", params=GenParams(temperature=1.0, max_tokens=30, sample_index=i))).text
        for i in range(3)
    }
    assert len(texts) >= 2
    again = await lm.complete(prompt, role="solve", params=GenParams(temperature=1.0, max_tokens=30, sample_index=0))
    assert again.cached and again.text in texts
    await lm.aclose()


async def test_llama_cpp_server_through_the_openai_backend(tmp_path):
    """Structured output left on auto: the server's 500 on json_schema is negotiated down to json_object."""
    with llama_cpp_server() as base_url:
        spec = ModelSpec(backend="openai", model="smollm2", base_url=base_url, max_concurrency=2)
        lm = LM(LMConfig(models={"default": spec}), cache=RequestCache(tmp_path / "c.sqlite"))
        result = await lm.complete(MESSAGES, role="probe", schema=City, params=GenParams(max_tokens=60))
        assert isinstance(result.value, City)
        assert lm.backend("default").profile.structured == "json_object"  # type: ignore[attr-defined]
        assert (tmp_path / "endpoints.json").is_file()
        text = await lm.complete([Message("user", "Say hello.")], role="solve", params=GenParams(max_tokens=16))
        assert text.text.strip()
        row = lm.ledger.rows[("probe", "default")]
        assert row.calls >= 1 and row.prompt_tokens > 0
        await lm.aclose()


def test_doctor_against_llama_cpp_server_negotiates_structured_output(tmp_path):
    """`decoevo doctor --base-url … --model …` on llama-cpp-python's server used to end in "server error
    500" (it fails on json_schema); now it negotiates json_object and keeps the choice next to the cache."""
    import json
    import os
    import subprocess
    import sys

    env = {**os.environ, "DECOEVO_CACHE": str(tmp_path / "requests.sqlite"), "COLUMNS": "200"}
    with llama_cpp_server() as base_url:
        run = subprocess.run([sys.executable, "-m", "decoevo", "doctor", "--base-url", base_url, "--model", "smollm2",
                              "--max-tokens", "64"], env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "structured output: json_object (negotiated" in run.stdout and "Paris" in run.stdout
    learned = json.loads((tmp_path / "endpoints.json").read_text())
    assert [v["structured"] for v in learned.values()] == ["json_object"]
