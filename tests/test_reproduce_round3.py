"""Issue 35 (`decoevo reproduce`, round three): a cost cap as strong as its ledger (OUT/spend.log refused when
it cannot be trusted, checked against the runs' ledgers; `run`/`sweep --max-cost` hard), nothing dropped or
mislabelled (transfers), verdicts and labels that say what happened, a changed sweep spec refused.
The LLMEval-Med item is in tests/test_llmeval_med_official.py (its upstream fixture)."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from decoevo.analysis.claims import CONTRADICTED, NOT_ENOUGH, NOT_RUN, TableEvidence, evaluate_claim, load_claims
from decoevo.cli import app
from decoevo.lm import LM, Budget, BudgetExceeded, LMConfig, Message, ModelSpec, UsageLedger
from decoevo.lm.spend import CAP_ENV, FILE_ENV, SharedSpend, SpendLogCorrupt, read_spend
from decoevo.lm.types import Completion
from decoevo.testing.scripted import ScriptedBackend

PRICED = ModelSpec(input_price_per_mtok=2.0, output_price_per_mtok=8.0)


def priced_lm(paid: list[int], *, budget: Budget | None = None, delay: float = 0.0) -> LM:
    async def no_sleep(_: float) -> None:
        return None

    class Counting(ScriptedBackend):
        async def complete(self, request):  # type: ignore[no-untyped-def]
            paid.append(1)
            if delay:
                await asyncio.sleep(delay)
            return Completion(text="ok", prompt_tokens=10, completion_tokens=100)

    lm = LM(LMConfig(models={"default": PRICED}, use_cache=False), backends={"default": Counting(lambda r: "ok")},
            sleep=no_sleep)
    if budget is not None:
        lm.budget = budget
    return lm


# ---- item 5: the cap is as strong as OUT/spend.log ------------------------------------------------------


@pytest.mark.parametrize("line", ["-0.5", "-inf", "nan", "inf", "s x -1", "r a.1 -0.2 1 h 0", "x nan", "0.1 junk"])
async def test_a_spend_log_line_that_would_lift_or_block_the_cap_is_refused(tmp_path, monkeypatch, line):
    """A negative or -inf line lifted the cap ($0.43 paid against 0.33), nan or inf blocked every request
    with "$nan spent", a foreign line counted as nothing (all fail on the old code): now the log is corrupt,
    nothing is paid, and a command reading it gets one line naming the file and the line."""
    spend = tmp_path / "spend.log"
    spend.write_text(f"0.01\n{line}\n")
    monkeypatch.setenv(FILE_ENV, str(spend))
    monkeypatch.setenv(CAP_ENV, "0.33")
    paid: list[int] = []
    lm = priced_lm(paid)
    for question in ("q", "another"):  # the bad line is behind the read offset after the first look: still refused
        with pytest.raises(SpendLogCorrupt, match=r"spend.log: line 2 .*not a spend record"):
            await lm.complete([Message("user", question)], role="solve")
    assert paid == []
    with pytest.raises(SpendLogCorrupt):
        read_spend(spend)
    assert isinstance(SpendLogCorrupt("x"), BudgetExceeded)  # a run stops on it as at the cap, cleanly
    await lm.aclose()


async def test_a_spend_log_truncated_mid_run_stops_instead_of_waiting_forever(tmp_path):
    """Truncated while a request waited for room, the log's later lines were never read again and the
    experiment hung (killed after 400 s; fails on the old code by the timeout below)."""
    spend = tmp_path / "spend.log"
    # another live process of this host holds a reservation that leaves no room: a request waits for it
    spend.write_text(f"r other.1 0.0099 {os.getppid()} {socket.gethostname()} {time.time():.3f}\n")
    shared = SharedSpend(spend, 0.01)
    waiting = asyncio.ensure_future(shared.reserve(0.005))
    while shared._offset == 0:  # the waiter has read the log
        await asyncio.sleep(0.01)
    assert not waiting.done()
    with open(spend, "r+") as f:  # emptied, then the other process settles (written past the reader's place)
        f.truncate(0)
    with open(spend, "a") as f:
        f.write("s other.1 0.0\n")
    with pytest.raises(SpendLogCorrupt, match="shrank"):
        await asyncio.wait_for(waiting, timeout=60)
    shared.close()


async def test_a_linked_spend_log_is_refused_and_not_written_through(tmp_path, monkeypatch):
    target = tmp_path / "elsewhere.txt"
    target.write_text("")
    (tmp_path / "out").mkdir()
    spend = tmp_path / "out" / "spend.log"
    spend.symlink_to(target)
    monkeypatch.setenv(FILE_ENV, str(spend))
    monkeypatch.setenv(CAP_ENV, "1.0")
    paid: list[int] = []
    lm = priced_lm(paid)
    with pytest.raises(SpendLogCorrupt, match="symbolic link"):
        await lm.complete([Message("user", "q")], role="solve")
    assert paid == [] and target.read_text() == ""  # before: reservations written to the link's target
    await lm.aclose()


async def test_max_cost_of_a_run_is_a_hard_cap(tmp_path):
    """`decoevo run --max-cost` / `sweep --max-cost` (Budget.max_cost): before, a check at the run's average
    cost of a call let the first request through whatever the cap (`1e-300` paid a $14 call) and up to the
    concurrency past it (+7.8% at $500). Now each request holds its worst case first (fails on the old code)."""
    paid: list[int] = []
    lm = priced_lm(paid, budget=Budget(max_cost=1e-300))
    with pytest.raises(BudgetExceeded, match="cost budget reached"):
        await lm.complete([Message("user", "q")], role="solve")
    assert paid == []
    await lm.aclose()
    each = (10 * 2.0 + 100 * 8.0) / 1e6  # what a request costs; its worst case (max_tokens) is far more
    cap = 25 * each
    paid = []
    lm = priced_lm(paid, budget=Budget(max_cost=cap), delay=0.02)
    results = await asyncio.gather(*(lm.complete([Message("user", f"q{i}")], role="solve") for i in range(60)),
                                   return_exceptions=True)
    spent = lm.ledger.total().cost_usd
    assert spent <= cap * (1 + 1e-9) and len(paid) == lm.ledger.total().calls
    assert any(isinstance(r, BudgetExceeded) for r in results) and len(paid) > 3
    await lm.aclose()


def reproduce_small(out: Path, tmp_path: Path, *extra: str) -> tuple[int, str]:
    """`decoevo reproduce` of Table 1 on 30 HealthBench-shaped questions, both models at $50 per million tokens
    on a port nothing answers (a plan, or a refusal before any call)."""
    hb = tmp_path / "hb.jsonl"
    gold = {"scheme": "weighted", "items": [{"text": "Gives a direct answer", "points": 2}]}
    hb.write_text("".join(json.dumps({"id": f"q{i}", "prompt": f"question {i}?", "gold": gold}) + "\n"
                          for i in range(30)))
    med = tmp_path / "med.jsonl"
    med.write_text("".join(json.dumps({"id": f"m{i}", "prompt": f"med {i}?", "gold": gold}) + "\n" for i in range(5)))
    models = tmp_path / "models.yaml"
    priced = {"backend": "openai", "base_url": "http://127.0.0.1:9/v1", "input_price_per_mtok": 50.0,
              "output_price_per_mtok": 50.0}
    models.write_text(json.dumps({"solver": {**priced, "model": "sim"}, "grader": {**priced, "model": "g"}}))
    result = CliRunner().invoke(app, ["reproduce", str(out), "--models", str(models), "--preset", "quick",
                                      "--seeds", "0", "--benchmarks", "healthbench", "--tables", "1",
                                      "--data", f"healthbench={hb}:jsonl", "--data", f"llmeval_med={med}:jsonl",
                                      *extra])
    return result.exit_code, " ".join(result.output.split())


def _earlier(tmp_path: Path) -> Path:
    """OUT of an earlier invocation: its plan (the flags are given again by `_reproduce`)."""
    out = tmp_path / "out"
    reproduce_small(out, tmp_path, "--plan-only")  # the models file written
    out.mkdir()
    models = json.loads((tmp_path / "models.yaml").read_text())
    (out / "reproduce.yaml").write_text(json.dumps({"solver": models["solver"], "grader": models["grader"],
                                                    "seeds": [0], "benchmarks": ["healthbench"], "tables": ["1"]}))
    return out


def _ledger(path: Path, usd: float) -> None:
    ledger = UsageLedger()
    ledger.record_call("solve", "default", 1000, 1000, 0.1, cost_usd=usd)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(ledger.to_dict()))


@pytest.mark.parametrize("how", ["deleted", "emptied"])
def test_a_spend_log_deleted_or_emptied_between_runs_does_not_reset_the_spend(tmp_path, how):
    """Before, the experiment paid again from $0 (fails on the old code: it went on to ask before spending).
    The runs' ledgers say $0.70 was paid: at a cap of $0.50 the experiment is at its cap."""
    out = _earlier(tmp_path)
    _ledger(out / "sweeps" / "healthbench" / "runs" / "healthbench" / "decoevo-s0" / "eval" / "ledger.json", 0.3)
    _ledger(out / "sweeps" / "healthbench" / "runs" / "healthbench" / "skillopt-s0" / "ledger.json", 0.4)
    if how == "emptied":
        (out / "spend.log").write_text("")
    code, said = reproduce_small(out, tmp_path, "--max-cost", "0.5")
    assert code == 2 and "ledgers" in said and "at its cost cap, $0.7000 spent" in said, said
    assert said.count("error:") == 1


