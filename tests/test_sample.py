"""`data.limit` with `data.sample_seed` (issue 25 item 6): a seeded sample stratified by category, whole
conversations, instead of the first N ids (LLMEval-Med's ids start with the category, so the first 5 of
its sample file were one category and a bit)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from decoevo.benchmarks import load_llmeval_med
from decoevo.tasks.load import DataConfig, load_questions

SAMPLE = Path("/work/shared/data/llmeval_med_sample/dataset_sample.json")
pytestmark = pytest.mark.skipif(not SAMPLE.is_file(), reason="shared LLMEval-Med sample not present")


def test_a_limited_load_is_a_seeded_stratified_sample_of_whole_conversations():
    everything = load_llmeval_med(SAMPLE)
    first = load_questions(DataConfig(path=str(SAMPLE), format="llmeval_med", limit=5))
    assert len({q.meta["category_key"] for q in first}) <= 2  # the old rule: the first 5 ids
    cfg = DataConfig(path=str(SAMPLE), format="llmeval_med", limit=5, sample_seed=0)
    drawn = load_questions(cfg)
    assert len(drawn) == 5 and len({q.meta["category_key"] for q in drawn}) == 5  # one per category
    assert [q.id for q in load_questions(cfg)] == [q.id for q in drawn]  # the seed decides, nothing else
    others = {tuple(q.id for q in load_questions(cfg.model_copy(update={"sample_seed": s}))) for s in range(6)}
    assert len(others) > 1
    ten = load_questions(cfg.model_copy(update={"limit": 10}))
    assert Counter(q.meta["category_key"] for q in ten) == Counter({c: 2 for c in {q.meta["category_key"]
                                                                                    for q in everything}})
    # a later round comes with the rounds before it (LLMEval-Med: one groupCode's rounds in a category)
    for s in range(10):
        picked = load_questions(cfg.model_copy(update={"limit": 10, "sample_seed": s}))
        keys = {(q.meta["category_key"], q.meta["groupCode"], q.meta["round"]) for q in picked}
        assert all((c, g, r - 1) in keys for c, g, r in keys if r > 1), s


def test_reproduce_samples_transfers_and_records_the_seed(tmp_path):
    import yaml

    from decoevo.lm import ModelSpec
    from decoevo.reproduce import SAMPLE_SEED, DataChoice, ReproducePlan, plan_from_state

    data = {"healthbench": DataChoice("/d/hb.jsonl", "jsonl", 30), "llmeval_med": DataChoice(str(SAMPLE),
                                                                                           "llmeval_med")}
    rp = ReproducePlan(out=tmp_path, solver=ModelSpec(), grader=None, data=data, benchmarks=("healthbench",),
                       tables=("1",), transfer_limit=5)
    transfer = rp.transfer_for("healthbench")
    assert transfer is not None and transfer.config()["sample_seed"] == SAMPLE_SEED == 0
    assert rp.sweep_spec("healthbench").benchmarks[0].sample_seed == 0
    stored = yaml.safe_load(rp.to_yaml())
    assert stored["sample_seed"] == 0 and plan_from_state(tmp_path, stored).sample_seed == 0
    del stored["sample_seed"]  # a plan stored before sampling keeps its first-N questions, so it resumes
    assert plan_from_state(tmp_path, stored).transfer_for("healthbench").config().get("sample_seed") is None
