"""The pilot split selects ε, τ_tie and K (issue 9 item 6): the pure selection policy on hand-computed
evidence, and `decoevo pilot` / `decoevo run --pilot` on the toy world served over HTTP."""

from __future__ import annotations

import json
import math

import pytest
import yaml
from typer.testing import CliRunner

from decoevo.analysis.coevolve_advice import pilot_note
from decoevo.cli import app
from decoevo.engine.pilot_selection import PilotEvidence, PilotGrid, false_accept_rate, select, steps_to_stall_trigger
from decoevo.testing.server import serve_app
from decoevo.testing.toy_server import toy_run_args, toy_server, write_toy_questions

runner = CliRunner()
GRID = PilotGrid(epsilon=(0.01, 0.05, 0.1), tau_tie=(0.05, 0.1, 0.2), audit_every=(1, 2, 3, 4))


def phi_upper(x: float) -> float:
    return 0.5 * math.erfc(x / math.sqrt(2))


def test_selection_policy_on_hand_computed_evidence():
    # paired rollout differences are ±0.1 on every question: rms 0.1; over |V_s| = 4 the gate's null sd is 0.05
    scores = {"a": (0.5, 0.6, 0.5, 0.6), "b": (0.7, 0.6, 0.7, 0.6), "c": (0.2, 0.3, 0.4, 0.3)}
    evidence = PilotEvidence(scores, (None, 0.2, -0.1), gate_size=4, pairs_per_question=2, max_stalls=2)
    choice = select(evidence, GRID)
    assert choice.false_accept[0.05] == pytest.approx(phi_upper(1.0))  # 0.159 > 10%
    assert choice.false_accept[0.1] == pytest.approx(phi_upper(2.0))  # 0.023: the smallest safe margin
    assert choice.epsilon == 0.1 and choice.noise_sd == pytest.approx(0.1)
    # real candidates: one of the two deltas clears each margin below 0.2
    assert choice.candidate_accept == {0.01: 0.5, 0.05: 0.5, 0.1: 0.5}
    # a and b hold two disjoint exact ties at any τ; c one (0.3, 0.3), and its other two rollouts are 0.2 apart:
    # 2 of 3 questions fill H = 2 pairs at τ = 0.05, over the quorum of one half
    assert choice.tie_quota_share[0.05] == pytest.approx(2 / 3) and choice.tau_tie == 0.05
    # stalls at ε = 0.1: no candidate, and -0.1 -> p = 2/3; M = 2 stalls take (1.5² - 1) / (1/3) = 3.75 steps
    assert choice.stall_probability == pytest.approx(2 / 3)
    assert choice.steps_to_stall_trigger == pytest.approx(3.75) and choice.audit_every == 3


def test_selection_edges():
    assert false_accept_rate([], 4, 0.05) == 1.0  # nothing measured: no margin is known to be safe
    assert false_accept_rate([0.0, 0.0], 4, 0.01) == 0.0
    assert steps_to_stall_trigger(0.0, 2) is None and steps_to_stall_trigger(1.0, 3) == 3.0
    noisy = PilotEvidence({"a": (0.0, 1.0, 0.5, 0.8)}, (0.5, 0.5), gate_size=1, pairs_per_question=2, max_stalls=2)
    choice = select(noisy, GRID)
    # too noisy for every margin: the largest; H = 2 ties at no τ: the largest; never stalls: the largest K
    assert (choice.epsilon, choice.tau_tie, choice.audit_every) == (0.1, 0.2, 4)
    assert choice.steps_to_stall_trigger is None


PILOT_SPLITS = "splits={pilot: 4, train: 4, probe: 2, solver_gate: 3, generator_gate: 3, test: 0}"


