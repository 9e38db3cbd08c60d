"""End to end on the embedded model, as a user would: `decoevo sweep` of 2 methods x 1 seed on a few real
HealthBench questions (train, evaluate, dynamics, alignment), then `decoevo report`, then the HTML in
headless chromium. The numbers from a 135M model mean nothing; the test checks the pipeline holds."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from decoevo.presets import bundled_healthbench
from decoevo.rundir import RunReader

from .real_model import requires_model
from .report_helpers import browser_probe
from .result_files import result_file

pytestmark = [pytest.mark.real_model, requires_model]

N_QUESTIONS = 6  # one per split
GOLD_ITEMS = 3  # the grader makes one call per gold item: a short rubric keeps the test to minutes
SPLITS = "splits={train: 1, probe: 1, solver_gate: 1, generator_gate: 1, diagnostic: 1, test: 1}"
HYPER = ("hyper={steps: 1, batch_size: 1, audit_every: 1, rollouts: 2, pairs_per_question: 1, tau_tie: 1.0, "
         "max_criteria: 2, max_failures: 1, max_tokens_solve: 64, max_tokens_rubric: 200, max_tokens_judge: 200, "
         "max_tokens_rewrite: 400, max_tokens_audit: 250}")


def decoevo(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "decoevo", *args], capture_output=True, text=True, env=env,
                          timeout=1800, check=False)


def few_questions(path: Path) -> Path:
    """The bundled HealthBench conversations that are shortest, each with its first gold items (a positive
    one first, so the rubric has points to earn): a valid HealthBench file, small enough for CI."""
    records = [json.loads(line) for line in Path(bundled_healthbench()).read_text(encoding="utf-8").splitlines()]
    records.sort(key=lambda r: sum(len(t["content"]) for t in r["prompt"]))
    for r in records:
        r["rubrics"] = sorted(r["rubrics"], key=lambda item: item["points"] <= 0)[:GOLD_ITEMS]
    path.write_text("".join(json.dumps(r) + "\n" for r in records[:N_QUESTIONS]), encoding="utf-8")
    return path


def test_sweep_then_report_on_the_embedded_model(tmp_path):
    env = {**os.environ, "DECOEVO_CACHE": str(tmp_path / "cache" / "requests.sqlite")}
    data = few_questions(tmp_path / "hb_few.jsonl")
    sweep = tmp_path / "sweep"
    done = decoevo("sweep", str(sweep), "--methods", "decoevo,skillopt", "--seeds", "0", "--data", str(data),
                   "--format", "healthbench", "--preset", "quick", "--set", SPLITS, "--set", HYPER,
                   "--evaluate", "test,dynamics,alignment", env=env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    status = json.loads((sweep / "status.json").read_text())
    runs = sorted((sweep / "runs" / "hb_few").iterdir())
    assert [r.name for r in runs] == ["decoevo-s0", "skillopt-s0"]  # one seed: the default suite's time
    for run in runs:
        assert (run / "summary.json").is_file()
        for name in ("dynamics", "alignment"):
            assert (run / "eval" / f"{name}.json").is_file(), (run, name, status)
        test = json.loads(result_file(run).read_text())
        for item in (i for q in test["items"] for i in q["grade"]["items"]):  # a verdict, or a categorised failure
            assert item["value"] in (0.0, 1.0) or (item["value"] is None and item["error"] in ("parse", "refusal"))
        aligned = json.loads((run / "eval" / "alignment.json").read_text())
        assert aligned["n_questions"] + aligned["n_failed"] == 1
    decoevo_on_the_embedded_model(sweep / "runs" / "hb_few" / "decoevo-s0")
    # matched splits: both methods of a seed saw the same questions
    a, b = (json.loads((sweep / "runs" / "hb_few" / f"{m}-s0" / "splits.json").read_text())
            for m in ("decoevo", "skillopt"))
    assert a == b

    again = decoevo("sweep", str(sweep), env=env)  # nothing left to do: no cell runs again
    assert again.returncode == 0 and "0 to run" in " ".join(again.stdout.split()), again.stdout[-2000:]

    html_path = tmp_path / "report.html"
    made = decoevo("report", str(sweep), "-o", str(html_path), env=env)
    assert made.returncode == 0, made.stdout[-2000:] + made.stderr[-2000:]
    html = html_path.read_text(encoding="utf-8")
    assert "decoevo" in html.lower() and "skillopt" in html.lower()
    probe = browser_probe(html, tmp_path)
    # training dynamics (gold and proxy), cost by role, the test score per method (when a score was graded) and
    # each run's gate decisions (when a step was gated), all laid out at a real size, nothing fetched
    scores = len(re.findall(r'aria-label="[^"]*test score per method', html))
    gates = len(re.findall(r'aria-label="[^"]*J of the incumbent and of the candidate', html))
    assert probe["figures"] == probe["sized"] == 2 + scores + gates, probe
    assert "Training dynamics" in html and "not computed" not in html and "problems while reading" not in html
    assert "cells 2 done" in " ".join(html.split())  # the sweep's status.json is read
    assert probe["details"] >= 2 and probe["resources"] == [], probe  # one collapsible section per run


def decoevo_on_the_embedded_model(run: Path) -> None:
    """The DecoEvo cell's outer round on the 135M model (what tests/test_engine_real.py checks in process, now
    slow-marked: this cell is the default suite's DecoEvo run on the embedded model). Both audits ran; the
    round ended in a way the engine accounts for; a verification decided on audit objectives alone."""
    structural = [json.loads(x) for x in (run / "audits/outer_000/structural_probe.jsonl").read_text().splitlines()]
    assert len(structural) == 1 and 0.0 <= structural[0]["adequacy"] <= 1.0 and structural[0]["rationale"]
    roles = {c.role for c in RunReader(run).calls()}
    assert {"solve", "generate_rubric", "judge", "rewrite_solver", "structural_audit",
            "contrastive_audit_blind"} <= roles, roles
    events = [json.loads(x) for x in (run / "events.jsonl").read_text().splitlines()]
    (outer,) = [e for e in events if e["event"] in ("outer_round", "outer_round_failed")]
    verification = run / "audits/outer_000/verification.json"
    invalid = [e for e in events if e["event"] == "invalid_candidate" and e["skill"] == "generator"]
    if verification.exists():
        decided = json.loads(verification.read_text())
        assert outer["policy"] == decided["decision"]["policy"] == "pareto"
        assert set(decided["incumbent"]) <= {"structural", "contrastive"}  # audit objectives, never a score
        assert "solver_score" not in outer["deltas"]
    elif outer["event"] == "outer_round_failed":
        assert outer["category"] in ("parse", "refusal", "empty")
    else:
        assert invalid and (run / "candidates").is_dir(), outer
