"""The estimate of a co-evolving run's rounds against the calls such runs use on the simulated model: a run
that accepts every generator candidate (No-Verification) rubricates and re-judges V_s and the batch under
each new generator, and a run with no structural audit rewrites the generator only in rounds where a blind
comparison was decided (no record, no rewrite). Before, the estimate missed the first (0.67-0.81 of the
calls used in the simulated reproduce) and counted a rewrite and a verification every round for the
second (1.11-1.25)."""

from __future__ import annotations

import pytest

from decoevo.engine.config import config_from_dict, deep_merge
from decoevo.engine.estimate import estimate_calls
from decoevo.engine.run import Engine
from decoevo.lm import LM, LMConfig, RequestCache
from decoevo.methods import get_method
from decoevo.presets import PRESETS
from decoevo.testing.sim_backend import SimBackend, run_virtual
from decoevo.testing.toy_server import write_toy_questions


def used_and_expected(tmp_path, method: str, seed: int) -> tuple[int, int]:
    data = write_toy_questions(tmp_path / "q.jsonl", 40)
    config = config_from_dict(deep_merge(PRESETS["quick"], {
        "method": method, "seed": seed, "data": {"path": str(data), "format": "jsonl"}, "hyper": {"steps": 6}}))
    lm = LM(LMConfig(), backends={"default": SimBackend(seed=0)}, cache=RequestCache(tmp_path / "cache.sqlite"))
    result, _ = run_virtual(Engine(config, tmp_path / "run", lm=lm).run_async())
    lm.cache.close()
    return result.ledger.total().calls, estimate_calls(get_method(method), config.hyper, config.splits,
                                                       seed=seed).expected


@pytest.mark.parametrize("method", ["no_verification", "no_structural"])
def test_the_estimate_of_a_runs_rounds_is_within_an_eighth_of_what_such_runs_use(tmp_path, method):
    used = expected = 0
    for seed in range(4):
        (tmp_path / str(seed)).mkdir()
        u, e = used_and_expected(tmp_path / str(seed), method, seed)
        used, expected = used + u, expected + e
    assert 0.88 * used <= expected <= 1.12 * used, (method, expected, used)  # 0.90 and 0.96; were 0.71, 1.16