def test_a_directory_at_the_spend_log_is_one_line(tmp_path):
    out = _earlier(tmp_path)
    (out / "spend.log").mkdir()
    code, said = reproduce_small(out, tmp_path, "--max-cost", "0.5")
    assert code == 2 and "spend.log: is not a regular file" in said and "Traceback" not in said, said


# ---- item 2: a transfer is run or refused, and labelled by what it is -----------------------------------


def test_a_transfer_whose_source_is_not_in_the_experiment_is_refused(tmp_path):
    """`--benchmarks healthbench --data eqbench_cw=FILE` stored the transfer and never evaluated it (fails on
    the old code: the plan printed, exit 0)."""
    cw = tmp_path / "cw.jsonl"
    cw.write_text("")
    code, said = reproduce_small(tmp_path / "out", tmp_path, "--data", f"eqbench_cw={cw}:jsonl", "--plan-only")
    assert code == 2 and "eqbench_cw is the transfer of writingbench" in said and said.count("error:") == 1, said
    code, said = reproduce_small(tmp_path / "out", tmp_path, "--data", f"writingbench={cw}:jsonl", "--plan-only")
    assert code == 2 and "writingbench is not in this experiment" in said, said
    assert not (tmp_path / "out").exists()


def test_a_transfer_without_table_1_is_refused(tmp_path):
    """Issue 46.2: transfers are evaluated for Table 1 only, so `--data llmeval_med=FILE --tables 2` would store
    the file and never read it. Refused in one line, nothing written (a mutant dropping the check went on to
    print the plan, exit 0); with Table 1 the same data is planned."""
    code, said = reproduce_small(tmp_path / "out", tmp_path, "--tables", "2", "--plan-only")
    assert code == 2 and said.count("error:") == 1, said
    assert "--data llmeval_med=...: transfers are evaluated for Table 1, which is not requested (--tables 2)" in said
    assert not (tmp_path / "out").exists()
    code, said = reproduce_small(tmp_path / "out", tmp_path, "--tables", "1,2", "--plan-only")
    assert code == 0 and "error:" not in said, said


