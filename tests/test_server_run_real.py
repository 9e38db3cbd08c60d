"""A full quick-preset `decoevo run` against llama-cpp-python's own OpenAI-compatible server, as a new user
would try it (issue 9 item 12): schemas reach the server without length bounds, so its grammar builder
neither fails nor crashes, and every role runs through one outer round."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from decoevo.engine.validity import check_candidate
from decoevo.tasks.specs import INITIAL_SOLVER_SKILL

from .real_model import llama_cpp_server, requires_model

pytestmark = [pytest.mark.real_model, pytest.mark.slow, requires_model]

ROLES = {"solve", "generate_rubric", "judge", "rewrite_solver", "structural_audit", "contrastive_audit_blind"}


def test_quick_preset_run_completes_against_llama_cpp_server(tmp_path):
    with llama_cpp_server() as base_url:
        env = {**os.environ, "DECOEVO_CACHE": str(tmp_path / "cache.sqlite")}
        done = subprocess.run(
            [sys.executable, "-m", "decoevo", "run", "--base-url", base_url, "--model", "smollm2",
             "--set", "lm.models.default.structured_output=json_object",
             "--set", "lm.models.default.max_concurrency=2",
             "--runs-root", str(tmp_path / "runs"), "--name", "server"],
            env=env, capture_output=True, text=True, timeout=1500)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    run = tmp_path / "runs" / "server"
    summary = json.loads((run / "summary.json").read_text())
    assert summary["outer_rounds"] >= 1 and summary["steps_done"] == 2
    roles = {c["role"] for c in map(json.loads, (run / "calls.jsonl").read_text().splitlines())}
    assert roles >= ROLES, roles
    final = (run / "final_solver_skill.md").read_text().strip()
    # what ships is the initial skill or a valid rewrite, and the summary says which
    assert final == INITIAL_SOLVER_SKILL or check_candidate(final, INITIAL_SOLVER_SKILL).valid
    assert summary["final_solver"].startswith("initial:" if summary["solver_version"] == 0 else "improved:")
