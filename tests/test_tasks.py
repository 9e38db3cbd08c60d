"""Loading questions and drawing splits: good input works, bad input names file, line and field."""

from __future__ import annotations

import json

import pytest

from decoevo.benchmarks import load_healthbench, load_jsonl_questions
from decoevo.domain import Question
from decoevo.lm.errors import ConfigError
from decoevo.presets import bundled_healthbench
from decoevo.tasks.errors import DatasetError
from decoevo.tasks.splits import SPLIT_NAMES, SplitSizes, check_disjoint, make_splits

from .conftest import SHARED_DATA


def write(tmp_path, lines, name="q.jsonl"):
    p = tmp_path / name
    p.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return p


def test_plain_jsonl_with_text_and_conversation_prompts(tmp_path):
    p = write(tmp_path, [
        json.dumps({"id": "a", "prompt": "What is 2+2?"}),
        json.dumps({"id": "b", "prompt": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hey"},
                                          {"role": "user", "content": "help me"}],
                    "gold": {"scheme": "weighted", "items": [{"text": "is kind", "points": 2}]}}),
    ])
    qs = load_jsonl_questions(p, task="generic")
    assert [q.id for q in qs] == ["a", "b"]
    assert qs[1].gold is not None and qs[1].gold.items[0].points == 2
    assert "[assistant]" in qs[1].as_text()
    view = qs[1].view()
    assert not hasattr(view, "gold") and "gold" not in view.model_dump()


@pytest.mark.parametrize("lines,line,field,fragment", [
    (['{"id": "a", "prompt": "x"}', '{"id": "b", "prompt": '], 2, None, "not valid JSON"),
    (['{"prompt": "x"}'], 1, "id", "missing"),
    (['{"id": "a"}'], 1, "prompt", "missing"),
    (['{"id": "a", "prompt": ""}'], 1, "prompt", "empty"),
    (['{"id": "a", "prompt": "x"}', '{"id": "a", "prompt": "y"}'], 2, "id", "duplicate"),
    (['{"id": "a", "prompt": [{"role": "robot", "content": "x"}]}'], 1, "prompt", "role"),
    (['{"id": "a", "prompt": [{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}]}'], 1,
     "turns", "last turn"),
    (['{"id": "a", "prompt": "x", "gold": {"items": []}}'], 1, "gold.items", "at least one"),
    (['[1, 2]'], 1, None, "JSON object"),
])
def test_bad_lines_name_file_line_and_field(tmp_path, lines, line, field, fragment):
    p = write(tmp_path, lines)
    with pytest.raises(DatasetError) as info:
        load_jsonl_questions(p)
    err = info.value
    assert err.line == line and err.field == field and fragment in str(err)
    assert str(p) in str(err)


def test_non_utf8_and_missing_and_empty_files(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b'{"id": "a", "prompt": "x"}\n{"id": "b", "prompt": "\xff"}\n')
    with pytest.raises(DatasetError, match=r"line 2.*UTF-8"):
        load_jsonl_questions(bad)
    with pytest.raises(DatasetError, match="not found"):
        load_jsonl_questions(tmp_path / "nope.jsonl")
    with pytest.raises(DatasetError, match="no questions"):
        load_jsonl_questions(write(tmp_path, [""], "empty.jsonl"))


def test_healthbench_bundled_sample_and_shared_subset():
    qs = load_healthbench(bundled_healthbench())
    assert len(qs) == 24 and all(q.task == "healthbench" and q.gold for q in qs)
    assert any(i.points < 0 for q in qs for i in q.gold.items)
    shared = SHARED_DATA / "healthbench" / "healthbench_eval_500.jsonl"
    if shared.exists():
        full = load_healthbench(shared)
        assert len(full) == 500 and sum(len(q.gold.items) for q in full) == 5965


def test_healthbench_empty_rubric_is_an_error(tmp_path):
    p = write(tmp_path, [json.dumps({"prompt_id": "x", "prompt": [{"role": "user", "content": "hi"}], "rubrics": []})])
    with pytest.raises(DatasetError, match=r"rubrics.*empty"):
        load_healthbench(p)


def questions(n):
    return [Question.from_text(f"q{i}", f"question {i}") for i in range(n)]


def test_splits_are_deterministic_disjoint_and_sized():
    sizes = SplitSizes(pilot=1, train=4, probe=2, solver_gate=2, generator_gate=2, diagnostic=1, test=3)
    a, b = make_splits(questions(20), sizes, seed=3), make_splits(questions(20), sizes, seed=3)
    assert a.ids() == b.ids()
    assert a.ids() != make_splits(questions(20), sizes, seed=4).ids()
    ids = [i for name in SPLIT_NAMES for i in a.ids()[name]]
    assert len(ids) == len(set(ids)) == sizes.total()
    assert [len(a.ids()[n]) for n in SPLIT_NAMES] == [1, 4, 2, 2, 2, 1, 3]


