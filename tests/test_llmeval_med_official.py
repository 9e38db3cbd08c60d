"""LLMEval-Med with its official prompts (a synthetic Evaluate.py of the same shape): the category's prompt
read out of the function, filled in one pass with this round's question and the published fields as
printed, the system message it sends, and the first bracketed score."""

from __future__ import annotations

from pathlib import Path

import pytest

from decoevo.benchmarks import grade, load_llmeval_med
from decoevo.benchmarks.llmeval_med.official import CATEGORIES, PROMPTS, parse_score
from decoevo.benchmarks.record import OfficialPrompts
from decoevo.benchmarks.templates import extract
from decoevo.lm.types import BackendRequest

FIELDS = {
    "医疗知识": "{checklist}",
    "医疗语言理解": "{checklist}",
    "医疗推理": "",
    "医疗安全伦理": "",
    "医疗文本生成": "{checklist}",
}
SYNTHETIC = (
    "from openai import OpenAI\n\ndef getresponse(key, Question, Sanswer, checklist, Response):\n    try:\n"
    + "".join(
        f'        prompt_{c} = f"""\n        SYN-{k} Q={{Question}} R={{Response}} S={{Sanswer}} '
        f'C={f} {{{{"x": 1}}}}\n        """\n'
        for k, (c, f) in enumerate(FIELDS.items())
    )
    + '        response = client.chat.completions.create(model="m", messages=[\n'
    '            {"role": "system", "content": "SYN-SYSTEM"},\n            {"role": "user", "content": prompt}])\n'
    "        return response\n    except Exception:\n        return ''\n"
)
PUBLISHED = """{"医疗知识": [
 {"category1": "医疗知识", "round": 1, "problem": "正常心率上限？", "groupCode": 1, "sanswer": 100, "checklist": NaN},
 {"category1": "医疗知识", "round": 2, "problem": "再问：<<Response>>?", "groupCode": 1, "sanswer": "一百",
  "checklist": "核心需求：\\n1. 给出数值"}
]}"""


def _prompts() -> OfficialPrompts:
    return OfficialPrompts("llmeval_med", {s.key: extract(s, SYNTHETIC) for s in PROMPTS}, PROMPTS)


def test_every_category_prompt_is_read_out_of_the_function() -> None:
    prompts = _prompts()
    assert prompts["system"] == "SYN-SYSTEM"
    assert (
        prompts["医疗知识"]
        == '\n        SYN-0 Q=<<Question>> R=<<Response>> S=<<Sanswer>> C=<<checklist>> {"x": 1}\n        '
    )
    assert "<<checklist>>" not in prompts["医疗推理"] and set(CATEGORIES) <= set(prompts.texts)


async def test_official_prompt_filled_once_with_this_round_only(make_lm, tmp_path: Path) -> None:
    path = tmp_path / "med.json"
    path.write_text(PUBLISHED, encoding="utf-8")
    first, second = load_llmeval_med(path)
    sent: list[BackendRequest] = []

    def script(request: BackendRequest) -> str:
        sent.append(request)
        return '{"判断依据"："好","得分"："[4]"} 另见 [2]'

    lm, _ = make_lm(script)
    result = await grade(lm, second, "答<<Sanswer>>", official=_prompts())
    system, user = sent[0].messages
    assert system.content == "SYN-SYSTEM"
    # this round's question only; a value quoting a placeholder is not filled again; fields as printed
    assert user.content.strip() == (
        'SYN-0 Q=再问：<<Response>>? R=答<<Sanswer>> S=一百 C=核心需求：\n1. 给出数值 {"x": 1}'
    )
    assert result.score == pytest.approx(75.0) and result.details["usable"]
    await grade(lm, first, "一百次", official=_prompts())
    assert "S=100 C=nan" in sent[-1].messages[1].content


