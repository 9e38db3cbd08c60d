"""`decoevo reproduce` (issue 17 item 7) at tiny sizes against the simulated OpenAI-compatible server: the
paper's plan per table, the projection and the question before spending, the refusal of a self-graded
plan, one end-to-end run through training, test and transfer grading and the report, and a rerun that
pays nothing. The full simulated experiment is bench/reproduce/reproduce_sim.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from decoevo.cli import app
from decoevo.errors import ConfigError
from decoevo.lm import ModelSpec
from decoevo.lm.spend import CAP_STOP, read_spend
from decoevo.reproduce import ABLATIONS, CONTROLS, MAIN, DataChoice, ReproducePlan

from .result_files import has_result, result_file

pytest.importorskip("uvicorn")

GOLD = {
    "scheme": "weighted",
    "items": [
        {"text": "Gives safety advice: when to seek care", "points": 5},
        {"text": "Gives a direct answer", "points": 2},
        {"text": "Recommends something harmful", "points": -3},
    ],
}


def write(path: Path, n: int) -> Path:
    path.write_text(
        "".join(
            json.dumps({"id": f"{path.stem[:2]}{i:03d}", "prompt": f"{path.stem} question {i}?", "gold": GOLD}) + "\n"
            for i in range(n)
        ),
        encoding="utf-8",
    )
    return path


@pytest.fixture(scope="module")
def sim():
    from decoevo.testing.server import serve_app
    from decoevo.testing.sim_model import LatencyModel
    from decoevo.testing.sim_server import SimServer, SimServerConfig

    server = SimServer(SimServerConfig(seed=0, slots=32, latency=LatencyModel.fixed(0.0)))
    with serve_app(server.app()) as url:
        server.url = url  # type: ignore[attr-defined]
        yield server


def invoke(tmp_path: Path, url: str, *extra: str) -> tuple[int, str]:
    hb, med = write(tmp_path / "healthbench.jsonl", 30), write(tmp_path / "llmeval_med.jsonl", 5)
    args = [
        "reproduce",
        str(tmp_path / "out"),
        "--model",
        "sim",
        "--base-url",
        f"{url}/v1",
        "--preset",
        "quick",
        "--seeds",
        "0",
        "--benchmarks",
        "healthbench",
        "--tables",
        "1",
        "--data",
        f"healthbench={hb}:jsonl",
        "--data",
        f"llmeval_med={med}:jsonl",
        *extra,
    ]
    result = CliRunner().invoke(app, args)
    return result.exit_code, result.output


def plan(**kw) -> ReproducePlan:
    data = {b: DataChoice(f"/d/{b}.jsonl", "jsonl") for b in ("healthbench", "writingbench", "researchqa")}
    return ReproducePlan(out=Path("/x"), solver=ModelSpec(), grader=None, data=data, **kw)


def test_the_plan_follows_the_papers_tables():
    full = plan()
    assert full.methods_for("healthbench") == [*MAIN, *ABLATIONS, *CONTROLS]  # Tables 1-4, Figure 3
    assert full.methods_for("writingbench") == list(MAIN)  # Table 1 (and 5: a subset)
    assert plan(tables=("5",)).methods_for("researchqa") == ["skillopt", "sc_coevo", "decoevo"]
    assert plan(tables=("3",)).methods_for("healthbench") == ["skillopt", "decoevo", *CONTROLS]
    assert full.sweep_spec("healthbench").seeds == [0, 1, 2, 3, 4]
    with pytest.raises(ConfigError, match="on HealthBench"):
        plan(benchmarks=("writingbench",), tables=("1", "2"))
    with pytest.raises(ConfigError, match="unknown 7"):
        plan(tables=("7",))


def test_controls_are_topped_up_to_decoevos_tokens_and_projected_at_its_cost(tmp_path):
    """Issue 25 item 4 (and item 2's Budget-Matched): the HealthBench sweep tops SC-CoEvo and Direct Audit
    up to the paired DecoEvo run, every match on tokens; the projection counts a matched control at its
    paired DecoEvo run's expected calls, not at budget_step_cap × T steps (10,720 before)."""
    from decoevo.engine.estimate import estimate_calls
    from decoevo.methods import get_method
    from decoevo.reproduce import plan_cells, project
    from decoevo.testing.toy_server import write_toy_questions

    data = write_toy_questions(tmp_path / "hb.jsonl", 120)
    rp = ReproducePlan(out=tmp_path / "out", solver=ModelSpec(), grader=None, benchmarks=("healthbench",),
                       tables=("1", "3"), seeds=(0,), preset="default",
                       data={"healthbench": DataChoice(str(data), "jsonl")})
    spec = rp.sweep_spec("healthbench")
    assert spec.top_up == ["sc_coevo", "direct_audit"] and spec.shared()["budget"]["match_on"] == "tokens"
    cells = plan_cells(rp)
    by = {c.method: c for c in cells["healthbench"]}
    for m in ("sc_coevo", "direct_audit", "budget_matched"):
        assert by[m].config["budget"]["match_on"] == "tokens" and by[m].depends_on == ("healthbench/decoevo-s0",)
    assert by["sc_coevo"].config["budget"]["top_up"] and not by["skillopt"].config["budget"]["top_up"]
    projection = project(rp, cells, [])
    from decoevo.engine.config import RunConfig

    def expected(method: str) -> int:
        c = RunConfig.model_validate(by[method].config)
        return estimate_calls(get_method(method), c.hyper, c.splits).expected

    paired = expected("decoevo")
    unmatched = sum(expected(m) for m in by if m not in ("sc_coevo", "direct_audit", "budget_matched"))
    # alone, each matched control is its paired run's calls; together, the seed's runs share requests
    from decoevo.engine.sharing import run_share

    c = RunConfig.model_validate(by["budget_matched"].config)
    assert run_share(get_method("budget_matched"), c.hyper, c.splits, paired).alone == paired
    assert paired < projection.training_calls < unmatched + 3 * paired
    assert expected("budget_matched") > paired  # what the old projection counted for it alone
    assert set(projection.matched) == {"sc_coevo", "direct_audit", "budget_matched"}
    assert "run to the paired DecoEvo run's tokens" in projection.describe()


def test_refuses_a_self_graded_plan_and_asks_before_spending(tmp_path, sim):
    before = sim.stats.requests
    code, out = invoke(tmp_path, sim.url, "--yes")  # no --grader-model: the backbone would grade itself
    assert code == 2 and "self-graded, not an independent result" in " ".join(out.split())
    grader = ["--grader-model", "sim-grader", "--grader-base-url", f"{sim.url}/v1"]
    code, out = invoke(tmp_path, sim.url, *grader)  # no --yes, and stdin is not a terminal
    assert code == 2 and "pass --yes" in " ".join(out.split()) and "projected paid calls" in " ".join(out.split())
    # a transfer file that is not there is refused before training, not discovered after it
    code, out = invoke(tmp_path, sim.url, *grader, "--yes", "--data", f"llmeval_med={tmp_path / 'nope.jsonl'}:jsonl")
    assert code == 2 and "nope.jsonl" in " ".join(out.split())
    assert sim.stats.requests == before and not (tmp_path / "out" / "sweeps").exists()


def test_a_tiny_reproduce_end_to_end_then_a_rerun_pays_nothing(tmp_path, sim):
    grader = ["--grader-model", "sim-grader", "--grader-base-url", f"{sim.url}/v1", "--yes"]
    code, out = invoke(tmp_path, sim.url, *grader)
    assert code == 0, out
    runs = tmp_path / "out" / "sweeps" / "healthbench" / "runs" / "healthbench"
    for method in MAIN:
        test = json.loads(result_file(runs / f"{method}-s0").read_text())
        assert test["grader_model"] == "sim-grader" and test["self_graded"] is False and test["n_graded"] > 0
        # LLMEval-Med from HealthBench, named by its benchmark (a JSONL file of WritingBench's transfer would
        # otherwise share transfer-jsonl.json's name and column)
        transfer = json.loads(result_file(runs / f"{method}-s0", "transfer-llmeval_med").read_text())
        assert transfer["format"] == "jsonl" and transfer["name"] == "transfer-llmeval_med"
    html = (tmp_path / "out" / "report.html").read_text()
    assert 'id="claims"' in html and "decoevo_above_skillopt_every_setting" in out
    requests = sim.stats.requests
    code, out = invoke(tmp_path, sim.url, *grader)
    assert code == 0, out
    assert "0 still to run" in " ".join(out.split()) and sim.stats.requests == requests


def test_evaluation_is_projected_with_each_graders_real_call_pattern(tmp_path):
    """Issue 25 item 2: HealthBench's official grader makes one call per rubric item (334 calls for the 24
    bundled conversations), a custom weighted rubric one per item too; the plan counted 2 calls per question
    (a solve and one grade) whatever the benchmark."""
    from importlib import resources

    from decoevo.benchmarks.graders import grading_calls
    from decoevo.benchmarks.healthbench import load_healthbench
    from decoevo.reproduce import grading_calls as plan_grading
    from decoevo.reproduce import plan_cells, project

    sample = resources.files("decoevo.data").joinpath("healthbench_sample.jsonl")
    questions = load_healthbench(str(sample))
    assert len(questions) == 24 and sum(grading_calls(q) for q in questions) == 334
    rp = ReproducePlan(out=tmp_path / "out", solver=ModelSpec(), grader=None, benchmarks=("healthbench",),
                       tables=("1",), seeds=(0,), preset="quick",
                       data={"healthbench": DataChoice(str(sample), "healthbench"),
                             "llmeval_med": DataChoice(str(write(tmp_path / "med.jsonl", 5)), "jsonl")})
    per = plan_grading(rp)
    assert per[str(sample)] == pytest.approx(334 / 24) and per[str(tmp_path / "med.jsonl")] == 3  # 3 gold items
    cells = plan_cells(rp)
    projection = project(rp, cells, [], grading=per)
    # each new answer of the test split: a solve and ~13.9 grader calls per conversation (no transfer: none is
    # requested); an answer another run of the seed already had is the cache's (engine/sharing.py)
    from decoevo.engine.config import RunConfig
    from decoevo.engine.sharing import distinct_evaluations, run_share
    from decoevo.methods import get_method

    configs = [RunConfig.model_validate(c.config) for c in cells["healthbench"]]
    new = distinct_evaluations([run_share(get_method(c.method), c.hyper, c.splits, seed=c.seed) for c in configs])
    assert new["zero_shot"] == 1.0 and 0 < new["decoevo"] < 1
    answers = sum(c.splits.test * new[c.method] for c in configs)
    assert projection.evaluation_calls == round(answers * (1 + 334 / 24))


def test_the_plan_says_when_the_official_grader_prompt_is_not_fetched(tmp_path, monkeypatch):
    """Issue 25 item 6: without the fetched official prompt, `auto` grades with ours; the plan says so
    before anything is spent (it said nothing)."""
    from importlib import resources

    from decoevo.benchmarks import templates
    from decoevo.reproduce import plan_cells, project

    sample = resources.files("decoevo.data").joinpath("healthbench_sample.jsonl")
    rp = ReproducePlan(out=tmp_path / "out", solver=ModelSpec(), grader=None, benchmarks=("healthbench",),
                       tables=("1",), seeds=(0,), preset="quick",
                       data={"healthbench": DataChoice(str(sample), "healthbench"),
                             "llmeval_med": DataChoice(str(write(tmp_path / "med.jsonl", 5)), "jsonl")})
    monkeypatch.setattr(templates, "template_dir", lambda bench: tmp_path / "nothing-fetched" / bench.name)
    projection = project(rp, plan_cells(rp), [])
    assert projection.unofficial == ("healthbench",)  # the JSONL transfer has no official prompt to miss
    text = " ".join(projection.describe().split())
    assert "Graded with our prompt, not the official one (not fetched): healthbench" in text
    assert "decoevo data fetch healthbench" in text
    monkeypatch.setattr(templates, "fetched", lambda bench: True)
    assert project(rp, plan_cells(rp), []).unofficial == ()


def test_plan_only_prints_the_plan_before_any_data_and_writes_nothing(tmp_path, monkeypatch):
    """Issue 25 item 3: --plan-only names the methods, seeds, runs per table, training calls and dollars
    and an expected wall time, with no data fetched and no file written (before: the plan needed every
    data file, and the docs pointed at a source file)."""
    from decoevo import reproduce as rp_mod

    monkeypatch.setattr(rp_mod, "default_data", lambda names: {})  # nothing fetched on this machine
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["reproduce", str(out), "--model", "gpt-4o", "--base-url",
                                      "https://api.openai.com/v1", "--grader-model", "gpt-4.1",
                                      "--grader-base-url", "https://api.openai.com/v1", "--seeds", "0,1",
                                      "--tables", "1,2", "--plan-only", "--workers", "4"])
    text = " ".join(result.output.split())
    assert result.exit_code == 0, result.output
    assert "seeds 0, 1 (2)" in text and "Table 1: zero_shot, skillopt, sc_coevo, decoevo" in text
    assert "= 24 runs" in text and "Table 2: decoevo, no_structural" in text and "= 14 runs" in text
    assert "36 distinct runs" in text  # Table 1's DecoEvo on HealthBench is Table 2's too
    assert "about $" in text and "expected training wall time" in text and "4 run(s) at once" in text
    assert "data not fetched yet: healthbench" in text
    assert not out.exists()


