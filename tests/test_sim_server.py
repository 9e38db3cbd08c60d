"""The simulated server: deterministic replies valid for every role, a slot limit, 429s, virtual time."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import aiohttp
import pytest

from decoevo.engine.config import config_from_dict
from decoevo.engine.run import Engine
from decoevo.lm import LM, LMConfig, RequestCache
from decoevo.lm.structured import parse_structured, schema_for
from decoevo.roles.contrastive_audit import PreferenceOut, RevealOut
from decoevo.roles.generate_rubric import rubric_schema
from decoevo.roles.judge import CriterionVerdict, joint_schema
from decoevo.roles.rewrite_generator import GeneratorSkillOut
from decoevo.roles.rewrite_solver import SkillOut
from decoevo.roles.structural_audit import StructuralOut
from decoevo.testing.server import serve_app
from decoevo.testing.sim_backend import SimBackend, run_virtual
from decoevo.testing.sim_model import LatencyModel, SimModel, SimWorld, role_of
from decoevo.testing.sim_server import SimServer, SimServerConfig
from decoevo.testing.toy_server import write_toy_questions

ROLE_SCHEMAS = [rubric_schema(8), joint_schema(5), CriterionVerdict, StructuralOut, PreferenceOut, RevealOut,
                SkillOut, GeneratorSkillOut]


def body(user: str, schema=None, temperature: float = 0.0, seed: int = 0) -> dict:
    out = {"model": "sim", "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": user}],
           "temperature": temperature, "max_tokens": 4000, "seed": seed}
    if schema is not None:
        out["response_format"] = {"type": "json_schema",
                                  "json_schema": {"name": "output", "schema": schema_for(schema), "strict": False}}
    return out


def judge_body(response: str) -> dict:
    rubric = "\n".join(f"{i}. (weight 2) criterion {i}" for i in range(1, 6))
    return body(f"<response>\n> {response}\n</response>\n\nRubric:\n{rubric}", joint_schema(5))


@pytest.mark.parametrize("schema", ROLE_SCHEMAS, ids=lambda s: s.__name__)
def test_every_role_gets_valid_json_of_its_schema(schema):
    model = SimModel(seed=1)
    for k in range(20):
        reply = model.reply(body(f"question {k}", schema))
        parse_structured(reply.content, schema)  # raises when invalid
        assert reply.role == role_of(body("x", schema)) and reply.completion_tokens >= 1


def test_replies_are_a_function_of_seed_and_body():
    a, b = SimModel(seed=3), SimModel(seed=3)
    request = body("What helps a sore knee?")
    assert a.reply(request) == b.reply(json.loads(json.dumps(request)))  # same seed, same body: same reply
    assert a.reply(request).content != SimModel(seed=4).reply(request).content
    assert a.reply(request).content != a.reply(body("What helps a sore knee?", temperature=0.8, seed=9)).content
    request["model"] = "another-name"  # the served model's name is not part of the request's identity
    assert a.reply(request) == b.reply(body("What helps a sore knee?"))


def test_answer_lengths_follow_the_table_and_judge_levels_vary():
    model = SimModel(seed=0, latency=LatencyModel(base_s=0.02, per_token_s=0.001, tail_p=0.0))
    answers = [model.reply(body(f"question {k}")) for k in range(300)]
    chars = sorted(len(r.content) for r in answers)
    assert 1000 < chars[150] < 2200  # HealthBench reference completions: median about 1,540 characters
    assert all(r.latency_s == pytest.approx(0.02 + 0.001 * r.completion_tokens) for r in answers)
    levels = {tuple(v["level"] for v in json.loads(model.reply(judge_body(f"answer {k}")).content)["verdicts"])
              for k in range(40)}
    assert len(levels) > 20  # different responses are judged differently
    same = [model.reply(judge_body("the same answer")).content for _ in range(3)]
    assert len(set(same)) == 1


def test_an_answer_past_its_token_limit_is_cut_there_as_a_server_cuts_it():
    """The text a capped answer comes back with is what its billed tokens are (a prompt quoting it later, a
    judge's or an audit's, is as long as on a real server); before, the whole text came back."""
    model = SimModel(seed=0)
    capped = [model.reply({**body(f"question {k}"), "max_tokens": 50}) for k in range(60)]
    assert all(len(r.content) <= 50 * 4 for r in capped)
    assert sum(r.finish_reason == "length" for r in capped) > 40  # most HealthBench answers run past 200 chars
    assert all(r.completion_tokens <= 50 for r in capped)
    k = next(k for k, r in enumerate(capped) if r.finish_reason == "length")
    whole = SimModel(seed=0, world=SimWorld(cut_at_limit=False)).reply({**body(f"question {k}"), "max_tokens": 50})
    assert len(whole.content) > 50 * 4 and whole.completion_tokens == 50  # the simulator as it was
    judged = model.reply({**judge_body("an answer"), "max_tokens": 5})  # a structured reply stays whole
    assert json.loads(judged.content)["verdicts"] and judged.finish_reason == "stop"


def test_long_tail_is_bounded_and_reproducible():
    model = SimModel(seed=0, latency=LatencyModel(base_s=0.01, per_token_s=0.0, tail_p=0.2, tail_cap=5.0))
    latencies = [model.reply(body(f"q {k}")).latency_s for k in range(500)]
    assert min(latencies) == pytest.approx(0.01) and max(latencies) <= 0.05 + 1e-9
    assert 0.1 < sum(s > 0.0101 for s in latencies) / 500 < 0.3
    assert latencies == [model.reply(body(f"q {k}")).latency_s for k in range(500)]


async def _post_all(url: str, bodies: list[dict]) -> list[int]:
    async with aiohttp.ClientSession() as session:
        async def one(b: dict) -> int:
            async with session.post(f"{url}/v1/chat/completions", json=b) as reply:
                await reply.read()
                return reply.status

        return list(await asyncio.gather(*(one(b) for b in bodies)))


async def test_slot_limit_queues_requests_and_counts_busy_time():
    server = SimServer(SimServerConfig(slots=3, latency=LatencyModel.fixed(0.2)))
    with serve_app(server.app()) as url:
        started = time.monotonic()
        statuses = await _post_all(url, [body(f"q {k}") for k in range(9)])
        wall = time.monotonic() - started
    stats = server.stats.snapshot()
    assert statuses == [200] * 9
    assert stats["max_in_flight"] == 3 and stats["served"] == 9 and stats["max_waiting"] >= 3
    assert wall >= 3 * 0.2  # nine requests through three slots: three rounds
    assert stats["busy_slot_s"] == pytest.approx(9 * 0.2, rel=0.1)
    assert stats["mean_in_flight_while_active"] == pytest.approx(3, rel=0.15)


async def test_rate_limit_answers_429_with_retry_after():
    server = SimServer(SimServerConfig(slots=8, latency=LatencyModel.fixed(0.01), rate_rps=1.0, burst=3))
    with serve_app(server.app()) as url:
        statuses = await _post_all(url, [body(f"q {k}") for k in range(8)])
    assert statuses.count(200) == 3 and statuses.count(429) == 5
    assert server.stats.rejected_429 == 5 and server.stats.requests == 8


def test_virtual_clock_counts_waves_without_waiting():
    async def chain() -> str:
        await asyncio.gather(asyncio.sleep(1.0), asyncio.sleep(1.0))  # one wave
        await asyncio.sleep(1.0)  # a second, dependent one
        return "done"

    started = time.monotonic()
    result, virtual_s = run_virtual(chain())
    assert result == "done" and virtual_s == pytest.approx(2.0)
    assert time.monotonic() - started < 1.0  # half the 2 s a real clock would have slept


def _sim_run(tmp: Path, data: Path, latency: LatencyModel) -> tuple[dict, float, SimBackend]:
    config = config_from_dict({
        "method": "decoevo", "seed": 1, "data": {"path": str(data), "format": "jsonl"},
        "splits": {"train": 6, "probe": 2, "solver_gate": 3, "generator_gate": 3},
        "hyper": {"steps": 2, "batch_size": 2, "audit_every": 1, "rollouts": 4}})
    backend = SimBackend(seed=0, latency=latency, max_concurrency=8)
    lm = LM(LMConfig(), backends={"default": backend}, cache=RequestCache(tmp / "cache.sqlite"))
    result, seconds = run_virtual(Engine(config, tmp / "run", lm=lm).run_async())
    lm.cache.close()
    usage = {k: v for k, v in result.ledger.total().__dict__.items() if k != "latency_s"}  # real time: varies
    return usage, seconds, backend


def test_engine_on_the_simulated_model_is_deterministic_and_not_a_replay(tmp_path):
    data = write_toy_questions(tmp_path / "q.jsonl", 20)
    for sub in ("a", "b"):
        (tmp_path / sub).mkdir()
    first, waves, backend = _sim_run(tmp_path / "a", data, LatencyModel.fixed(1.0))
    second, seconds, _ = _sim_run(tmp_path / "b", data, LatencyModel())
    assert first == second  # the same calls whatever the latencies
    assert 0.03 * waves < seconds < 0.5 * waves  # a critical path in simulated seconds
    assert first["calls"] == backend.requests > 50 and first["cache_hits"] < first["calls"]
    assert waves == round(waves) and 10 < waves < backend.requests  # waves: whole virtual seconds, calls overlap
    assert '"outer_round"' in (tmp_path / "a" / "run" / "events.jsonl").read_text()


@pytest.mark.parametrize("schema", [None, schema_for(StructuralOut), schema_for(SkillOut)])
def test_the_in_process_body_is_the_one_the_openai_backend_sends(schema):
    # The same body gives the same reply, so the virtual runs (waves, critical path) and the HTTP run of
    # bench/scale/paper_scale.py make the same calls. They did not while the backend sent the schema without
    # length caps and the in-process body with them: the runs followed different paths.
    from decoevo.lm import GenParams, Message, ModelSpec
    from decoevo.lm.openai_backend import OpenAIBackend
    from decoevo.lm.types import BackendRequest
    from decoevo.testing.sim_backend import openai_body

    request = BackendRequest(model="default", messages=(Message("system", "s"), Message("user", "u")),
                             params=GenParams(temperature=0.7, max_tokens=300, sample_index=2), json_schema=schema)
    backend = OpenAIBackend(ModelSpec(backend="openai", model="sim", base_url="http://127.0.0.1:9/v1"))
    # json_schema: the form the simulated server accepts (the first a fresh endpoint tries)
    assert json.loads(backend._body(request)) == openai_body(request)
