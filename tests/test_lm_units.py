"""Pure pieces of the model layer: retry policy, JSON extraction, cache keys, ledger, config."""

from __future__ import annotations

import json
import random
import threading

import pytest
from pydantic import BaseModel

from decoevo.lm import Completion, GenParams, LMConfig, Message, ModelSpec, RequestCache, UsageLedger
from decoevo.lm.cache import request_key
from decoevo.lm.errors import FailureCategory
from decoevo.lm.local import grammar_schema
from decoevo.lm.retry import RetryPolicy, parse_retry_after
from decoevo.lm.structured import extract_json, parse_structured
from decoevo.lm.types import BackendRequest


def test_backoff_grows_is_capped_and_jittered():
    policy = RetryPolicy(max_retries=5, base_s=1.0, cap_s=8.0)
    rng = random.Random(0)
    ceilings = [1, 2, 4, 8, 8, 8]
    for attempt, ceiling in enumerate(ceilings, start=1):
        delays = [policy.delay(attempt, rng=rng) for _ in range(200)]
        assert min(delays) >= 0 and max(delays) <= ceiling
        assert max(delays) > ceiling * 0.8  # full jitter spans the range
    assert policy.delay(1, retry_after=3.0) == 3.0
    assert policy.delay(1, retry_after=100.0) == 8.0
    assert policy.should_retry(5) and not policy.should_retry(6)


def test_parse_retry_after():
    assert parse_retry_after("2") == 2.0
    assert parse_retry_after("0.5") == 0.5
    assert parse_retry_after(None) is None
    assert parse_retry_after("not a date") is None
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0  # in the past


def test_extract_json_variants():
    assert extract_json('{"a": 1}') == {"a": 1}
    assert extract_json('Sure! ```json\n{"a": 2}\n``` done') == {"a": 2}
    assert extract_json('prefix {"a": {"b": 3}} suffix {"c": 4}') == {"a": {"b": 3}}
    assert extract_json('{"a": "two\n\nlines"}') == {"a": "two\n\nlines"}  # raw newlines in a string
    with pytest.raises(ValueError):
        extract_json("no json here")
    with pytest.raises(ValueError):
        extract_json('{"a": ')


def test_parse_structured_reports_the_field():
    class M(BaseModel):
        x: int

    assert parse_structured('{"x": 3}', M).x == 3
    with pytest.raises(ValueError, match="x"):
        parse_structured('{"x": "three"}', M)


def test_cache_key_covers_every_input():
    base = BackendRequest("m", (Message("user", "q"),), GenParams(), None)
    variants = [
        BackendRequest("m", (Message("user", "q2"),), GenParams(), None),
        BackendRequest("m", (Message("system", "q"),), GenParams(), None),
        BackendRequest("m", (Message("user", "q"),), GenParams(temperature=0.5), None),
        BackendRequest("m", (Message("user", "q"),), GenParams(max_tokens=7), None),
        BackendRequest("m", (Message("user", "q"),), GenParams(seed=1), None),
        BackendRequest("m", (Message("user", "q"),), GenParams(sample_index=1), None),
        BackendRequest("m", (Message("user", "q"),), GenParams(), {"type": "object"}),
    ]
    keys = {request_key("id", base)} | {request_key("id", v) for v in variants}
    assert len(keys) == len(variants) + 1
    assert request_key("other-model", base) != request_key("id", base)
    assert request_key("id", base) == request_key("id", BackendRequest("x", base.messages, GenParams()))


def test_cache_roundtrip_and_concurrent_writers(tmp_path):
    path = tmp_path / "c.sqlite"
    cache = RequestCache(path)
    cache.put("k", "m", Completion("text", 3, 4, "stop"))
    assert cache.get("k") == Completion("text", 3, 4, "stop")
    assert cache.get("missing") is None

    def writer(i: int) -> None:
        c = RequestCache(path)  # separate connections, as separate processes would have
        for j in range(50):
            c.put(f"{i}-{j}", "m", Completion(str(j), 1, 1))

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(RequestCache(path)) == 201


def test_ledger_totals_json_roundtrip_and_table():
    ledger = UsageLedger()
    ledger.record_call("solve", "a", 10, 5, 0.1)
    ledger.record_call("judge", "a", 20, 2, 0.2)
    ledger.record_hit("judge", "a")
    ledger.record_failure("judge", "a", FailureCategory.PARSE)
    total = ledger.total()
    assert (total.calls, total.cache_hits, total.tokens, total.failures["parse"]) == (2, 1, 37, 1)
    again = UsageLedger.from_dict(json.loads(ledger.to_json()))
    assert again.to_dict() == ledger.to_dict()
    assert ledger.by_role()["judge"].prompt_tokens == 20
    assert ledger.table().row_count == 3


def test_config_rejects_unknown_keys_and_dangling_roles():
    with pytest.raises(ValueError, match="extra"):
        ModelSpec.model_validate({"backend": "local", "temprature": 0.1})
    with pytest.raises(ValueError, match="base_url"):
        ModelSpec(backend="openai")
    with pytest.raises(ValueError, match="not in models"):
        LMConfig(roles={"judge": "big"})
    assert LMConfig(models={"default": ModelSpec(), "big": ModelSpec()}, roles={"judge": "big"}).model_for(
        "judge") == "big"


def test_api_key_comes_from_env_or_file(tmp_path, monkeypatch):
    monkeypatch.setenv("MY_KEY", "sk-env")
    spec = ModelSpec(backend="openai", base_url="http://127.0.0.1:1/v1", api_key_env="MY_KEY")
    assert spec.read_api_key() == "sk-env"
    key_file = tmp_path / "key"
    key_file.write_text("sk-file\n")
    assert spec.model_copy(update={"api_key_file": str(key_file)}).read_api_key() == "sk-file"
    assert "sk-" not in spec.model_dump_json()


def test_grammar_schema_bounds_every_string():
    schema = {"type": "object", "properties": {"a": {"type": "string", "maxLength": 5000, "minLength": 1},
                                               "b": {"type": "string", "enum": ["x", "y"]},
                                               "c": {"type": "array", "items": {"type": "string", "maxLength": 90}}}}
    out = grammar_schema(schema, 300)
    assert out["properties"]["a"] == {"type": "string", "minLength": 1, "maxLength": 300}
    assert "maxLength" not in out["properties"]["b"]
    assert out["properties"]["c"]["items"] == {"type": "string", "maxLength": 90}
    assert schema["properties"]["a"]["maxLength"] == 5000  # the original is untouched
