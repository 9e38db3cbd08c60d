"""Tokens per call behind the plan's dollars (issue 25 item 2): a completion is what a model writes, capped by
the role's limit, not the limit; a prompt is what the role's own builder makes of the plan's material; a
grader call's tokens come from the grader's own requests; and where the experiment's ledgers exist, the
tokens per call they measured replace the model (a rerun's plan)."""

from __future__ import annotations

import json
from importlib import resources

from decoevo.engine.config import config_from_dict, deep_merge
from decoevo.engine.tokens import CallTokens, role_tokens
from decoevo.lm import ModelSpec
from decoevo.presets import PRESETS
from decoevo.reproduce.bill import bench_bill
from decoevo.reproduce.plan import DataChoice, ReproducePlan

from .test_reproduce import write


def hyper(**extra):
    return config_from_dict(deep_merge(PRESETS["quick"], {"method": "decoevo", "data": {"path": "q.jsonl"},
                                                          "hyper": extra})).hyper


def test_a_completion_is_what_a_model_writes_capped_by_the_limit_not_the_limit():
    roomy, tight = role_tokens(hyper(max_tokens_solve=4000)), role_tokens(hyper(max_tokens_solve=40))
    assert 200 < roomy["solve"].completion < 1000  # about a HealthBench answer, far below a 4,000 limit
    assert tight["solve"].completion <= 40
    # a judge quotes the answer: a shorter limit, a shorter prompt
    assert tight["judge"].prompt < roomy["judge"].prompt - 100
    # a longer question, longer prompts for every role that quotes it
    short, long = role_tokens(hyper(), 100.0), role_tokens(hyper(), 4100.0)
    assert all(long[r].prompt - short[r].prompt > 900 for r in ("solve", "generate_rubric", "judge"))


def _plan(tmp_path):
    sample = resources.files("decoevo.data").joinpath("healthbench_sample.jsonl")
    return ReproducePlan(out=tmp_path / "out", solver=ModelSpec(), grader=None, benchmarks=("healthbench",),
                         tables=("1",), seeds=(0,), preset="quick",
                         data={"healthbench": DataChoice(str(sample), "healthbench"),
                               "llmeval_med": DataChoice(str(write(tmp_path / "med.jsonl", 5)), "jsonl")}), sample


def test_grader_calls_are_priced_from_the_graders_own_requests(tmp_path):
    rp, sample = _plan(tmp_path)
    price = lambda p, c: p + c  # noqa: E731 - tokens as the price
    bill = bench_bill(rp, "healthbench", hyper(), price, price)
    health, med = bill.grader[str(sample)], bill.grader[str(tmp_path / "med.jsonl")]
    # HealthBench's grader quotes the whole conversation and one rubric item per call: longer than a call
    # grading a one-line question of the custom file
    assert health.prompt > med.prompt > 50 and 0 < health.completion <= 2048


def test_a_rerun_prices_each_role_at_the_tokens_per_call_its_ledgers_measured(tmp_path):
    rp, _ = _plan(tmp_path)
    price = lambda p, c: p + c  # noqa: E731
    before = bench_bill(rp, "healthbench", hyper(), price, price)
    run = rp.sweep_dir("healthbench") / "runs" / "healthbench" / "decoevo-s0"
    (run / "eval").mkdir(parents=True)
    row = {"model": "default", "calls": 10, "prompt_tokens": 50_000, "completion_tokens": 1_000}
    (run / "ledger.json").write_text(json.dumps({"rows": [{"role": "judge", **row}]}))
    (run / "eval" / "ledger-test.json").write_text(json.dumps({"rows": [{"role": "solve", **row}]}))
    after = bench_bill(rp, "healthbench", hyper(), price, price)
    assert after.training["judge"] == CallTokens(5_000, 100) != before.training["judge"]
    assert after.solve == CallTokens(5_000, 100)
    assert after.training["generate_rubric"] == before.training["generate_rubric"]  # no call measured: modelled
