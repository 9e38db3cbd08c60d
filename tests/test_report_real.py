"""The report over a run the real embedded model made (real run files: voided steps, few acceptances,
the tiny judge), rendered in headless chromium. Slow: the run alone takes minutes on 2 shared cores."""

from __future__ import annotations

import pytest

from decoevo.benchmarks import load_healthbench
from decoevo.engine.config import config_from_dict
from decoevo.engine.run import Engine
from decoevo.lm import LM, LMConfig, RequestCache
from decoevo.presets import PRESETS, bundled_healthbench
from decoevo.report import build_report, render

from .real_model import requires_model
from .report_helpers import browser_probe

pytestmark = [pytest.mark.real_model, pytest.mark.slow, requires_model]

SIZES = {"train": 2, "probe": 1, "solver_gate": 1, "generator_gate": 1}
HYPER = {**PRESETS["quick"]["hyper"], "steps": 1, "batch_size": 1, "max_criteria": 3, "max_tokens_solve": 96}


async def test_report_on_an_embedded_model_run(tmp_path):
    config = config_from_dict({"method": "skillopt", "seed": 1, "splits": SIZES, "hyper": HYPER,
                               "data": {"path": bundled_healthbench(), "format": "healthbench"}})
    lm = LM(LMConfig(), cache=RequestCache(tmp_path / "cache.sqlite"))
    result = await Engine(config, tmp_path / "run", lm=lm, questions=load_healthbench(bundled_healthbench())
                          ).run_async()
    report = build_report([result.run_dir])
    (run,) = report.runs
    assert (run.method, run.seed, run.benchmark, run.status) == ("skillopt", 1, "healthbench", "finished")
    assert run.judge_model == "smollm2-135m-instruct-q4_1" and report.tiny_judge and not report.problems
    assert len(run.inner_gates) + sum(i.event == "inner_step_failed" for i in run.incidents) == 1
    assert run.usage is not None and run.usage.total.effective_calls == result.ledger.total().calls > 0
    assert run.solver[0].version == 0 and run.test_eval is None
    html = render(report)
    assert "Tiny training-time judge" in html and "Test scores: not computed" in html
    probe = browser_probe(html, tmp_path)
    # the cost figure, and the run's gate decisions when its step was gated
    assert probe["details"] == 1 and probe["figures"] == probe["sized"] == 1 + len(report.run_figures)
    assert probe["duplicate_ids"] == 0 and probe["resources"] == []