def test_a_transfer_column_says_how_it_was_graded():
    """A HealthBench-format file named llmeval_med, graded by HealthBench's grader, was labelled
    "LLMEval-Med†" (fails on the old code: a column had no grader)."""
    from decoevo.report.tables import Column

    assert Column("llmeval_med", True, "healthbench").label == "LLMEval-Med† (graded as HealthBench)"
    assert Column("llmeval_med", True, "llmeval_med").label == "LLMEval-Med†"
    assert Column("mine", True, "healthbench").label == "mine† (graded as HealthBench)"


def test_the_plan_names_each_unfetched_official_prompt_once(tmp_path, monkeypatch):
    from decoevo.benchmarks import templates
    from decoevo.reproduce import DataChoice, ReproducePlan, unofficial_prompts

    monkeypatch.setattr(templates, "fetched", lambda bench: False)
    rp = ReproducePlan(out=tmp_path, solver=ModelSpec(), grader=None, tables=("1",), benchmarks=("healthbench",),
                       data={"healthbench": DataChoice("hb.jsonl", "healthbench"),
                             "llmeval_med": DataChoice("med.jsonl", "healthbench")})
    assert unofficial_prompts(rp) == ("healthbench",)  # before: ("healthbench", "healthbench")


# ---- item 4: verdicts and labels -----------------------------------------------------------------------


def _claim(claim_id: str):
    return next(c for c in load_claims() if c.id == claim_id)