def test_pilot_command_chooses_writes_evidence_and_runs_use_it(tmp_path, monkeypatch):
    monkeypatch.setenv("DECOEVO_CACHE", str(tmp_path / "cache.sqlite"))
    data = write_toy_questions(tmp_path / "toy.jsonl")
    out = tmp_path / "runs" / "piloted"  # the pilot goes into the run directory it is for
    with serve_app(toy_server().app()) as url:
        base = ["--base-url", f"{url}/v1", "--model", "toy", "--data", str(data), "--task", "healthbench",
                "--preset", "default", "--set", PILOT_SPLITS, "--set", "hyper.rollouts=4"]
        result = runner.invoke(app, ["pilot", str(out), *base, "--seeds", "3"])
        assert result.exit_code == 0, result.output
        # it says what is measured about choosing the method, and no more (tests/test_advice_fit.py)
        said = " ".join(result.output.split())
        assert " ".join(pilot_note().split()) in said
        # and it recommends nothing: no reading beat always co-evolving on the second prior's worlds (issue 48)
        assert "co-evolve or keep the rubric fixed: no recommendation." in said and "precision" not in said
        assert "of a second prior with other ranges" in said and "always co-evolving" in said
        pilot = json.loads((out / "pilot.json").read_text())
        (entry,) = pilot["entries"]
        assert entry["seed"] == 3 and len(entry["pilot_ids"]) == 4 and set(entry["choice"]) == {
            "epsilon", "tau_tie", "audit_every"}
        grid = pilot["grid"]
        assert entry["choice"]["epsilon"] in grid["epsilon"] and entry["choice"]["audit_every"] in grid["audit_every"]
        ev = entry["evidence"]
        assert set(ev["rollout_scores"]) == set(entry["pilot_ids"]) and len(ev["candidate_deltas"]) == 3
        assert set(ev["false_accept_by_epsilon"]) == {str(e) for e in grid["epsilon"]}
        pilot_calls = (out / "pilot" / "calls.jsonl").read_text().splitlines()
        ledger = json.loads((out / "pilot" / "ledger.json").read_text())["total"]
        assert pilot_calls and ledger["calls"] == entry["usage"]["calls"] > 0

        # a run with the pilot: the chosen values, except one the user set explicitly
        args = toy_run_args(f"{url}/v1", data, tmp_path / "runs", "piloted", steps=1,
                            sets=(PILOT_SPLITS, "hyper.rollouts=4", "hyper.tau_tie=0.3"))
        result = runner.invoke(app, [*args, "--pilot", str(out / "pilot.json")])
        assert result.exit_code == 0, result.output
        run = tmp_path / "runs" / "piloted"
        hyper = yaml.safe_load((run / "config.yaml").read_text())["hyper"]
        assert hyper["epsilon"] == entry["choice"]["epsilon"] != 0.01  # not the default: the pilot's choice
        assert hyper["tau_tie"] == 0.3 and hyper["audit_every"] == 1  # set explicitly (toy_run_args sets K)
        # the pilot's cost is not the run's: no pilot question reaches the run, and its log holds no pilot call
        splits = json.loads((run / "splits.json").read_text())
        assert splits["pilot"] == entry["pilot_ids"]
        assert not set(entry["pilot_ids"]) & {q for name, ids in splits.items() if name != "pilot" for q in ids}
        assert not {json.loads(x)["key"] for x in pilot_calls} & {
            json.loads(x)["key"] for x in (run / "calls.jsonl").read_text().splitlines()}
        assert json.loads((run / "ledger.json").read_text())["total"]["inherited_calls"] == 0

        # a run on another seed has other pilot questions: refused, naming what the pilot holds
        args = toy_run_args(f"{url}/v1", data, tmp_path / "runs", "other", steps=1, seed=4,
                            sets=(PILOT_SPLITS, "hyper.rollouts=4"))
        result = runner.invoke(app, [*args, "--pilot", str(out)])
        assert result.exit_code == 2 and "no pilot for toy.jsonl seed 4" in " ".join(result.output.split())
        assert "toy.jsonl seed 3" in " ".join(result.output.split())


