"""`decoevo run` against llama-cpp-python's own OpenAI-compatible server, as a new user would try it, with
default settings: a server with one slot, which queues the run's concurrent requests (8 questions at
once by default) and answers them one by one. Before, a queued request's first-byte clock ran from its
sending, so `quick` died in outer round 0 (issue 20); the negotiation of the structured-output form
(`json_schema` is a 500 there) and schemas without length bounds are exercised on the way."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from decoevo.engine.validity import check_candidate
from decoevo.tasks.specs import INITIAL_SOLVER_SKILL

from .real_model import llama_cpp_server, requires_model

pytestmark = [pytest.mark.real_model, requires_model]

ROLES = {"solve", "generate_rubric", "judge", "rewrite_solver", "structural_audit", "contrastive_audit_blind"}


def run_against_server(tmp_path: Path, *args: str, timeout_s: float) -> tuple[Path, dict, float]:
    """A run with default settings (only the flags given) against a fresh one-slot server."""
    with llama_cpp_server() as base_url:
        env = {**os.environ, "DECOEVO_CACHE": str(tmp_path / "cache.sqlite")}
        started = time.monotonic()
        done = subprocess.run(
            [sys.executable, "-m", "decoevo", "run", "--base-url", base_url, "--model", "smollm2",
             "--runs-root", str(tmp_path / "runs"), "--name", "server", *args],
            env=env, capture_output=True, text=True, timeout=timeout_s)
        took = time.monotonic() - started
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    run = tmp_path / "runs" / "server"
    return run, json.loads((run / "summary.json").read_text()), took


def check_shipped(run: Path, summary: dict) -> None:
    final = (run / "final_solver_skill.md").read_text().strip()
    # what ships is the initial skill or a valid rewrite, and the summary says which
    assert final == INITIAL_SOLVER_SKILL or check_candidate(final, INITIAL_SOLVER_SKILL).valid
    assert summary["final_solver"].startswith("initial:" if summary["solver_version"] == 0 else "improved:")


def roles_called(run: Path) -> set[str]:
    return {c["role"] for c in map(json.loads, (run / "calls.jsonl").read_text().splitlines())}


def test_a_small_quick_run_with_an_outer_round_finishes_against_a_one_slot_server(tmp_path):
    """The default suite's version: one inner step and one outer round on a few questions, default
    concurrency and timeouts (shorter answers than `quick`'s keep it to about a minute; the full `quick`
    run below is marked slow)."""
    run, summary, took = run_against_server(
        tmp_path, "--preset", "quick",
        "--set", "splits={train: 2, probe: 1, solver_gate: 1, generator_gate: 1, diagnostic: 0, test: 0}",
        "--set", "hyper={steps: 1, batch_size: 1, audit_every: 1, max_criteria: 2, max_failures: 1, "
                 "max_tokens_solve: 64, max_tokens_rubric: 200, max_tokens_judge: 200, max_tokens_rewrite: 400, "
                 "max_tokens_audit: 250}", timeout_s=900)
    assert summary["steps_done"] == 1 and summary["outer_rounds"] >= 1, summary
    assert roles_called(run) >= {"solve", "generate_rubric", "judge", "structural_audit"}
    check_shipped(run, summary)
    print(f"small quick run against a one-slot server: {took:.0f} s")


@pytest.mark.slow
def test_quick_preset_run_completes_against_llama_cpp_server(tmp_path):
    run, summary, took = run_against_server(tmp_path, "--preset", "quick", timeout_s=3600)
    assert summary["outer_rounds"] >= 1 and summary["steps_done"] == 2
    assert roles_called(run) >= ROLES
    check_shipped(run, summary)
    print(f"quick run against a one-slot server: {took:.0f} s")


@pytest.mark.slow
def test_default_preset_run_completes_against_llama_cpp_server(tmp_path):
    run, summary, took = run_against_server(tmp_path, "--preset", "default", timeout_s=7200)
    assert summary["outer_rounds"] >= 1 and summary["steps_done"] >= 1
    assert roles_called(run) >= ROLES
    check_shipped(run, summary)
    print(f"default run against a one-slot server: {took:.0f} s")