def test_a_claim_whose_table_was_not_requested_is_not_run():
    """Table 5 / Figure 3 not requested: the methods ran (Table 1) but no run has the measure. Before: "not
    enough runs" (fails on the old code)."""
    scores = {(bb, "healthbench", "score", m): {0: 50.0, 1: 52.0} for bb in ("m",)
              for m in ("skillopt", "sc_coevo", "decoevo")}

    class EveryBenchmark(TableEvidence):  # the report's evidence offers a setting per source benchmark
        def settings(self, measure, scope, columns):  # type: ignore[no-untyped-def]
            return super().settings("score", scope, columns)

    for evidence in (TableEvidence(scores), EveryBenchmark(scores)):
        result = evaluate_claim(_claim("alignment_f1_up"), evidence)
        assert result.verdict == NOT_RUN and "was not run" in result.reason, result
    assert evaluate_claim(_claim("decoevo_above_skillopt_every_setting"), TableEvidence({
        ("m", "healthbench", "score", "decoevo"): {0: 50.0}, ("m", "healthbench", "score", "skillopt"): {1: 50.0},
    })).verdict == NOT_ENOUGH  # the measure exists, the seeds do not pair: not enough runs


def test_one_tie_rule_for_interval_and_holm_claims():
    """The same exact tie (Δ = 0 on every seed, CI [0, 0]) was "contradicted" for an interval claim and "more
    seeds would decide" for the Holm claim (fails on the old code)."""
    same = {0: 50.0, 1: 60.0, 2: 70.0}
    evidence = TableEvidence({("m", "healthbench", "score", "decoevo"): same,
                              ("m", "healthbench", "score", "skillopt"): same})
    interval = evaluate_claim(_claim("decoevo_above_skillopt_every_setting"), evidence)
    holm = evaluate_claim(_claim("decoevo_above_skillopt_average"), evidence)
    assert _claim("decoevo_above_skillopt_average").decision == "holm"
    assert interval.verdict == holm.verdict == CONTRADICTED, (interval.reason, holm.reason)


def test_a_control_at_its_parity_budget_is_not_a_budget_stop(tmp_path):
    """A control stopped where it was meant to (its paired run's tokens) read "budget stop", like a
    `--max-cost` stop (fails on the old code)."""
    from decoevo.report.runs import _status

    stop = {"status": "budget_stop", "stopped": "token budget reached: 9000 of 9000 tokens used"}
    assert _status(stop, (), tmp_path, {"match_run": "../decoevo-s0", "match_on": "tokens"})[0] == \
        "parity budget reached"
    assert _status(stop, (), tmp_path, {})[0] == "budget stop"  # a run's own token budget
    cap = {"status": "budget_stop", "stopped": "experiment cost cap reached: a request of up to $1"}
    assert _status(cap, (), tmp_path, {"match_run": "../decoevo-s0"})[0] == "budget stop"


def test_a_control_behind_a_cap_stopped_run_says_so(tmp_path):
    """After a cap stop the controls read "not run: its paired run failed" (fails on the old code)."""
    from decoevo.sweep.plan import Cell
    from decoevo.sweep.runner import _blocked
    from decoevo.sweep.status import StatusBook

    paired, control = Cell("toy", "decoevo", 0, {}), Cell("toy", "sc_coevo", 0, {}, ("toy/decoevo-s0",))
    run = paired.run_dir(tmp_path)
    run.mkdir(parents=True)
    (run / "summary.json").write_text(json.dumps(
        {"status": "budget_stop", "stopped": "experiment cost cap reached: a request of up to $0.01 ..."}))
    book = StatusBook(tmp_path, [paired, control])
    book.set(paired.id, "failed", error="training stopped at the experiment's cost cap")
    said = _blocked(control, {paired.id: paired}, book, tmp_path)
    assert "stopped at the experiment's cost cap" in said and "failed" not in said
    (run / "summary.json").unlink()
    book.set(paired.id, "failed", error="a model call failed")
    assert "(its paired run) failed" in _blocked(control, {paired.id: paired}, book, tmp_path)


# ---- item 6: a changed sweep spec is refused -------------------------------------------------------------