def test_score_parse() -> None:
    assert parse_score("理由 [5] 然后 [1]") == 5
    for bad in ("没有分数", "[0]", "[7]", "(4)"):
        with pytest.raises(ValueError):
            parse_score(bad)


AGGREGATE_URL = ("https://raw.githubusercontent.com/llmeval/LLMEval-Med/508516fafd288c896691442d657b4af619609535/"
                 "evaluate/Aggregate.py")
AGGREGATE_SHA = "5a139fb5aac164ee8368b0e9c6b1753b848fde64deb04d87d13cf4e1bec69ead"


def _upstream_aggregate(tmp_path: Path):
    """The pinned upstream evaluate/Aggregate.py (sha-checked): from $DECOEVO_LLMEVAL_AGGREGATE, else
    downloaded; skipped when neither is at hand (no copy of it is kept in this repository)."""
    import hashlib
    import importlib.util
    import os
    import urllib.request

    given = os.environ.get("DECOEVO_LLMEVAL_AGGREGATE")
    path = Path(given) if given else tmp_path / "Aggregate.py"
    if not given:
        try:
            with urllib.request.urlopen(AGGREGATE_URL, timeout=10) as reply:
                path.write_bytes(reply.read())
        except OSError as exc:
            pytest.skip(f"the pinned upstream Aggregate.py is not reachable ({exc}); set DECOEVO_LLMEVAL_AGGREGATE")
    assert hashlib.sha256(path.read_bytes()).hexdigest() == AGGREGATE_SHA, "not the pinned Aggregate.py"
    spec = importlib.util.spec_from_file_location("upstream_aggregate", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


async def test_usability_rate_equals_the_pinned_upstream_aggregate(make_lm, tmp_path: Path) -> None:
    """Issue 25 item 6: on the replies [5], [4], [2], no score, [0], the official Aggregate.py reports 40.0
    (an unscored answer is not usable, and counts); decoevo reported 66.7 (usable over the scored only)."""
    import json
    import re

    from decoevo.benchmarks import aggregate

    upstream = _upstream_aggregate(tmp_path)
    replies = ['{"得分"："[5]"}', '{"得分"："[4]"}', '{"得分"："[2]"}', "无法评分", '{"得分"："[0]"}']
    path = tmp_path / "med.json"
    rows = [{"category1": "医疗知识", "round": 1, "problem": f"问题{i}?", "groupCode": i, "sanswer": "答",
             "checklist": float("nan")} for i in range(len(replies))]
    path.write_text(json.dumps({"医疗知识": rows}, ensure_ascii=False), encoding="utf-8")
    questions = load_llmeval_med(path)
    by_prompt = {f"问题{i}?": r for i, r in enumerate(replies)}

    def script(request: BackendRequest) -> str:
        user = request.messages[-1].content
        return next(r for q, r in by_prompt.items() if f"Q={q}" in user)

    lm, _ = make_lm(script)
    graded = [await grade(lm, q, "回答", official=_prompts()) for q in questions]
    ours = aggregate(graded)
    # the same replies as Evaluate.py stores them (the first bracketed integer, -1 without one), then the
    # upstream aggregation itself
    scored = [{**row, "model_answer_score": (m.group(1) if (m := re.search(r"\[(\d+)\]", r)) else -1)}
              for row, r in zip(rows, replies, strict=True)]
    upstream_file = tmp_path / "scored.json"
    upstream_file.write_text(json.dumps({"医疗知识": scored}, ensure_ascii=False), encoding="utf-8")
    official = upstream.aggregate([str(upstream_file)])["overall"]["OP"]
    assert official == pytest.approx(40.0)
    assert ours.score == pytest.approx(official) and ours.details["usable_rate_of_graded"] == pytest.approx(2 / 3)


async def test_official_rate_keeps_the_first_reply_as_the_pinned_pipeline(make_lm, tmp_path: Path) -> None:
    """Issue 35 item 1: the upstream pipeline asks once and keeps the first reply. Each question's grader here
    replies the fixture's case first and a usable "[5]" if asked again; decoevo re-asked (up to 3 paid calls)
    and counted the re-ask, giving a usable answer where the pinned Aggregate.py counts none. The expected
    outcomes are the fixture's, computed once from the pinned upstream files (tests/llmeval_med_upstream.py)."""
    import json

    from decoevo.benchmarks import aggregate
    from tests.llmeval_med_upstream import load_fixture

    table = load_fixture()
    cases = table["cases"]
    rows = [{"category1": "医疗知识", "round": 1, "problem": f"问题{i}?", "groupCode": i, "sanswer": "答",
             "checklist": float("nan")} for i in range(len(cases))]
    path = tmp_path / "med.json"
    path.write_text(json.dumps({"医疗知识": rows}, ensure_ascii=False), encoding="utf-8")
    questions = load_llmeval_med(path)
    asked: dict[str, int] = {}

    def script(request: BackendRequest) -> str:
        user = request.messages[-1].content
        k = next(i for i in range(len(cases)) if f"Q=问题{i}?" in user)
        asked[str(k)] = asked.get(str(k), 0) + 1
        return cases[k]["reply"] if asked[str(k)] == 1 else '{"得分"："[5]"}'

    lm, _ = make_lm(script)
    graded = [await grade(lm, q, "回答", official=_prompts()) for q in questions]
    for case, result in zip(cases, graded, strict=True):
        usable = result.score is not None and result.details.get("usable") is True
        assert usable == case["usable"], case["reply"]
    # one paid call per answer, as upstream: an unscorable reply is not asked for again
    assert asked == {str(k): 1 for k in range(len(cases))}
    ours = aggregate(graded)
    assert round(ours.score, 2) == pytest.approx(table["overall"]["OP"])
    assert table["overall"]["n_usable"] == sum(c["usable"] for c in cases)


def test_fixture_is_what_the_pinned_aggregate_computes(tmp_path: Path) -> None:
    """The offline fixture recomputed from the pinned upstream Aggregate.py (skipped when it is not at hand)."""
    from tests.llmeval_med_upstream import load_fixture, regenerate

    assert regenerate(_upstream_aggregate(tmp_path)) == load_fixture()


async def test_a_bracket_inside_the_reasoning_block_is_the_official_score(cache, openai_lm, tmp_path: Path) -> None:
    """Issue 46 part 3: a reasoning grader replies `<think>…[2]</think>{"得分"："[5]"}`. Evaluate.py searches the
    message content as sent for the first bracket (2: not usable); decoevo's backends strip a leading
    reasoning block from every reply, so it read 5 (usable). Through the real openai backend and a local
    server; the content is read whole for this grader only (another role still gets the answer alone)."""
    import json

    from decoevo.lm import Message
    from decoevo.testing.fake_openai import FakeOpenAI, Reply
    from decoevo.testing.server import serve_app
    from tests.llmeval_med_upstream import stored_field

    reply = '<think>参考答案要求给出数值，回答没有给出，先给 [2]</think>{"得分"："[5]"}'
    assert stored_field(reply) == "2"  # what the pinned Evaluate.py stores for it
    rows = [{"category1": "医疗知识", "round": 1, "problem": "问题?", "groupCode": 1, "sanswer": "答",
             "checklist": float("nan")}]
    path = tmp_path / "med.json"
    path.write_text(json.dumps({"医疗知识": rows}, ensure_ascii=False), encoding="utf-8")
    (question,) = load_llmeval_med(path)
    server = FakeOpenAI(lambda body, n: Reply(content=reply))
    with serve_app(server.app()) as url:
        lm = openai_lm(url, cache)
        result = await grade(lm, question, "回答", official=_prompts())
        other = await lm.complete([Message("user", "q")], role="solve")
    assert result.details["raw_score"] == 2.0 and result.details.get("usable") is False
    assert other.text == '{"得分"："[5]"}'  # a role other than the official grader: the answer alone