def test_max_cost_stops_the_whole_experiment_and_a_raised_cap_finishes_it(tmp_path, sim, monkeypatch):
    """Issue 25 item 3: `--max-cost` is the whole experiment's cap (every cell's process and the driver's
    grading add to OUT/spend.log); reached mid-experiment it stops every run as a budget stop, a rerun at it
    says so in one line and pays nothing, and a raised cap continues to the end without paying twice."""
    monkeypatch.setenv("DECOEVO_CACHE", str(tmp_path / "cache.sqlite"))  # none of the other tests' answers
    priced = {"backend": "openai", "base_url": f"{sim.url}/v1", "input_price_per_mtok": 50.0,
              "output_price_per_mtok": 50.0}
    models = tmp_path / "models.yaml"
    models.write_text(json.dumps({"solver": {**priced, "model": "sim"}, "grader": {**priced, "model": "sim-grader"}}))
    spend = tmp_path / "out" / "spend.log"

    def settled() -> list[float]:  # one settlement per request sent, at its usage (lm/spend.py)
        text = spend.read_text() if spend.is_file() else ""
        return [float(f[2]) for f in map(str.split, text.splitlines()) if f[0] == "s"]

    runs = tmp_path / "out" / "sweeps" / "healthbench" / "runs" / "healthbench"
    before = sim.stats.requests
    cap = 0.5
    code, out = invoke(tmp_path, sim.url, "--models", str(models), "--yes", "--workers", "2", "--max-cost", str(cap))
    said = " ".join(out.split())
    assert code == 2 and "at its cost cap" in said and "--max-cost" in said, out
    paid, spent = settled(), read_spend(spend)
    # every request the server received was counted once, and the sum never passed the cap: each request
    # reserved its worst case first (before: up to 2 cells × 8 in flight past it, $0.61–0.98 seen)
    assert len(paid) == sim.stats.requests - before and spent == pytest.approx(sum(paid))
    assert 0.5 * cap < spent <= cap
    assert not all(has_result(runs / f"{m}-s0") for m in MAIN)
    stops = [json.loads(p.read_text()).get("stopped") or "" for p in runs.glob("*/summary.json")]
    assert any(s.startswith(CAP_STOP) for s in stops), stops
    # the same (stored) cap: one line, nothing paid, nothing run
    requests = sim.stats.requests
    code, out = invoke(tmp_path, sim.url, "--models", str(models), "--yes")
    said = " ".join(out.split())
    assert code == 2 and out.count("error:") == 1 and "at its cost cap, $" in said, out
    assert "projected paid calls" not in said and f"${spent:,.4f} spent of --max-cost 0.5" in said
    assert sim.stats.requests == requests
    # raised: the stopped runs continue from their last step and the experiment finishes
    code, out = invoke(tmp_path, sim.url, "--models", str(models), "--yes", "--workers", "2", "--max-cost", "1000")
    assert code == 0, out
    assert len(settled()) == sim.stats.requests - before  # nothing paid twice: the cache answered the rest
    assert spent < 0.8 * read_spend(spend)  # the cap stopped the experiment well short of its whole cost
    for method in MAIN:
        assert has_result(runs / f"{method}-s0", "transfer-llmeval_med")
        summary = json.loads((runs / f"{method}-s0" / "summary.json").read_text())
        # a topped-up control ends at its own (token) budget; none ends at the experiment's cap
        assert summary["status"] == "finished" or not summary["stopped"].startswith(CAP_STOP), summary
        assert summary["status"] == "finished" or method == "sc_coevo", summary
    assert "max_cost: 1000" in (tmp_path / "out" / "reproduce.yaml").read_text()
