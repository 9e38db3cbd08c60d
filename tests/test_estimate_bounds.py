"""The run estimate (engine/estimate.py) where its formulas meet their limits: a step never pays more solver
calls than its batch and V_s however often batches repeat, a run that keeps its skill on a large train set
(a repeat chance below float precision) is still estimated, and a method that does not optimize the solver
has no step and nothing ahead. Each case failed a mutant that the mutation bench found the older tests let
pass (issue 46.2)."""

from __future__ import annotations

import math

import pytest

from decoevo.engine.config import config_from_dict, deep_merge
from decoevo.engine.estimate import estimate_calls, fresh_share
from decoevo.engine.reestimate import Position, Seen, calls_ahead
from decoevo.methods import get_method
from decoevo.presets import PRESETS


def _config(preset: str = "quick", method: str = "decoevo", hyper: dict[str, int] | None = None,
            **splits: int):  # type: ignore[no-untyped-def]
    return config_from_dict(deep_merge(PRESETS[preset], {"method": method, "data": {"path": "x.jsonl"},
                                                         "splits": splits, "hyper": hyper or {}}))


@pytest.mark.parametrize("seed", [None, 0])
@pytest.mark.parametrize("train", [2, 4, 60])
def test_a_step_never_pays_more_solver_calls_than_its_batch_and_v_s(seed: int | None, train: int) -> None:
    """A repeated batch is answered by the cache, its V_s scoring too: the fewer new batches, the fewer
    calls, never more (V_s divided by the share of new batches would be up to 6x V_s at train=2)."""
    config = _config(train=train)
    h, sizes = config.hyper, config.splits
    for reject in (0.0, 0.5, 0.8, 1.0):
        est = estimate_calls(get_method("decoevo"), h, sizes, reject_prob=reject, seed=seed)
        for role in ("solve", "judge"):
            assert 0 < est.by_role_step[role] <= h.batch_size + sizes.solver_gate + 1e-9, (role, reject, est)
        assert 0 < est.by_role_step["rewrite_solver"] <= 1.0


def test_a_run_that_keeps_its_skill_on_a_large_train_set_is_estimated() -> None:
    """With 1,000 train questions and batches of 10 a batch comes back with a chance of ~4e-24: at a rejection
    rate of 1 the closed form's denominator is 0 in floats, and its limit (every batch new) is taken."""
    assert fresh_share(20, 0.0, 1.0) == 1.0
    assert fresh_share(20, 1e-30, 1.0) == 1.0
    config = _config("paper", hyper={"batch_size": 10}, train=1000)
    est = estimate_calls(get_method("decoevo"), config.hyper, config.splits, reject_prob=1.0)
    assert est.by_role_step["rewrite_solver"] == 1.0  # every batch new: one rewrite a step, none cached
    assert math.isfinite(est.expected) and est.upper_bound >= est.expected


def test_a_method_that_does_not_optimize_the_solver_has_no_step_and_nothing_ahead() -> None:
    m = get_method("zero_shot")
    assert not m.optimize_solver
    config = _config(method="zero_shot")
    est = estimate_calls(m, config.hyper, config.splits, seed=0)
    assert (est.steps, est.expected, est.upper_bound) == (0, 0, 0)
    assert calls_ahead(m, config.hyper, config.splits, 0, Seen(), Position(0)) == 0