def test_pilot_needs_a_pilot_split_and_a_pilot_file(tmp_path):
    data = write_toy_questions(tmp_path / "toy.jsonl")
    result = runner.invoke(app, ["pilot", str(tmp_path / "P"), "--data", str(data), "--task", "healthbench",
                                 "--base-url", "http://127.0.0.1:9/v1", "--model", "toy", "--preset", "default",
                                 "--set", "splits.test=0"])
    assert result.exit_code == 2 and "set splits.pilot" in " ".join(result.output.split())
    (tmp_path / "bad.json").write_text(json.dumps({"entries": [{"seed": "x"}]}))
    args = toy_run_args("http://127.0.0.1:9/v1", data, tmp_path / "runs", "r", steps=1)
    result = runner.invoke(app, [*args, "--pilot", str(tmp_path / "bad.json")])
    assert result.exit_code == 2 and "not a pilot file" in result.output
    assert not (tmp_path / "runs" / "r").exists()


def test_a_sweep_takes_each_cells_pilot_entry(tmp_path, monkeypatch):
    from decoevo.engine.config import RunConfig
    from decoevo.errors import ConfigError
    from decoevo.pilot import run_pilot
    from decoevo.sweep import build_spec, plan

    from .sweep_helpers import write_spec

    monkeypatch.setenv("DECOEVO_CACHE", str(tmp_path / "cache.sqlite"))
    splits = {"pilot": 4, "train": 4, "probe": 2, "solver_gate": 3, "generator_gate": 3, "test": 0}
    with serve_app(toy_server().app()) as url:
        spec_file = write_spec(tmp_path / "grid.yaml", url, ["skillopt", "decoevo"], [0], splits=splits,
                               hyper={"steps": 1, "batch_size": 2, "rollouts": 4})
        spec, _ = build_spec(tmp_path / "SW", spec_file)
        cell = plan(spec, tmp_path / "SW")[0]
        entry = run_pilot(RunConfig.model_validate(cell.config), tmp_path / "SW")
    spec, _ = build_spec(tmp_path / "SW", spec_file, overrides={"pilot": "SW/pilot.json"})
    assert spec.pilot == str(tmp_path / "SW" / "pilot.json")  # relative to the spec file
    cells = plan(spec, tmp_path / "SW")
    for c in cells:  # every method of the seed: the same chosen values (matched across methods)
        assert {k: c.config["hyper"][k] for k in entry.choice} == entry.choice
    spec, _ = build_spec(tmp_path / "SW", spec_file, overrides={"pilot": "SW/pilot.json", "seeds": [0, 1]})
    with pytest.raises(ConfigError, match=r"benchmark 'toy'.*no pilot for toy.jsonl seed 1"):
        plan(spec, tmp_path / "SW")


@pytest.mark.slow
@pytest.mark.real_model
async def test_pilot_on_the_embedded_model(tmp_path):
    """The pilot's measurement on real HealthBench questions and the real embedded model: every number the
    choice rests on is measured (a 135M model's values are not meaningful, only their presence)."""
    from decoevo.engine.config import config_from_dict
    from decoevo.lm import LM, LMConfig, RequestCache
    from decoevo.pilot import run_pilot_async
    from decoevo.presets import PRESETS, bundled_healthbench

    from .real_model import embedded_model_available

    if not embedded_model_available():
        pytest.skip("embedded model not installed (run scripts/install.sh)")
    hyper = {**PRESETS["quick"]["hyper"], "batch_size": 1, "rollouts": 2, "max_criteria": 3, "max_tokens_solve": 96}
    config = config_from_dict({"seed": 1, "hyper": hyper, "data": {"path": bundled_healthbench(),
                                                                   "format": "healthbench"},
                               "splits": {"pilot": 2, "train": 2, "probe": 1, "solver_gate": 1, "generator_gate": 1}})
    lm = LM(LMConfig(), cache=RequestCache(tmp_path / "cache.sqlite"))
    entry = await run_pilot_async(config, tmp_path / "P", steps=1, lm=lm)
    await lm.aclose()
    assert len(entry.evidence["rollout_scores"]) == 2
    assert all(len(z) == 2 and all(0.0 <= x <= 1.0 for x in z) for z in entry.evidence["rollout_scores"].values())
    assert len(entry.evidence["candidate_deltas"]) == 1 and entry.usage["calls"] > 0
    assert (tmp_path / "P" / "pilot" / "calls.jsonl").is_file()
