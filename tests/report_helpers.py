"""A small sweep of toy-world runs with evaluation files fabricated by code in the documented format
(docs/evaluation-files.md), for report tests. Scores are a known function of method, benchmark and seed,
so a test can compute what every table must say."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
import yaml

from decoevo.domain import Question
from decoevo.engine.config import config_from_dict
from decoevo.engine.run import Engine
from decoevo.lm import LM, LMConfig, RequestCache
from decoevo.testing.scripted import toy_world_backend

from .engine_helpers import toy_questions

BENCHMARKS = ("healthbench", "writingbench")
TRANSFER = {"healthbench": "llmeval_med"}  # within-domain transfer, evaluated from the source run
METHODS = ("skillopt", "sc_coevo", "decoevo", "no_verification", "task_prior")
SEEDS = (0, 1, 2)
GRADER = "gpt-4o-mini-2024-07-18"
_BASE = {"skillopt": 50.0, "sc_coevo": 47.0, "decoevo": 55.0, "no_verification": 52.0, "task_prior": 50.5,
         "zero_shot": 40.0}
_BENCH = {"healthbench": 0.0, "writingbench": 10.0, "llmeval_med": -5.0}


def score(method: str, benchmark: str, seed: int) -> float:
    """The fabricated test score: a method effect, a benchmark offset and a seed effect that differs by method
    (so paired differences have spread)."""
    return round(_BASE[method] + _BENCH[benchmark] + seed * (1.0 + 0.25 * (len(method) % 3)), 3)


def run_config(method: str, seed: int, benchmark: str) -> Any:
    return config_from_dict({
        "method": method, "seed": seed, "data": {"path": f"{benchmark}.jsonl"},
        "splits": {"train": 6, "probe": 2, "solver_gate": 3, "generator_gate": 3},
        "hyper": {"steps": 2, "batch_size": 2, "audit_every": 1, "rollouts": 4, "concurrency": 4},
    })


async def _run(config: Any, run_dir: Path, cache: RequestCache) -> None:
    lm = LM(LMConfig(), backends={"default": toy_world_backend()}, cache=cache)
    questions = [Question(**q.model_dump()) for q in toy_questions()]
    await Engine(config, run_dir, lm=lm, questions=questions).run_async()


def make_sweep(root: Path, methods: tuple[str, ...] = METHODS, seeds: tuple[int, ...] = SEEDS,
               benchmarks: tuple[str, ...] = BENCHMARKS) -> Path:
    """SWEEP/runs/<benchmark>/<method>-s<seed>/, all runs sharing one request cache as a sweep does."""
    sweep = root / "sweep"
    cache = RequestCache(root / "cache.sqlite")
    status: dict[str, Any] = {}
    # The run directory fsyncs every log line (durability under kill, tested elsewhere); here that is
    # nine tenths of the time and buys nothing, so the fixture skips it.
    with mock.patch("decoevo.rundir.files.os.fsync"):
        for bench in benchmarks:
            for method in methods:
                for seed in seeds:
                    cell = f"{method}-s{seed}"
                    asyncio.run(_run(run_config(method, seed, bench), sweep / "runs" / bench / cell, cache))
                    status[f"{bench}/{cell}"] = {"status": "done"}
    (sweep / "sweep.yaml").write_text(yaml.safe_dump({"methods": list(methods), "seeds": list(seeds),
                                                      "benchmarks": list(benchmarks)}))
    (sweep / "status.json").write_text(json.dumps(status))
    return sweep


def write_eval(run: Path, name: str, benchmark: str, method: str, seed: int, value: float | None,
               grader: str = GRADER) -> None:
    items = [{"question_id": f"q{i}", "response": "…", "grade": {"question_id": f"q{i}", "scheme": benchmark,
                                                                  "score": value, "items": []}} for i in range(3)]
    summary = run / "summary.json"  # the version the run ships: a grading of another version is no result
    version = json.loads(summary.read_text()).get("solver_version", 1) if summary.is_file() else 1
    data = {"name": name, "kind": "test" if name == "test" else "transfer", "benchmark": benchmark,
            "data": f"/data/{benchmark}.jsonl", "format": benchmark, "skill_version": version, "method": method,
            "seed": seed, "grader_model": grader, "score": value, "n_graded": 0 if value is None else 3,
            "n_ungraded": 3 if value is None else 0, "details": {}, "items": items}
    (run / "eval").mkdir(exist_ok=True)
    (run / "eval" / f"{name}.json").write_text(json.dumps(data))


def accepted_steps(run: Path) -> list[tuple[int, int]]:
    """(step, solver version after it) for each accepted solver step, from the run's event log."""
    out = [(0, 0)]
    for line in (run / "events.jsonl").read_text().splitlines():
        e = json.loads(line)
        if e["event"] == "inner_step" and e["accepted"]:
            out.append((e["step"] + 1, e["solver_version"]))
    return out


