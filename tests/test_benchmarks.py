"""Benchmark loaders: the real shared files load into gold-carrying questions; malformed records name
the file, the line or record reference, and the field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from decoevo.benchmarks import (
    BENCHMARKS,
    load_benchmark,
    load_eqbench_cw,
    load_llmeval_med,
    load_researchqa,
    load_researchqa_hub,
    load_scholarqa_cs,
    load_writingbench,
    parse_checklist,
)
from decoevo.lm.errors import ConfigError
from decoevo.tasks.errors import DatasetError

from .conftest import SHARED_DATA


def shared(rel: str) -> Path:
    path = SHARED_DATA / rel
    if not path.exists():
        pytest.skip(f"shared data not present: {path}")
    return path


# ---- the real shared files ----------------------------------------------------------------------------

def test_writingbench_real_file():
    qs = load_writingbench(shared("writingbench/benchmark_all.jsonl"))
    assert len(qs) == 1000 and len({q.id for q in qs}) == 1000
    assert all(q.task == "writingbench" and q.gold and q.gold.scheme == "writingbench" for q in qs)
    assert all(len(q.gold.items) == 5 for q in qs if q.gold)
    first = qs[0].gold.items[0]
    assert set(first.extra["bands"]) == {"1-2", "3-4", "5-6", "7-8", "9-10"}
    assert {q.meta["lang"] for q in qs} == {"en", "zh"}


def test_scholarqa_real_file_ids_are_case_ids():
    qs = load_scholarqa_cs(shared("scholarqa_cs/test_configs_snippets.json"))
    assert len(qs) == 110 and len({q.id for q in qs}) == 110
    assert len({q.meta["question_key"] for q in qs}) == 100  # 10 questions annotated twice
    for q in qs:
        assert q.gold and q.gold.scheme == "scholarqa_cs" and 2 <= len(q.gold.items) <= 9
        assert sum(i.points for i in q.gold.items) == pytest.approx(0.6)
        assert q.meta["case_id"] == q.id


def test_llmeval_med_real_file_parses_checklists():
    qs = load_llmeval_med(shared("llmeval_med_sample/dataset_sample.json"))
    assert len(qs) == 20 and all(q.task == "llmeval_med" for q in qs)
    by_source = {s: [q for q in qs if q.meta["checklist_source"] == s] for s in ("checklist", "reference", "none")}
    assert [len(v) for v in by_source.values()] == [4, 4, 12]
    for q in by_source["checklist"] + by_source["reference"]:
        levels = [i.extra["level"] for i in q.gold.items]
        assert "core" in levels and "secondary" in levels and levels == sorted(levels)  # core first
        assert q.meta["checklist_raw"]
    ethics = by_source["reference"][0].gold.items
    assert len(ethics) == 5 and "第一千零三十二条" in ethics[1].text  # sub-points stay with their item
    second_round = next(q for q in qs if q.meta["round"] == 2)
    assert [t.role for t in second_round.turns] == ["user", "assistant", "user"]
    assert second_round.meta["history_complete"]


def test_eqbench_real_folder_first_and_all_modifiers():
    folder = shared("eqbench_cw_v3_sample")
    first = load_eqbench_cw(folder, "first")
    assert [q.id for q in first] == ["1-m0", "2-m0", "3-m0", "4-m0"]
    items = first[0].gold.items
    assert len(items) == 22 and sum(i.extra["negative"] for i in items) == 9
    assert "<SEED>" not in first[0].turns[0].content and first[0].meta["seed_modifier"] in first[0].turns[0].content
    every = load_eqbench_cw(folder / "creative_writing_prompts_sample.json", modifiers="all")
    assert len(every) > len(first) and [q.id for q in every] == [q.id for q in load_eqbench_cw(folder, "all")]


def test_registry_names_every_benchmark_once():
    assert set(BENCHMARKS) == {"healthbench", "writingbench", "scholarqa_cs", "researchqa", "llmeval_med",
                               "eqbench_cw", "jsonl"}
    assert len(load_benchmark("healthbench", shared("healthbench/healthbench_eval_500.jsonl"))) == 500
    assert all(b.source is not None for name, b in BENCHMARKS.items() if name != "jsonl")
    assert len({b.scheme for b in BENCHMARKS.values()}) == len(BENCHMARKS)


# ---- ResearchQA from a local file ---------------------------------------------------------------------

RQA = {"id": "rq1", "general_domain": "CS", "subdomain": "ML", "field": "NLP", "query": "How do X and Y differ?",
       "date": "2024-01", "rubric": [{"rubric_item": "Defines X", "type": ["definition"], "citation_metadata": None},
                                     {"rubric_item": "Compares costs", "type": "comparison"}]}


@pytest.mark.parametrize("as_list", [False, True])
def test_researchqa_local_jsonl_and_json(tmp_path, as_list):
    second = {**RQA, "id": 7}
    p = tmp_path / ("r.json" if as_list else "r.jsonl")
    p.write_text(json.dumps([RQA, second]) if as_list else json.dumps(RQA) + "\n" + json.dumps(second) + "\n",
                 encoding="utf-8")
    qs = load_researchqa(p)
    assert [q.id for q in qs] == ["rq1", "7"] and qs[0].task == "researchqa"
    assert qs[0].gold and qs[0].gold.scheme == "researchqa" and qs[0].gold.items[1].tags == ("comparison",)
    assert qs[0].meta["field"] == "NLP"


def test_researchqa_hub_without_package_is_a_clear_error():
    try:
        import huggingface_hub  # noqa: F401
    except ImportError:
        with pytest.raises(ConfigError, match="datasets"):
            load_researchqa_hub("test")
    else:
        pytest.skip("huggingface_hub installed; the hub path is not exercised offline")
    with pytest.raises(ConfigError, match="split"):
        load_researchqa_hub("train")


# ---- checklist parsing ------------------------------------------------------------------------------

def test_parse_checklist_numbered_and_unnumbered():
    assert parse_checklist("核心需求：\n1. 内容要求：甲\n2. 乙\n续行\n\n次要需求：\n1. 丙") == [
        ("core", "内容要求：甲"), ("core", "乙\n续行"), ("secondary", "丙")]
    assert parse_checklist("一、核心需求：\n甲\n乙，其中必须包括：\n- 子一\n子一续\n\n二、次要需求：\n丙\n丁") == [
        ("core", "甲"), ("core", "乙，其中必须包括：\n- 子一\n子一续"), ("secondary", "丙"), ("secondary", "丁")]
    assert parse_checklist("只写了一条要求") == [("unspecified", "只写了一条要求")]
    assert parse_checklist("核心需求：\n\n") == []


# ---- malformed records ----------------------------------------------------------------------------------

WB = {"index": 1, "domain1": "A", "domain2": "B", "lang": "en", "query": "Write a memo.",
      "checklist": [{"name": "Tone", "criteria_description": "Formal tone", "1-2": "bad", "9-10": "good"}]}


def _jsonl(tmp_path: Path, records: list[object], name: str = "d.jsonl") -> Path:
    p = tmp_path / name
    p.write_text("\n".join(r if isinstance(r, str) else json.dumps(r, ensure_ascii=False) for r in records) + "\n",
                 encoding="utf-8")
    return p


def _json(tmp_path: Path, data: object, name: str = "d.json") -> Path:
    p = tmp_path / name
    p.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    return p


def _check(err: DatasetError, path: Path, line: int | None, field: str | None, fragment: str) -> None:
    assert err.path == str(path) and str(path) in str(err)
    assert err.line == line and err.field == field and fragment in str(err), str(err)


@pytest.mark.parametrize("bad,field,fragment", [
    ({**WB, "query": ""}, "query", "non-empty"),
    ({k: v for k, v in WB.items() if k != "checklist"}, "checklist", "missing"),
    ({**WB, "checklist": [{"name": "Tone"}]}, "checklist[0].criteria_description", "missing"),
    ({**WB, "checklist": ["Tone"]}, "checklist[0]", "JSON object"),
    ({**WB, "index": None}, "index", "missing"),
    (WB, "id", "duplicate"),
])
def test_writingbench_malformed(tmp_path, bad, field, fragment):
    p = _jsonl(tmp_path, [WB, bad])
    with pytest.raises(DatasetError) as info:
        load_writingbench(p)
    _check(info.value, p, 2, field, fragment)


SQ = {"initial_prompt": "Q?", "case_id": "c1", "annotator": "A", "agreement": True,
      "metric_config": {"name": "rubric", "config": {"question": "Q?", "other_properties": [
          {"name": "most_important_item_0", "criterion": "Mentions X", "weight": 0.6, "evidence": ["e"]}]}}}


def _sq_with(prop: dict) -> dict:
    return {**SQ, "case_id": "c2", "metric_config": {"config": {"other_properties": [prop]}}}


@pytest.mark.parametrize("bad,field,fragment", [
    ({**SQ, "case_id": "c2", "initial_prompt": None}, "$[1].initial_prompt", "missing"),
    ({**SQ, "case_id": "c2", "metric_config": {"config": {}}}, "$[1].metric_config.config.other_properties",
     "missing"),
    (_sq_with({"criterion": "x", "weight": 0}), "$[1].metric_config.config.other_properties[0].weight", "positive"),
    (_sq_with({"criterion": "x", "weight": 1, "evidence": "e"}),
     "$[1].metric_config.config.other_properties[0].evidence", "list of strings"),
    ({**SQ, "case_id": "c2", "metric_config": "x"}, "$[1].metric_config", "JSON object"),
    (SQ, "$[1].id", "duplicate"),
    ("not a record", "$[1]", "JSON object"),
])
def test_scholarqa_malformed(tmp_path, bad, field, fragment):
    p = _json(tmp_path, [SQ, bad])
    with pytest.raises(DatasetError) as info:
        load_scholarqa_cs(p)
    _check(info.value, p, None, field, fragment)


def test_json_files_report_syntax_errors_by_line(tmp_path):
    p = tmp_path / "d.json"
    p.write_text('[\n{"case_id": "c1",\n oops}\n]', encoding="utf-8")
    with pytest.raises(DatasetError) as info:
        load_scholarqa_cs(p)
    _check(info.value, p, 3, None, "not valid JSON")
    with pytest.raises(DatasetError, match="must be a JSON list"):
        load_scholarqa_cs(_json(tmp_path, {"a": 1}, "o.json"))


@pytest.mark.parametrize("bad,field,fragment", [
    ({**RQA, "id": "rq2", "query": 3}, "query", "non-empty string"),
    ({**RQA, "id": "rq2", "rubric": []}, "rubric", "non-empty list"),
    ({**RQA, "id": "rq2", "rubric": [{"type": ["x"]}]}, "rubric[0].rubric_item", "missing"),
    ({**RQA, "id": "rq2", "rubric": [{"rubric_item": "x", "type": [1]}]}, "rubric[0].type", "list of strings"),
    ({k: v for k, v in RQA.items() if k != "id"}, "id", "missing"),
])
def test_researchqa_malformed_jsonl(tmp_path, bad, field, fragment):
    p = _jsonl(tmp_path, [RQA, bad])
    with pytest.raises(DatasetError) as info:
        load_researchqa(p)
    _check(info.value, p, 2, field, fragment)


def test_researchqa_malformed_json_list_names_the_record(tmp_path):
    p = _json(tmp_path, [RQA, {**RQA, "id": "rq2", "rubric": [{"rubric_item": ""}]}])
    with pytest.raises(DatasetError) as info:
        load_researchqa(p)
    _check(info.value, p, None, "$[1].rubric[0].rubric_item", "non-empty")


MED = {"category1": "医疗知识", "category2": "x", "scene": "s", "round": 1, "problem": "为什么？", "groupCode": 1,
       "sanswer": "因为。", "difficulty": "中", "checklist": "核心需求：\n1. 解释原因\n\n次要需求：\n1. 举例"}


@pytest.mark.parametrize("bad,field,fragment", [
    ({**MED, "problem": ""}, '$["医疗知识"][1].problem', "non-empty"),
    ({**MED, "sanswer": ["a"]}, '$["医疗知识"][1].sanswer', "text"),
    ({**MED, "checklist": ["a"]}, '$["医疗知识"][1].checklist', "text"),
    ({**MED, "checklist": "核心需求：\n"}, '$["医疗知识"][1].checklist', "no requirement"),
    ({**MED, "round": 0}, '$["医疗知识"][1].round', "positive integer"),
    ({**MED, "groupCode": [1]}, '$["医疗知识"][1].groupCode', "integer"),
    ("oops", '$["医疗知识"][1]', "JSON object"),
])
def test_llmeval_med_malformed(tmp_path, bad, field, fragment):
    p = _json(tmp_path, {"医疗知识": [MED, bad]})
    with pytest.raises(DatasetError) as info:
        load_llmeval_med(p)
    _check(info.value, p, None, field, fragment)


def test_llmeval_med_top_level_shapes(tmp_path):
    with pytest.raises(DatasetError, match="keyed by category"):
        load_llmeval_med(_json(tmp_path, [MED]))
    p = _json(tmp_path, {"医疗知识": MED}, "b.json")
    with pytest.raises(DatasetError) as info:
        load_llmeval_med(p)
    _check(info.value, p, None, '$["医疗知识"]', "list of records")


def test_llmeval_med_nan_checklist_and_missing_history(tmp_path):
    p = tmp_path / "m.json"
    p.write_text('{"k": [{"problem": "再问", "sanswer": "答", "round": 2, "groupCode": 9, "checklist": NaN}]}',
                 encoding="utf-8")
    (q,) = load_llmeval_med(p)
    assert q.meta["checklist_source"] == "none" and not q.meta["history_complete"] and len(q.turns) == 1
    assert q.gold and q.gold.items[0].extra["level"] == "reference"


def _eq_folder(tmp_path: Path, prompts: object, negative: str = "Meandering\n") -> Path:
    (tmp_path / "creative_writing_criteria.txt").write_text("Coherent\nMeandering\n", encoding="utf-8")
    (tmp_path / "negative_criteria.txt").write_text(negative, encoding="utf-8")
    (tmp_path / "creative_writing_prompts.json").write_text(json.dumps(prompts), encoding="utf-8")
    return tmp_path


EQ = {"category": "c", "title": "t", "writing_prompt": "Write. <SEED> 500 words.", "seed_modifiers": ["A", "B"]}


@pytest.mark.parametrize("bad,field,fragment", [
    ({**EQ, "writing_prompt": "Write."}, '$["2"].writing_prompt', "<SEED>"),
    ({**EQ, "seed_modifiers": []}, '$["2"].seed_modifiers', "non-empty list"),
    ({**EQ, "seed_modifiers": ["A", 3]}, '$["2"].seed_modifiers[1]', "non-empty string"),
    ({k: v for k, v in EQ.items() if k != "writing_prompt"}, '$["2"].writing_prompt', "missing"),
])
def test_eqbench_malformed_prompts(tmp_path, bad, field, fragment):
    folder = _eq_folder(tmp_path, {"1": EQ, "2": bad})
    with pytest.raises(DatasetError) as info:
        load_eqbench_cw(folder)
    _check(info.value, folder / "creative_writing_prompts.json", None, field, fragment)


def test_eqbench_criteria_files_are_checked(tmp_path):
    folder = _eq_folder(tmp_path, {"1": EQ}, negative="Purple Prose\n")
    with pytest.raises(DatasetError, match=r"not in creative_writing_criteria\.txt"):
        load_eqbench_cw(folder)
    (folder / "negative_criteria.txt").unlink()
    with pytest.raises(DatasetError, match="file not found"):
        load_eqbench_cw(folder)
    with pytest.raises(ConfigError):
        load_eqbench_cw(folder, modifiers="some")


def test_missing_files_are_dataset_errors(tmp_path):
    for loader in (load_writingbench, load_scholarqa_cs, load_researchqa, load_llmeval_med, load_eqbench_cw):
        with pytest.raises(DatasetError, match="not found"):
            loader(tmp_path / "absent.json")
