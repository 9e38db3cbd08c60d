"""SIGKILL a real `decoevo run` process mid-run, resume it, and compare with an uninterrupted run.

The model is the deterministic toy world behind a real OpenAI-compatible HTTP server on 127.0.0.1,
so the comparison is exact and the server's request log shows any request paid for twice.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter

import pytest

from decoevo.testing import world
from decoevo.testing.fake_openai import FakeOpenAI, Reply
from decoevo.testing.server import serve_app

from .engine_helpers import toy_questions

pytest.importorskip("uvicorn")


def toy_server() -> FakeOpenAI:
    def responder(body, n):
        messages = body["messages"]
        return Reply(content=world.respond(messages, world.schema_of(body), world.sample_index_of(body)))
    return FakeOpenAI(responder)


def cli(args, cache, **popen):
    env = {**os.environ, "DECOEVO_CACHE": str(cache)}
    return subprocess.Popen([sys.executable, "-m", "decoevo", *args], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, **popen)


def run_args(url, data, root, name):
    return ["run", "--base-url", f"{url}/v1", "--model", "toy", "--data", str(data), "--task", "healthbench",
            "--preset", "default", "--runs-root", str(root), "--name", name, "--seeds", "3",
            "--set", "splits={train: 6, probe: 2, solver_gate: 3, generator_gate: 3, test: 0}",
            "--set", "hyper={steps: 3, batch_size: 2, audit_every: 1, rollouts: 4}",
            "--set", "lm.models.default.max_concurrency=1"]


def final_state(run_dir):
    return json.loads((run_dir / "checkpoint.json").read_text())["state"]


@pytest.fixture
def data_file(tmp_path):
    p = tmp_path / "toy.jsonl"
    p.write_text("".join(json.dumps({"id": q.id, "prompt": q.turns[0].content}) + "\n" for q in toy_questions()))
    return p


@pytest.mark.slow  # kills at random points (~25 s); test_billed_requests kills and resumes in the default run
def test_sigkill_at_random_points_then_resume(tmp_path, data_file):
    server = toy_server()
    with serve_app(server.app()) as url:
        ref = cli(run_args(url, data_file, tmp_path, "reference"), tmp_path / "ref.sqlite")
        out, _ = ref.communicate(timeout=300)
        assert ref.returncode == 0, out
        reference = final_state(tmp_path / "reference")
        total_requests = len(server.requests)
        assert reference["solver"]["version"] >= 1 and total_requests > 50

        rng = random.Random(int(os.environ.get("DECOEVO_KILL_SEED", "11")))
        kills = int(os.environ.get("DECOEVO_KILLS", "3"))
        for k in range(kills):
            server.requests.clear()
            cache = tmp_path / f"cache{k}.sqlite"
            name = f"killed{k}"
            kill_at = rng.randint(5, total_requests - 5)
            proc = cli(run_args(url, data_file, tmp_path, name), cache)
            deadline = time.monotonic() + 120
            while len(server.requests) < kill_at and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.005)
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            resumed = cli(["resume", str(tmp_path / name)], cache)
            out, _ = resumed.communicate(timeout=300)
            assert resumed.returncode == 0, out
            state = final_state(tmp_path / name)
            assert state["solver"] == reference["solver"] and state["generator"] == reference["generator"], k
            bodies = Counter(json.dumps(r, sort_keys=True) for r in server.requests)
            repeated = sum(c - 1 for c in bodies.values() if c > 1)
            # Only a request in flight at the kill (concurrency 1) may have been sent again.
            assert repeated <= 1, f"kill {k} at request {kill_at}: {repeated} requests were paid twice"
            events = [json.loads(x)["event"] for x in (tmp_path / name / "events.jsonl").read_text().splitlines()]
            assert events.count("inner_step") == 3 and events[-1] == "finish"
