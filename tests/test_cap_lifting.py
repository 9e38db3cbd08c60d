"""Issue 46 part 1: the experiment's cost cap (`--max-cost`, lm/spend.py) is not lifted by deleting, replacing,
emptying or linking the files it is counted from. Each test here failed on the code before (checked)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from decoevo.cli import reproduce as cli_reproduce
from decoevo.lm import UsageLedger
from decoevo.lm.spend import (
    CAP_ENV,
    FILE_ENV,
    ID_ENV,
    SharedSpend,
    SpendCapReached,
    SpendLogCorrupt,
    begin,
    read_state,
)

from .test_reproduce_round3 import reproduce_small

PRICE = 50.0  # USD per million tokens, prompt and completion, both models of reproduce_small's experiment
CALL_USD = 2000 * PRICE / 1e6  # a call of 1000 prompt and 1000 completion tokens: $0.10


# ---- one process, the log under it ----------------------------------------------------------------------


async def test_a_log_deleted_before_a_processs_first_read_is_refused_not_written_into(tmp_path):
    """Before, a process that had opened the log but read nothing in it yet (its own reservation is all it
    wrote) did not notice the deletion and went on reserving into the unlinked file."""
    path = tmp_path / "spend.log"
    spend = SharedSpend(path, 1.0)
    assert await spend.reserve(0.1) is not None  # opens the file and keeps it; nothing read yet
    path.unlink()
    with pytest.raises(SpendLogCorrupt, match=r"spend.log: was deleted while the experiment ran"):
        await spend.reserve(0.1)
    assert not path.exists()  # nothing recreated either
    spend.close()


@pytest.mark.parametrize("how", ["deleted", "replaced", "emptied"])
def test_a_process_started_after_the_log_was_deleted_or_replaced_stops(tmp_path, how):
    """Before, a process started later (a later cell, the driver's evaluations) began a new log at $0: the
    experiment paid past its cap. Now the experiment's log is named by its identity (DECOEVO_SPEND_ID, set by
    `decoevo reproduce`), and a process finding another file, or none, stops with one line naming it; a log
    emptied in place (the same file, truncated) is said to be emptied, not replaced."""
    path = tmp_path / "spend.log"
    path.write_text("0.75\n")  # $0.75 of a $1 cap already paid
    identity = begin(path)
    if how != "emptied":
        path.unlink()
    if how != "deleted":
        path.write_text("0\n" if how == "replaced" else "")  # a fresh log, or the same one truncated: $0 spent
    script = ("import asyncio; from decoevo.lm.spend import SharedSpend\n"
              "asyncio.run(SharedSpend.from_env().reserve(0.5))\n")
    env = {**os.environ, FILE_ENV: str(path), CAP_ENV: "1.0", ID_ENV: identity}
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0 and "SpendLogCorrupt" in proc.stderr, proc.stderr[-2000:]
    assert f"spend.log: was {how} " in proc.stderr and " while the experiment ran" in proc.stderr
    assert path.exists() == (how != "deleted") and "r " not in (path.read_text() if path.exists() else "")
    assert how != "emptied" or "replaced by an empty file" in proc.stderr  # the two cannot be told apart


def test_one_cap_line_per_stop_not_one_per_refused_request(tmp_path):
    """Before, every refused request appended its own `x CAP` line (245 at one stop)."""
    path = tmp_path / "spend.log"
    path.write_text("0.01\n")

    async def refused(gate: SharedSpend) -> None:
        for _ in range(5):
            with pytest.raises(SpendCapReached):
                await gate.reserve(0.004)

    for _ in range(3):  # three processes' LMs, five refusals each
        asyncio.run(refused(SharedSpend(path, 0.01)))
    assert path.read_text().splitlines().count("x 0.01") == 1
    assert read_state(path).stopped_at == 0.01
    asyncio.run(refused(SharedSpend(path, 0.012)))  # a raised cap reached again: one more line, its own
    assert path.read_text().splitlines()[1:] == ["x 0.01", "x 0.012"]


# ---- `decoevo reproduce`: what counts as spent at start ----------------------------------------------------

RUNS = Path("sweeps") / "healthbench" / "runs" / "healthbench"


def _earlier(tmp_path: Path, name: str = "out") -> Path:
    """OUT of an earlier invocation: its plan, and runs whose records say what they paid."""
    out = tmp_path / name
    reproduce_small(out, tmp_path, "--plan-only")  # the models file written
    out.mkdir()
    models = json.loads((tmp_path / "models.yaml").read_text())
    (out / "reproduce.yaml").write_text(json.dumps({"solver": models["solver"], "grader": models["grader"],
                                                    "seeds": [0], "benchmarks": ["healthbench"], "tables": ["1"]}))
    return out


def _call(model: str, request: str, *, cached: bool = False) -> str:
    return json.dumps({"role": "solve", "model": model, "key": request, "cached": cached, "prompt_tokens": 1000,
                       "completion_tokens": 1000, "request": request}) + "\n"


def _paid_runs(out: Path) -> None:
    """$0.70 paid: 4 training calls of one run, 3 grading calls of another (and a cache hit, free), with the
    ledgers and OUT/spend.log saying so."""
    train, grading = out / RUNS / "decoevo-s0", out / RUNS / "skillopt-s0" / "eval"
    for folder, model, n in ((train, "default", 4), (grading, "grader", 3)):
        folder.mkdir(parents=True)
        (folder / "calls.jsonl").write_text("".join(_call(model, f"{folder.name}-{i}") for i in range(n))
                                            + _call(model, "hit", cached=True))
        sent = [{"sent": f"{folder.name}-{i}", "key": "k", "role": "solve", "model": model,
                 "prompt_tokens": 1000, "max_tokens": 1000} for i in range(n)]
        (folder / "requests.jsonl").write_text("".join(json.dumps(s) + "\n" for s in sent))
        ledger = UsageLedger()
        ledger.record_call("solve", model, 1000 * n, 1000 * n, 0.1, cost_usd=n * CALL_USD)
        (folder / "ledger.json").write_text(json.dumps(ledger.to_dict()))
    (out / "spend.log").write_text(f"{7 * CALL_USD!r}\n")


def _zero_ledgers(out: Path) -> None:
    for path in out.rglob("*ledger*.json"):
        path.write_text(json.dumps(UsageLedger().to_dict()))


@pytest.mark.parametrize("edit", ["ledgers zeroed", "ledgers deleted", "calls.jsonl deleted too"])
def test_emptying_the_log_and_the_ledgers_does_not_reset_the_spend(tmp_path, edit):
    """Before, an emptied spend.log and zeroed (or deleted) ledgers read "$0.00 spent so far" and a rerun paid
    the cap again, though calls.jsonl and requests.jsonl held the same calls. Now they count: $0.70 spent of a
    $0.50 cap. With calls.jsonl gone too, each request recorded as sent counts at its bound (here the same)."""
    out = _earlier(tmp_path)
    _paid_runs(out)
    (out / "spend.log").write_text("")
    if edit == "ledgers zeroed":
        _zero_ledgers(out)
    else:
        for path in out.rglob("*ledger*.json"):
            path.unlink()
    if edit == "calls.jsonl deleted too":
        for path in out.rglob("calls.jsonl"):
            path.unlink()
    code, said = reproduce_small(out, tmp_path, "--max-cost", "0.5")
    assert code == 2 and said.count("error:") == 1, said
    assert "call records" in said and f"at its cost cap, ${7 * CALL_USD:,.4f} spent" in said, said


def test_the_records_count_only_what_they_say_was_paid(tmp_path):
    """The largest of the log, the ledgers and the records counts, not their sum: at a $1 cap the experiment
    above ($0.70, all three agreeing) is not at its cap and says $0.70 spent."""
    out = _earlier(tmp_path)
    _paid_runs(out)
    code, said = reproduce_small(out, tmp_path, "--max-cost", "1")
    assert code == 2 and "pass --yes" in said and "$0.70 spent so far" in said, said


def test_a_second_experiment_linking_the_first_ones_runs_is_refused(tmp_path):
    """Before, OUT2 with `sweeps/` linked to OUT's read "$0.00 spent so far" and paid on the same runs."""
    first = _earlier(tmp_path)
    _paid_runs(first)
    second = _earlier(tmp_path, "out2")
    (second / "sweeps").symlink_to(first / "sweeps")
    code, said = reproduce_small(second, tmp_path, "--max-cost", "0.5", "--yes")
    assert code == 2 and said.count("error:") == 1, said
    assert "out2/sweeps: is a symbolic link" in said and "spent so far" not in said, said
    assert not (second / "spend.log").exists()  # refused before anything was written