def write_dynamics(run: Path, method: str, seed: int) -> list[dict[str, Any]]:
    points = [{"step": step, "skill_version": v, "generator_version": 0, "proxy": 60.0 + 10 * v + seed,
               "gold": 30.0 + 5 * v + (3 if method == "decoevo" else 0) + seed, "n_gold_graded": 4}
              for step, v in accepted_steps(run)]
    (run / "eval").mkdir(exist_ok=True)
    (run / "eval" / "dynamics.json").write_text(json.dumps(
        {"method": method, "seed": seed, "split": "diagnostic", "n_questions": 4, "points": points}))
    return points


def write_alignment(run: Path, method: str, seed: int, f1: float) -> None:
    data = {"method": method, "seed": seed, "split": "test", "generator_version": 1, "matcher_model": "matcher-x",
            "precision": min(1.0, f1 + 0.05), "recall": max(0.0, f1 - 0.05), "f1": f1, "n_questions": 5,
            "n_failed": 0, "per_question": [{"question_id": "q0", "precision": 0.5, "recall": 0.25, "f1": 0.33,
                                             "generated": ["a"], "gold": ["b"], "matches": [[0, 0]]}]}
    (run / "eval").mkdir(exist_ok=True)
    (run / "eval" / "alignment.json").write_text(json.dumps(data))


def evaluate_sweep(sweep: Path, *, skip: tuple[str, ...] = ()) -> None:
    """Fabricate eval/test.json (+ transfer), dynamics.json and alignment.json for every run not in `skip`."""
    for run in sorted((sweep / "runs").glob("*/*")):
        bench = run.parent.name
        method, seed_s = run.name.rsplit("-s", 1)
        seed = int(seed_s)
        if f"{bench}/{run.name}" in skip:
            continue
        write_eval(run, "test", bench, method, seed, score(method, bench, seed))
        if bench in TRANSFER:
            target = TRANSFER[bench]
            write_eval(run, f"transfer-{target}", target, method, seed, score(method, target, seed))
        write_dynamics(run, method, seed)
        write_alignment(run, method, seed, 0.3 + (0.12 if method == "decoevo" else 0.0) + 0.01 * seed)


# ---- a real browser ---------------------------------------------------------------------------------

_PROBE = """<script>
(() => {
  const figs = [...document.querySelectorAll('main svg.figure, main img')];
  const sized = figs.filter(f => { const r = f.getBoundingClientRect(); return r.width > 100 && r.height > 50; });
  const ids = [...document.querySelectorAll('[id]')].map(e => e.id);
  const out = {figures: figs.length, sized: sized.length, texts: sized.map(f => f.querySelectorAll('text').length),
               duplicate_ids: ids.length - new Set(ids).size,
               resources: performance.getEntriesByType('resource').map(r => r.name),
               tables: document.querySelectorAll('main table').length,
               details: document.querySelectorAll('details.run').length,
               title: document.title};
  const pre = document.createElement('pre'); pre.id = 'probe-result'; pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
})();
</script>"""


def run_chromium(*args: str, profile: Path) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("chromium")
    if exe is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is missing: scripts/install.sh --dev installs Debian's chromium")
        pytest.skip("chromium is not installed (scripts/install.sh --dev installs it)")
    cmd = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           "--hide-scrollbars", f"--user-data-dir={profile}", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=180, check=False)


def browser_probe(html: str, tmp_path: Path) -> dict[str, Any]:
    """Load the report in headless chromium with `_PROBE` appended and return what the probe measured in
    the laid-out page (--dump-dom prints the DOM after the scripts ran)."""
    page = tmp_path / "probed.html"
    page.write_text(html.replace("</body>", _PROBE + "</body>"), encoding="utf-8")
    done = run_chromium("--dump-dom", page.as_uri(), profile=tmp_path / "profile-dom")
    match = re.search(r'<pre id="probe-result">(.*?)</pre>', done.stdout)
    assert match, f"no probe result; stderr: {done.stderr[-2000:]}"
    probe: dict[str, Any] = json.loads(match.group(1).replace("&quot;", '"').replace("&amp;", "&"))
    return probe
