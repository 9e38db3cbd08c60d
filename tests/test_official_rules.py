"""Official grading rules per benchmark (docs/benchmarks.md): LLMEval-Med loads the file as published and
answers multi-turn questions with the model's own earlier answers; EQ-Bench CW writes each prompt with 3
seed modifiers and its own sampling; the benchmark records carry what the rules need."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from decoevo.benchmarks import BENCHMARKS, load_eqbench_cw, load_llmeval_med
from decoevo.benchmarks.llmeval_med.loader import odd_records
from decoevo.domain import Question, Skill
from decoevo.evaluation.session import benchmark_sampling
from decoevo.lm import GenParams, ModelSpec
from decoevo.lm.cache import request_key
from decoevo.lm.openai_backend import OpenAIBackend
from decoevo.lm.types import BackendRequest, Message
from decoevo.roles.solve import solve

from .conftest import SHARED_DATA
from .real_model import requires_model
from .result_files import result_file

# Records shaped like the 25 odd ones of the full published file: `sanswer` a number or NaN, `checklist` NaN.
PUBLISHED = """{"医疗知识": [
 {"category1": "医疗知识", "round": 1, "problem": "成人正常心率上限是多少？", "groupCode": 1, "sanswer": 100,
  "checklist": NaN},
 {"category1": "医疗知识", "round": 1, "problem": "血糖单位换算系数？", "groupCode": 2, "sanswer": 18.0,
  "checklist": "核心需求：\\n1. 给出换算系数"},
 {"category1": "医疗知识", "round": 1, "problem": "头痛怎么办？", "groupCode": 3, "sanswer": NaN,
  "checklist": NaN},
 {"category1": "医疗知识", "round": 1, "problem": "发烧吃什么药？", "groupCode": 4, "sanswer": "对乙酰氨基酚。",
  "checklist": "核心需求：\\n1. 提到退热药"}
],
"医疗推理": [
 {"category1": "医疗推理", "round": 1, "problem": "患者胸痛，首先考虑什么？", "groupCode": 7,
  "sanswer": "参考答案甲：急性冠脉综合征。"},
 {"category1": "医疗推理", "round": 2, "problem": "下一步做什么检查？", "groupCode": 7,
  "sanswer": "参考答案乙：心电图。"}
]}"""


def _published(tmp_path: Path) -> Path:
    p = tmp_path / "dataset.json"
    p.write_text(PUBLISHED, encoding="utf-8")
    return p


def test_llmeval_med_loads_the_file_as_published_and_counts_odd_records(tmp_path, caplog):
    with caplog.at_level(logging.INFO, logger="decoevo.benchmarks.llmeval_med.loader"):
        qs = load_llmeval_med(_published(tmp_path))
    assert len(qs) == 6
    by_id = {q.id: q for q in qs}
    assert by_id["医疗知识-0"].meta["reference_answer"] == "100" and by_id["医疗知识-0"].meta["reference_numeric"]
    assert by_id["医疗知识-1"].meta["reference_answer"] == "18"  # 18.0 as the number it is
    assert by_id["医疗知识-2"].meta["reference_missing"] and by_id["医疗知识-2"].meta["checklist_missing"]
    assert by_id["医疗知识-2"].gold is not None and by_id["医疗知识-2"].gold.items[0].tags == ("no_standard",)
    assert odd_records(qs) == {"numeric_reference": 2, "missing_reference": 1, "missing_checklist": 4}
    assert "2 reference answer(s) published as a number (read as text), 1 missing" in caplog.text


def test_llmeval_med_later_rounds_never_show_a_reference_answer(tmp_path):
    qs = {q.id: q for q in load_llmeval_med(_published(tmp_path))}
    second = qs["医疗推理-1"]
    assert [t.role for t in second.turns] == ["user", "assistant", "user"] and second.turns[1].is_open
    assert second.meta["history_complete"]
    references = [q.meta["reference_answer"] for q in qs.values() if q.meta["reference_answer"]]
    for q in qs.values():
        shown = q.view().model_dump_json()
        assert not [r for r in references if json.dumps(r, ensure_ascii=False)[1:-1] in shown]


async def test_llmeval_med_multi_turn_uses_the_models_own_earlier_answer(make_lm, tmp_path):
    second = {q.id: q for q in load_llmeval_med(_published(tmp_path))}["医疗推理-1"]

    def script(request: BackendRequest) -> str:
        last = request.messages[-1].content
        return "我的第一轮回答" if "胸痛" in last else "我的第二轮回答"

    lm, backend = make_lm(script)
    skill = Skill(kind="solver", version=0, text="Answer well.")
    response = await solve(lm, second.view(), skill, params=GenParams(max_tokens=64))
    assert response.text == "我的第二轮回答" and len(backend.calls) == 2
    final = [m.as_dict() for m in backend.calls[1].messages[1:]]
    assert final == [{"role": "user", "content": "患者胸痛，首先考虑什么？"},
                     {"role": "assistant", "content": "我的第一轮回答"},
                     {"role": "user", "content": "下一步做什么检查？"}]
    assert all("参考答案" not in m.content for call in backend.calls for m in call.messages)
    await solve(lm, second.view(), skill, params=GenParams(max_tokens=64))  # again: both calls from the cache
    assert len(backend.calls) == 2


def test_eqbench_writes_each_prompt_with_three_seed_modifiers():
    folder = SHARED_DATA / "eqbench_cw_v3_sample"
    if not folder.exists():
        pytest.skip("shared data not present")
    qs = load_eqbench_cw(folder)
    assert len(qs) == 12 and [q.id for q in qs[:3]] == ["1-m0", "1-m1", "1-m2"]
    assert len({q.turns[0].content for q in qs[:3]}) == 3  # three different pieces asked for
    assert len(BENCHMARKS["eqbench_cw"].load(folder)) == 12


def test_eqbench_sampling_reaches_the_request_where_the_server_takes_it():
    q = Question.model_validate({"id": "1-m0", "task": "eqbench_cw", "turns": [{"role": "user", "content": "w"}],
                                 "gold": {"scheme": "eqbench_cw", "items": [{"text": "Coherent"}]}})
    sampling = benchmark_sampling(q)
    assert sampling is not None and (sampling.temperature, sampling.min_p) == (0.7, 0.1)
    params = GenParams(temperature=0.7, max_tokens=100, min_p=0.1)
    request = BackendRequest(model="m", messages=(Message("user", "w"),), params=params)
    local = OpenAIBackend(ModelSpec(backend="openai", model="m", base_url="http://127.0.0.1:8000/v1"))
    body = json.loads(local._body(request))
    assert body["min_p"] == 0.1 and body["temperature"] == 0.7
    hosted = OpenAIBackend(ModelSpec(backend="openai", model="m", base_url="https://api.openai.com/v1"))
    assert "min_p" not in json.loads(hosted._body(request))
    plain = BackendRequest(model="m", messages=request.messages, params=GenParams(temperature=0.7, max_tokens=100))
    assert request_key("x", request) != request_key("x", plain)
    assert "min_p" not in json.loads(local._body(plain))


def test_eqbench_transfer_eval_samples_the_piece_with_the_benchmarks_settings(tmp_path, monkeypatch):
    """Through `decoevo eval` against a real local server: every EQ-Bench piece request carries
    temperature 0.7 and min_p 0.1, three per prompt."""
    pytest.importorskip("uvicorn")
    from typer.testing import CliRunner

    from decoevo.cli import app
    from decoevo.roles.solve import BASE_INSTRUCTIONS
    from decoevo.testing.fake_openai import FakeOpenAI, Reply
    from decoevo.testing.server import serve_app
    from decoevo.testing.toy_server import toy_reply, toy_run_args, write_toy_questions

    folder = SHARED_DATA / "eqbench_cw_v3_sample"
    if not folder.exists():
        pytest.skip("shared data not present")
    monkeypatch.setenv("DECOEVO_CACHE", str(tmp_path / "cache.sqlite"))
    bodies: list[dict] = []

    def record(body: dict, n: int):
        bodies.append(body)
        schema = (body.get("response_format") or {}).get("json_schema", {}).get("schema", {})
        if str(schema.get("title", "")).startswith("CreativeScores"):  # the toy world has no critic
            return Reply(content=json.dumps({"rationale": "even", "scores": [10] * 22}))
        return toy_reply(body, n)

    runner = CliRunner()
    with serve_app(FakeOpenAI(record).app()) as url:
        data = write_toy_questions(tmp_path / "toy.jsonl")
        args = toy_run_args(f"{url}/v1", data, tmp_path / "runs", "r", steps=1, sets=("method=zero_shot",))
        assert runner.invoke(app, args).exit_code == 0
        trained = len(bodies)
        result = runner.invoke(app, ["eval", str(tmp_path / "runs" / "r"), "--data", str(folder),
                                     "--format", "eqbench_cw", "--grader-base-url", f"{url}/v1",
                                     "--grader-model", "toy"])
        assert result.exit_code == 0, result.output

    def solves(part: list[dict]) -> list[dict]:
        return [b for b in part if str(b["messages"][0]["content"]).startswith(BASE_INSTRUCTIONS)]

    pieces = solves(bodies[trained:])
    assert len(pieces) == 12 and len({b["messages"][-1]["content"] for b in pieces}) == 12
    assert all(b["temperature"] == 0.7 and b["min_p"] == 0.1 for b in pieces)
    record_file = json.loads(result_file(tmp_path / "runs" / "r", "transfer-eqbench_cw").read_text())
    assert record_file["n_graded"] == 12 and record_file["score"] == pytest.approx(50.0)
    assert record_file["headline"] == BENCHMARKS["eqbench_cw"].headline


@requires_model
@pytest.mark.real_model
@pytest.mark.slow  # ~15 s: loads the embedded model
async def test_llmeval_med_multi_turn_on_the_embedded_model(tmp_path):
    """The embedded model answers round 1, then round 2 after its own round-1 answer, and the grader's
    verdict is a 1-5 score or a typed failure (never a silent 0)."""
    from decoevo.benchmarks import aggregate, grade
    from decoevo.lm import LM, LMConfig, RequestCache

    second = {q.id: q for q in load_llmeval_med(_published(tmp_path))}["医疗推理-1"]
    lm = LM(LMConfig(), cache=RequestCache(tmp_path / "c.sqlite"))
    calls: list[object] = []
    lm.on_call = calls.append
    try:
        skill = Skill(kind="solver", version=0, text="Answer briefly.")
        response = await solve(lm, second.view(), skill, params=GenParams(max_tokens=48))
        result = await grade(lm, second, response.text, params=GenParams(max_tokens=160))
    finally:
        await lm.aclose()
    assert response.text and len([c for c in calls if c.role == "solve"]) == 2  # type: ignore[attr-defined]
    (item,) = result.items
    assert item.value in (1.0, 2.0, 3.0, 4.0, 5.0) or (item.value is None and item.error is not None)
    summary = aggregate([result])
    assert summary.score is None or summary.score in (0.0, 100.0)  # one answer: usable or not


def test_every_benchmark_record_says_what_its_score_means():
    assert all(b.headline and b.label and b.task_spec for b in BENCHMARKS.values())
    assert "usability rate" in BENCHMARKS["llmeval_med"].headline