@pytest.mark.parametrize("how", ["deleted", "replaced"])
def test_a_log_deleted_or_replaced_while_reproduce_runs_stops_every_later_process_and_ends_in_one_line(
        tmp_path, monkeypatch, how):
    """Before, a process started after the deletion began a new log at $0 (the experiment paid $0.87 of a $0.60
    cap), and a replaced log ended in "4 step(s) failed" (exit 1). Now every process of the experiment is given
    the log's identity: a later one stops, and the end is one line naming the file (exit 2)."""
    out = _earlier(tmp_path)
    seen: dict[str, str] = {}

    def run(rp, out_dir, workers, ray_address, posts):  # the sweeps and evaluations, as processes started later
        spend = out_dir / "spend.log"
        spend.unlink(missing_ok=True)  # (the code before created it only at a first request)
        if how == "replaced":
            spend.write_text("0\n")  # a fresh log: $0 spent (an empty one is said to be emptied, tested above)
        script = ("import asyncio; from decoevo.lm.spend import SharedSpend\n"
                  "asyncio.run(SharedSpend.from_env().reserve(0.01))\n")
        proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
        seen["child"] = proc.stderr
        return [f"cell {i}: stopped" for i in range(4)]

    monkeypatch.setattr(cli_reproduce, "_run", run)
    code, said = reproduce_small(out, tmp_path, "--max-cost", "0.6", "--yes")
    assert f"spend.log: was {how} while the experiment ran" in seen["child"], seen["child"][-2000:]
    assert code == 2 and said.count("error:") == 1 and "step(s) failed" not in said, said
    assert f"spend.log: was {how} while the experiment ran" in said, said


