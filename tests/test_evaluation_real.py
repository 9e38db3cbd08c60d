"""Gold grading, dynamics and rubric matching on the real embedded model and real HealthBench questions.

A 135M model grades poorly; these tests check that the pipeline runs on a real model and that every
output is either a valid grade or an explicit, categorised failure (never a silent 0)."""

from __future__ import annotations

import pytest

from decoevo.engine.config import config_from_dict
from decoevo.engine.run import Engine
from decoevo.evaluation import EvalSession, EvalTarget, RunView, alignment, dynamics, evaluate
from decoevo.lm import LM, LMConfig, RequestCache
from decoevo.presets import PRESETS, bundled_healthbench

from .real_model import requires_model

# slow: tests/test_sweep_report_real.py runs the same commands on the embedded model in the default run
pytestmark = [pytest.mark.real_model, pytest.mark.slow, requires_model]


async def test_eval_dynamics_and_alignment_on_the_embedded_model(tmp_path):
    cache = RequestCache(tmp_path / "requests.sqlite")
    config = config_from_dict({
        "method": "zero_shot", "seed": 2, "data": {"path": bundled_healthbench(), "format": "healthbench"},
        "splits": {"train": 0, "probe": 0, "solver_gate": 0, "generator_gate": 0, "diagnostic": 1, "test": 1},
        "hyper": {**PRESETS["quick"]["hyper"], "max_tokens_solve": 80},
    })
    await Engine(config, tmp_path / "run", lm=LM(LMConfig(), cache=cache)).run_async()
    session = EvalSession(RunView(tmp_path / "run"), lm=LM(LMConfig(), cache=cache))
    try:
        test = await evaluate(session, EvalTarget())
        dyn = await dynamics(session)
        aligned = await alignment(session)
    finally:
        await session.aclose()

    assert test["n_graded"] + test["n_ungraded"] == 1
    grade = test["items"][0]["grade"]
    assert test["items"][0]["response"]
    for item in grade["items"]:  # a verdict is met / not met, or a categorised failure with no value
        assert item["value"] in (0.0, 1.0) or (item["value"] is None and item["error"] in ("parse", "refusal"))
    assert (grade["score"] is None) == any(i["value"] is None for i in grade["items"])

    assert [p["step"] for p in dyn["points"]] == [0]
    point = dyn["points"][0]
    assert point["proxy"] is None or 0.0 <= point["proxy"] <= 100.0
    assert point["n_proxy"] + sum(1 for q in point["questions"] if q["proxy_error"]) == 1

    assert aligned["n_questions"] + aligned["n_failed"] == 1
    q = aligned["per_question"][0]
    if "error" in q:
        assert "failed (" in q["error"]
    else:
        assert 0.0 <= q["precision"] <= 1.0 and 0.0 <= q["recall"] <= 1.0
        assert all(0 <= g < len(q["generated"]) and 0 <= k < len(q["gold"]) for g, k in q["matches"])