def test_split_errors():
    with pytest.raises(ConfigError, match="ask for 18 questions but the data has 5"):
        make_splits(questions(5), SplitSizes(), seed=0)
    with pytest.raises(ConfigError, match="'train' is empty"):
        make_splits(questions(20), SplitSizes(train=0), seed=0)
    q = questions(2)
    with pytest.raises(ConfigError, match="both the train and the test split"):
        check_disjoint({"train": q, "test": q[:1]})


@pytest.mark.parametrize("fmt,rel", [("writingbench", "writingbench/benchmark_all.jsonl"),
                                     ("scholarqa_cs", "scholarqa_cs/test_configs_snippets.json"),
                                     ("healthbench", "healthbench/healthbench_eval_500.jsonl")])
def test_run_config_loads_every_benchmark_format(fmt, rel):
    from decoevo.engine.config import DataConfig
    from decoevo.tasks.load import load_questions

    path = SHARED_DATA / rel
    if not path.exists():
        pytest.skip(f"{path} not present")
    questions = load_questions(DataConfig(path=str(path), format=fmt, limit=5))
    assert len(questions) == 5 and all(q.gold is not None for q in questions)


def test_annotations_of_one_question_stay_in_one_split():
    qs = [Question.from_text(f"c{i}", f"question {i // 2}").model_copy(update={"meta": {"question_key": str(i // 2)}})
          for i in range(20)]
    splits = make_splits(qs, SplitSizes(train=5, probe=2, solver_gate=3, generator_gate=2), seed=1)
    where = {}
    for name, ids in splits.ids().items():
        for qid in ids:
            where.setdefault(int(qid[1:]) // 2, set()).add(name)
    assert all(len(names) == 1 for names in where.values())
    assert len(splits.train) in (5, 6)


@pytest.mark.parametrize("preset", ["quick", "default", "paper", "lean", "paper-full"])
def test_every_preset_holds_out_a_test_split_when_the_data_allows(preset):
    """Issue 9 item 7: `decoevo eval` needs a test split on a run started from any preset; the README's
    first run (quick) and `--preset default` fit the bundled sample, `paper` fits a full benchmark."""
    from decoevo.engine.config import config_from_dict, deep_merge
    from decoevo.engine.run import build_splits
    from decoevo.methods import get_method
    from decoevo.presets import PRESETS

    config = config_from_dict(deep_merge(PRESETS[preset], {"data": {"path": bundled_healthbench(),
                                                                    "format": "healthbench"}}))
    big = preset in ("paper", "lean", "paper-full")
    data = load_healthbench(bundled_healthbench()) if not big else questions(config.splits.total())
    splits = build_splits(config, get_method("decoevo"), data)
    assert len(splits.test) == config.splits.test > 0
    if big:  # more than the data holds: a one-line error naming every requested split
        total = config.splits.total()
        with pytest.raises(ConfigError, match=rf"ask for {total} questions but the data has 24 \(.*test 100\).*"
                                              r"splits\.test"):
            build_splits(config, get_method("decoevo"), load_healthbench(bundled_healthbench()))


def test_the_graded_splits_take_questions_with_a_gold_rubric_first_when_the_data_mixes_them() -> None:
    """A promptfoo config whose tests do not all hold an llm-rubric: test and diagnostic get the gold ones, so
    `decoevo compare` on the run's test split grades; data all one way is cut as it always was."""
    from decoevo.domain import GoldItem, GoldRubric, Question, Turn
    from decoevo.tasks.splits import SplitSizes, make_splits

    gold = GoldRubric(scheme="weighted", items=(GoldItem(text="x", points=1.0),))
    qs = [Question(id=f"q{i:02d}", turns=(Turn(role="user", content=f"q{i}"),), gold=gold if i % 3 == 0 else None)
          for i in range(24)]
    sizes = SplitSizes(train=6, probe=3, solver_gate=4, generator_gate=3, diagnostic=2, test=4)
    for seed in range(5):
        splits = make_splits(qs, sizes, seed)
        assert all(q.gold is not None for q in (*splits.test, *splits.diagnostic))
        assert sum(len(getattr(splits, n)) for n in ("train", "probe", "solver_gate", "generator_gate")) == 16
        every_gold = [q.model_copy(update={"gold": gold}) for q in qs]
        assert make_splits(every_gold, sizes, seed).ids() == make_splits(
            [q.model_copy(update={"gold": None}) for q in qs], sizes, seed).ids()  # one way: the plain cut