# ---- `decoevo sweep --max-cost`: a run's cap holds over its grading ----------------------------------------


def test_a_sweep_runs_max_cost_holds_over_its_test_evaluation(tmp_path, monkeypatch):
    """Before, `sweep --max-cost 0.02` capped training ($0.0116) and its test evaluation then paid $0.11 outside
    the cap (the evaluation's LM had no budget). Now a cell's post-run steps run under the run's cap, begun at
    what the run paid: the toy run below trains, then its grading may add at most the $0.002 left (on the old
    code it graded its 4 test questions, paying past the cap)."""
    pytest.importorskip("uvicorn")
    import yaml

    from decoevo.cli.sweep_cell import run_cell
    from decoevo.lm import ModelSpec
    from decoevo.lm.pricing import cost_of_models
    from decoevo.rundir.paid import paid_in_records
    from decoevo.sweep import build_spec, plan
    from decoevo.sweep.cell import CellRequest

    from .sweep_helpers import served_toy, write_spec

    monkeypatch.setenv("DECOEVO_CACHE", str(tmp_path / "cache.sqlite"))
    monkeypatch.delenv(FILE_ENV, raising=False)
    splits = {"train": 6, "solver_gate": 3, "test": 4, "probe": 0, "generator_gate": 0}
    with served_toy() as server:
        grid = write_spec(tmp_path / "grid.yaml", server.url, ["skillopt"], [0], splits=splits, evaluate=["test"])
        spec = yaml.safe_load(grid.read_text())
        spec["lm"]["models"]["default"].update(input_price_per_mtok=100.0, output_price_per_mtok=100.0)
        grid.write_text(yaml.safe_dump(spec))
        built, _ = build_spec(tmp_path / "SW", grid)
        (cell,) = plan(built, tmp_path / "SW")
        run_dir = cell.run_dir(tmp_path / "SW")
        train = CellRequest(cell_id=cell.id, run_dir=str(run_dir), config=cell.config, threads=1, evaluate=[])
        assert run_cell(train).ok  # trained, uncapped
        models = {k: ModelSpec.model_validate(v)
                  for k, v in yaml.safe_load((run_dir / "config.yaml").read_text())["lm"]["models"].items()}
        trained = paid_in_records(run_dir, cost_of_models(models))
        assert trained > 0
        config = yaml.safe_load((run_dir / "config.yaml").read_text())
        cap = trained + 0.002
        config["budget"]["max_cost"] = cap  # `--max-cost`: the run's cap, with little left for grading
        (run_dir / "config.yaml").write_text(yaml.safe_dump(config))
        before = len(server.requests)
        outcome = run_cell(CellRequest(cell_id=cell.id, run_dir=str(run_dir), config=cell.config, threads=1,
                                       evaluate=["test"]))
        graded = len(server.requests) - before
    assert not outcome.ok and "cost cap" in (outcome.error or ""), outcome
    paid = paid_in_records(run_dir, cost_of_models(models))
    # one grading request's bound (~$0.23 here) does not fit in what is left: nothing more is paid
    assert paid <= cap * (1 + 1e-9) and graded == 0, (trained, paid, cap, graded)
    assert read_state(run_dir / "eval" / "spend.log").stopped_at == pytest.approx(cap)
