"""The estimate before a run (issue 34 item 7). Its counting model holds on the toy world: given the shares
the run showed (copies of the current skill never gated, pairs its blind auditor decided, verifications the
structural objective settled, all counted from the run's own records), it lands within 10% of what the run
paid at 2 and 4 steps: the assumed shares, not the counting, make the gap before the run. For the embedded
default a measured prior of its unusable rewrites (engine/embedded_prior.yaml) is used, and only for it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from decoevo.cli import app
from decoevo.cli.run_progress import describe_estimate
from decoevo.engine.config import config_from_dict
from decoevo.engine.estimate import Rates, estimate_calls
from decoevo.engine.model_prior import PRIOR_FILE, Counted, embedded_counts, model_prior
from decoevo.engine.reestimate import prior_for
from decoevo.lm import LMConfig, ModelSpec
from decoevo.methods import get_method
from decoevo.testing.server import serve_app
from decoevo.testing.toy_server import toy_server

runner = CliRunner()


def _toy_run(tmp_path: Path, steps: int) -> Path:
    with serve_app(toy_server().app()) as url:  # the README's toy command
        out = runner.invoke(app, ["run", "--base-url", f"{url}/v1", "--model", "toy", "--steps", str(steps),
                                  "--runs-root", str(tmp_path / "runs")],
                            env={"DECOEVO_CACHE": str(tmp_path / "cache.sqlite"), "COLUMNS": "120"})
    assert out.exit_code == 0, out.output
    (run,) = (tmp_path / "runs").iterdir()
    return run


def _shown(run: Path, probe: int, pairs: int) -> Rates:
    """The shares a finished run showed, from its events and audit records."""
    events = [json.loads(x) for x in (run / "events.jsonl").read_text().splitlines()]
    steps = [e for e in events if e["event"] == "inner_step"]
    rounds = [e for e in events if e["event"] == "outer_round"]
    decided = [len((d / "contrastive_probe.jsonl").read_text().splitlines()) / (probe * pairs)
               for d in sorted((run / "audits").iterdir())]
    settled = [bool(json.loads((d / "verification.json").read_text()).get("contrastive_not_computed"))
               for d in sorted((run / "audits").iterdir()) if (d / "verification.json").exists()]
    share = sum(decided) / len(decided)
    return Rates(reject=sum(e["outcome"] != "accepted" for e in steps) / len(steps),
                 ungated=sum(e["outcome"] in ("invalid", "no_candidate") for e in steps) / len(steps),
                 # the toy's blind auditor is deterministic: a first order is decisive when the pair is decided
                 decided=share, first_decisive=share, settled=sum(settled) / len(settled),
                 generator_invalid=sum(e["outcome"] == "invalid" for e in rounds) / len(rounds),
                 generator_accept=sum(e["outcome"] == "accepted" for e in rounds) / len(rounds))


@pytest.mark.parametrize("steps", [2, 4])
def test_the_estimate_counts_a_toy_run_s_calls_from_the_shares_it_showed(tmp_path: Path, steps: int) -> None:
    run = _toy_run(tmp_path, steps)
    config = config_from_dict(yaml.safe_load((run / "config.yaml").read_text()))
    method = get_method(config.method)
    paid = sum(r["calls"] for r in json.loads((run / "ledger.json").read_text())["rows"])
    pairs = min(config.hyper.pairs_per_question, config.hyper.rollouts // 2)
    shown = _shown(run, config.splits.probe, pairs)
    est = estimate_calls(method, config.hyper, config.splits, seed=config.seed, rates=shown)
    assert 0.9 <= est.expected / paid <= 1.1, (est.expected, paid, shown)
    # before the run the shares are assumed, and the printed range holds what it paid
    prior = estimate_calls(method, config.hyper, config.splits, seed=config.seed, rates=prior_for(method, config.lm))
    low = estimate_calls(method, config.hyper, config.splits, seed=config.seed,
                         rates=Rates(ungated=1.0, generator_invalid=1.0)).expected
    assert low <= paid <= prior.upper_bound
    assert prior_for(method, config.lm) == prior_for(method)  # a served model: no measured prior


def test_the_measured_prior_is_used_for_the_embedded_default_only() -> None:
    method = get_method("decoevo")
    base = prior_for(method)
    counted = embedded_counts()
    embedded = prior_for(method, LMConfig())
    assert embedded.ungated == pytest.approx(Counted.share(counted.ungated, counted.steps))
    assert embedded.ungated > base.ungated
    assert embedded.generator_invalid == pytest.approx(Counted.share(counted.generator_invalid, counted.rounds))
    assert embedded.reject >= embedded.ungated
    for other in (ModelSpec(gguf_path="/models/other.gguf"),
                  ModelSpec(backend="openai", model="m", base_url="http://127.0.0.1:9/v1")):
        assert prior_for(method, LMConfig(models={"default": other})) == base
    # only the rewriter's model decides: the embedded default solving but a served model rewriting
    served = ModelSpec(backend="openai", model="m", base_url="http://127.0.0.1:9/v1")
    mixed = LMConfig(models={"default": ModelSpec(), "big": served},
                     roles={"rewrite_solver": "big", "rewrite_generator": "big"})
    assert model_prior(base, mixed) == (base, None)


def test_the_line_before_a_run_says_when_it_counts_the_measured_prior() -> None:
    from decoevo.engine.config import RunConfig

    embedded = describe_estimate(RunConfig.model_validate({"data": {"path": "q.jsonl"}}))
    counted = embedded_counts()
    assert f"measured runs ({counted.ungated} of {counted.steps} steps)" in " ".join(embedded.split())
    served = RunConfig.model_validate({"data": {"path": "q.jsonl"}, "lm": {"models": {"default": {
        "backend": "openai", "model": "m", "base_url": "http://127.0.0.1:9/v1"}}}})
    assert "measured" not in describe_estimate(served)
    # and it lowers the expected calls for the embedded default
    assert int(embedded.split("~")[1].split()[0]) < int(describe_estimate(served).split("~")[1].split()[0])


def test_the_prior_is_never_counted_on_the_readme_s_first_run() -> None:
    """The README's first run (`decoevo run`: seed 0 of the bundled sample) is what the prior is checked on."""
    data = yaml.safe_load(PRIOR_FILE.read_text())
    assert data["runs"] and all(not r["run"].endswith("healthbench_sample-s0") for r in data["runs"])
    assert embedded_counts().runs == len(data["runs"])
