"""The estimate counts the repeats of a run's batches from the run's own draws (engine/batches.py): with few
train questions a batch is often drawn again while the solver skill stands, and its rewrite, candidate and
gate scores then come from the cache. The closed form counted only repeated questions: in the simulated
reproduce at quick sizes it put SkillOpt at 52 paid calls where runs paid 33-55 by seed."""

from __future__ import annotations

import json

import pytest

from decoevo.engine.batches import draws, repeats
from decoevo.engine.config import config_from_dict, deep_merge
from decoevo.engine.estimate import estimate_calls
from decoevo.engine.run import Engine
from decoevo.lm import LM, LMConfig, RequestCache
from decoevo.methods import get_method
from decoevo.presets import PRESETS
from decoevo.testing.sim_backend import SimBackend, run_virtual
from decoevo.testing.toy_server import write_toy_questions


def _run(tmp_path, seed: int):
    data = write_toy_questions(tmp_path / "q.jsonl", 30)
    config = config_from_dict(deep_merge(PRESETS["quick"], {
        "method": "skillopt", "seed": seed, "data": {"path": str(data), "format": "jsonl"},
        "hyper": {"steps": 8}}))
    lm = LM(LMConfig(), backends={"default": SimBackend(seed=0)}, cache=RequestCache(tmp_path / "cache.sqlite"))
    result, _ = run_virtual(Engine(config, tmp_path / "run", lm=lm).run_async())
    lm.cache.close()
    return config, result


def test_the_draws_are_the_batches_the_run_drew_and_their_repeats_are_counted(tmp_path):
    config, result = _run(tmp_path, seed=0)
    train = json.loads((tmp_path / "run" / "splits.json").read_text())["train"]
    events = [json.loads(line) for line in (tmp_path / "run" / "events.jsonl").read_text().splitlines()]
    drawn = [frozenset(train.index(q) for q in e["batch_scores"]) for e in events if e["event"] == "inner_step"]
    assert drawn == draws(0, 8, len(train), config.hyper.batch_size)
    assert len(set(drawn)) < len(drawn)  # seed 0 draws a batch again: the case the estimate must see
    est = estimate_calls(get_method("skillopt"), config.hyper, config.splits, seed=0)
    rewrites = result.ledger.by_role()["rewrite_solver"].calls
    assert est.calls_by_role()["rewrite_solver"] < config.hyper.steps  # not one paid rewrite per step
    assert 0.75 * rewrites <= est.calls_by_role()["rewrite_solver"] <= 1.25 * rewrites + 1


def test_repeats_follow_the_closed_form_on_average_and_stop_at_their_bound():
    every = [repeats(seed, 8, 4, 2, 0.8) for seed in range(200)]
    assert all(r is not None for r in every)
    mean_new = sum(r.new_batch for r in every if r is not None) / len(every)
    from decoevo.engine.estimate import fresh_share

    assert abs(mean_new - fresh_share(8, 1 / 6, 0.8)) < 0.03  # 6 possible batches of 2 among 4
    assert repeats(0, 10**7, 60, 6, 0.8) is None  # past EXACT_STEPS: nothing sized by the step count runs


def test_a_run_drawing_its_batches_again_is_more_likely_to_end_on_the_initial_skill():
    from decoevo.engine.sharing import distinct_evaluations, run_share

    config = config_from_dict(deep_merge(PRESETS["quick"], {"method": "skillopt", "data": {"path": "q.jsonl"},
                                                            "hyper": {"steps": 6}}))
    h, sizes = config.hyper, config.splits
    zero = run_share(get_method("zero_shot"), h, sizes)
    # seed 0 draws one batch at steps 2-5: 3 distinct rewrites, not 6, so more runs end where zero-shot is
    by_draws = distinct_evaluations([zero, run_share(get_method("skillopt"), h, sizes, seed=0)])["skillopt"]
    closed = distinct_evaluations([zero, run_share(get_method("skillopt"), h, sizes)])["skillopt"]
    assert by_draws < closed - 0.05  # 0.55 and 0.65: the share of its test answers it pays for


def test_past_t_every_rewrite_is_a_fresh_sample_so_no_step_there_repeats_one():
    # Budget-Matched and topped-up runs ask for a fresh rewrite sample past T (engine/top_up.py)
    within = repeats(0, 6, 4, 2, 0.8, scheduled=6)
    topped = repeats(0, 60, 4, 2, 0.8, scheduled=6)
    assert within == repeats(0, 6, 4, 2, 0.8)  # within the schedule, as before
    assert topped is not None and within is not None
    assert topped.new_batch == pytest.approx((within.new_batch * 6 + 54) / 60)