def test_a_sweep_continued_with_a_changed_spec_is_refused_before_anything_is_rewritten(tmp_path):
    """A sweep made with --parity, continued with a spec without it: before, SWEEP/sweep.yaml was replaced by
    the new spec and each cell failed on its own (fails on the old code: exit 1, the stored spec rewritten)."""
    import yaml

    from decoevo.sweep import build_spec
    from decoevo.sweep.plan import plan
    from decoevo.testing.toy_server import write_toy_questions

    from .sweep_helpers import sweep

    data = write_toy_questions(tmp_path / "toy.jsonl", 40)
    sw = tmp_path / "SW"
    bench = {"name": "toy", "data": str(data), "format": "jsonl"}
    over = {"methods": ["decoevo", "sc_coevo"], "seeds": [0], "preset": "quick", "evaluate": []}
    spec, _ = build_spec(sw, None, overrides=over, benchmark=bench, parity=True)
    cells = plan(spec, sw, "t")
    sw.mkdir()
    (sw / "sweep.yaml").write_text(spec.to_yaml())
    run = cells[0].run_dir(sw)  # the DecoEvo run started (its configuration written), as a first sweep leaves it
    run.mkdir(parents=True)
    (run / "config.yaml").write_text(yaml.safe_dump(cells[0].config))
    stored = (sw / "sweep.yaml").read_text()
    raw = yaml.safe_load(stored)
    raw.pop("top_up"), raw.pop("budget")
    (tmp_path / "plain.yaml").write_text(yaml.safe_dump(raw))
    code, out = sweep(sw, "--spec", tmp_path / "plain.yaml")
    said = " ".join(out.split())
    assert code == 2 and "made with another spec" in said and "budget.match_on" in said, out
    assert (sw / "sweep.yaml").read_text() == stored and not (sw / "status.json").exists()


# ---- item 3: plans count everything ----------------------------------------------------------------------


def test_plan_only_projects_the_evaluation_when_the_data_are_passed(tmp_path):
    """`--plan-only` gave no evaluation projection even with every file passed (fails on the old code)."""
    code, said = reproduce_small(tmp_path / "out", tmp_path, "--plan-only")
    assert code == 0 and "projection from the data: 4 runs" in said, said
    assert "training +" in said and "evaluation" in said and not (tmp_path / "out").exists()


def test_a_resumed_plan_counts_the_runs_the_cap_stopped(tmp_path):
    """After a cap stop the plan said "3 still to run" while 12 runs ran again: a cap-stopped run has a
    summary.json, and was counted as trained (fails on the old code)."""
    from decoevo.lm.spend import CAP_STOP
    from decoevo.reproduce import DataChoice, ReproducePlan, plan_cells, post_tasks, project, transfer_sizes

    reproduce_small(tmp_path / "unused", tmp_path, "--plan-only")  # the data files written
    rp = ReproducePlan(out=tmp_path / "out", solver=ModelSpec(), grader=ModelSpec(model="g"), tables=("1",),
                       benchmarks=("healthbench",), seeds=(0,), preset="quick",
                       data={"healthbench": DataChoice(str(tmp_path / "hb.jsonl"), "jsonl"),
                             "llmeval_med": DataChoice(str(tmp_path / "med.jsonl"), "jsonl")})
    cells = plan_cells(rp)
    first = project(rp, cells, post_tasks(rp), transfer_sizes(rp))
    assert first.cells_to_run == 4
    for cell, status in zip(cells["healthbench"], ("finished", "cap", "cap", "cap"), strict=True):
        run = cell.run_dir(rp.sweep_dir("healthbench"))
        run.mkdir(parents=True)
        stopped = {"status": "budget_stop", "stopped": f"{CAP_STOP}: ...", "steps_done": 1}
        (run / "summary.json").write_text(json.dumps({"status": "finished"} if status == "finished" else stopped))
    resumed = project(rp, cells, post_tasks(rp), transfer_sizes(rp))
    assert resumed.cells_to_run == 3  # before: 0
    assert 0 < resumed.training_calls < first.training_calls  # what is left of them, not nothing


async def test_the_per_evaluation_ledgers_sum_to_what_was_paid(tmp_path):
    """An evaluation stopped before it saved (a cap stop) left its paid calls only in RUN/eval/ledger.json:
    750 calls in ledger-*.json against 809 paid (fails on the old code: no ledger of its own)."""
    from decoevo.evaluation import EvalSession, RunView
    from decoevo.testing.scripted import toy_world_backend

    from .engine_helpers import toy_engine

    engine, _ = toy_engine(tmp_path, "zero_shot")
    await engine.run_async()
    session = EvalSession(RunView(tmp_path / "zero_shot"), use_cache=False)
    session.lm._backends["default"] = toy_world_backend()  # the run's model, scripted
    for i in range(3):  # paid, then stopped before any result is saved
        await session.lm.complete([Message("user", f"question {i}")], role="solve")
    await session.aclose()
    eval_dir = tmp_path / "zero_shot" / "eval"
    whole = json.loads((eval_dir / "ledger.json").read_text())["total"]["calls"]
    parts = sum(json.loads(p.read_text())["total"]["calls"] for p in eval_dir.glob("ledger-*.json"))
    assert whole == parts == 3
