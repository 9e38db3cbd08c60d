"""Issue 25 item 1: the plan's projection is the bill, per phase (training, evaluation), in a small simulated
reproduce run in process. Runs of one seed share answers through the request cache (engine/sharing.py);
the projection counted every run as if alone: 2.9x the paid training calls and 1.8x the evaluation calls
in the simulated reproduce at quick sizes (bench/results/reproduce_sim.json before the model)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from decoevo.cli import app

from .test_reproduce import sim, write  # noqa: F401  (the simulated server fixture)

pytest.importorskip("uvicorn")


def ledger_calls(out: Path) -> tuple[int, int]:
    runs = out / "sweeps"
    train = sum(json.loads(p.read_text())["total"]["calls"] for p in runs.glob("*/runs/*/*/ledger.json"))
    evaluate = sum(json.loads(p.read_text())["total"]["calls"] for p in runs.glob("*/runs/*/*/eval/ledger-*.json"))
    return train, evaluate


def test_the_projection_is_within_a_quarter_of_the_paid_calls_per_phase(tmp_path, sim):  # noqa: F811
    hb, med = write(tmp_path / "healthbench.jsonl", 40), write(tmp_path / "llmeval_med.jsonl", 6)
    out = tmp_path / "out"
    result = CliRunner().invoke(app, [
        "reproduce", str(out), "--model", "sim", "--base-url", f"{sim.url}/v1", "--grader-model", "sim-grader",
        "--grader-base-url", f"{sim.url}/v1", "--preset", "quick", "--set", "hyper.steps=6", "--seeds", "0,1",
        "--benchmarks", "healthbench", "--tables", "1,3", "--data", f"healthbench={hb}:jsonl",
        "--data", f"llmeval_med={med}:jsonl", "--yes"])
    assert result.exit_code == 0, result.output
    found = re.search(r"~([\d,]+) training \+ ~([\d,]+) evaluation", " ".join(result.output.split()))
    assert found is not None, result.output
    projected = [int(found.group(i).replace(",", "")) for i in (1, 2)]
    paid = ledger_calls(out)
    for phase, p, a in zip(("training", "evaluation"), projected, paid, strict=True):
        assert 0.75 * a <= p <= 1.25 * a, f"{phase}: projected {p}, paid {a}"
