"""Every request sent is in the ledger, also when the process is killed with requests in flight (issue 21,
item 2). A real `decoevo run` at the default concurrency against a server with a 50 ms latency is killed
with SIGKILL again and again, each time resumed; the server counts the requests it received. The ledger
of the finished run must count at least that many billed calls: a provider bills each of them."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from decoevo.testing.fake_openai import FakeOpenAI, Reply
from decoevo.testing.server import serve_app
from decoevo.testing.toy_server import toy_run_args, toy_server, write_toy_questions

pytest.importorskip("uvicorn")


def start(args: list[str], cache: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "DECOEVO_CACHE": str(cache)}
    return subprocess.Popen(
        [sys.executable, "-m", "decoevo", *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )


def test_kill_9_loop_at_default_concurrency_never_bills_more_than_the_ledger(tmp_path: Path) -> None:
    data = write_toy_questions(tmp_path / "toy.jsonl")
    server = toy_server(0.05)
    run_dir = tmp_path / "runs" / "killed"
    cache = tmp_path / "cache.sqlite"
    rng = random.Random(int(os.environ.get("DECOEVO_KILL_SEED", "21")))
    kills = int(os.environ.get("DECOEVO_KILLS", "5"))
    killed_in_flight = kills_done = 0
    with serve_app(server.app()) as url:
        args = toy_run_args(f"{url}/v1", data, tmp_path / "runs", "killed", steps=3)  # no max_concurrency: 64
        for k in range(kills + 1):
            proc = start(args if k == 0 else ["resume", str(run_dir)], cache)
            if k == kills:  # the last one runs to the end
                out, _ = proc.communicate(timeout=300)
                assert proc.returncode == 0, out
                break
            seen = len(server.requests)
            target = seen + rng.randint(10, 40)
            deadline = time.monotonic() + 120
            while len(server.requests) < target and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.002)
            if proc.poll() is not None:  # the run finished before this kill point: no more kills to make
                out, _ = proc.communicate()
                assert proc.returncode == 0, out
                break
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            proc.stdout.close()  # type: ignore[union-attr]
            time.sleep(0.1)  # let the server take the last requests the kernel had sent
            kills_done += 1
            killed_in_flight += server.max_in_flight > 1
    assert kills_done >= 3, f"only {kills_done} kills landed before the run finished"
    ledger = json.loads((run_dir / "ledger.json").read_text())
    billed = ledger["total"]["calls"]
    received = len(server.requests)
    assert killed_in_flight  # requests were in flight at the kills: not vacuous
    assert billed >= received, f"the server received {received} requests, the ledger counts {billed}"
    # The calls sent without an answer are marked as estimated; each answered one was received.
    estimated = ledger["total"]["estimated_calls"]
    assert estimated > 0 and billed - estimated <= received
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["usage"]["calls"] == billed


class Journal:
    """Records what LM tells its journal."""

    def __init__(self) -> None:
        self.requests: list[str] = []  # the ids handed out, in order
        self.ended: list[str] = []  # the ids settled without a bill

    def sent(self, key: str, role: str, model: str, prompt_tokens: int, max_tokens: int) -> str:
        self.requests.append(f"r{len(self.requests)}")
        return self.requests[-1]

    def settled(self, request_id: str) -> None:
        self.ended.append(request_id)


async def test_each_attempt_is_recorded_before_sending_and_completed_by_how_it_ended() -> None:
    """An error status settles a request (nothing billed); an answer completes it through its call record;
    a success whose body cannot be read, and a call cancelled in flight, are billed as an estimate (prompt
    bound, whole max_tokens), marked as such."""
    import asyncio

    from decoevo.lm import LM, GenParams, LMConfig, Message, ModelSpec
    from decoevo.lm.journal import prompt_token_bound
    from decoevo.lm.types import BackendRequest

    garbled: list[int] = []

    def reply(body: dict, n: int) -> Reply:
        text = body["messages"][-1]["content"]
        if text == "flaky" and n == 0:
            return Reply(status=500)
        if text == "garbled" and not garbled:
            garbled.append(n)
            return Reply(raw_body='{"choices": [{"message": {"content": "cut')
        if text == "bad":
            return Reply(status=400, error_message="no such parameter")
        return Reply(content="ok", delay_s=2 if text == "slow" else 0)

    server = FakeOpenAI(reply)
    journal = Journal()
    records = []
    with serve_app(server.app()) as url:
        spec = ModelSpec(backend="openai", model="fake", base_url=f"{url}/v1", backoff_base_s=0.01)
        async with LM(LMConfig(models={"default": spec}, use_cache=False), on_call=records.append) as lm:
            lm.journal = journal
            params = GenParams(max_tokens=77)
            assert (await lm.complete([Message("user", "flaky")], role="solve", params=params)).text == "ok"
            with pytest.raises(Exception, match="400"):
                await lm.complete([Message("user", "bad")], role="solve", params=params)
            assert (await lm.complete([Message("user", "garbled")], role="solve", params=params)).text == "ok"
            slow = asyncio.create_task(lm.complete([Message("user", "slow")], role="judge", params=params))
            while len(server.requests) < 6:
                await asyncio.sleep(0.01)
            slow.cancel()
            with pytest.raises(asyncio.CancelledError):
                await slow
    # flaky: a 500 (settled), then an answer; bad: a 400 (settled); garbled: an unreadable success (billed),
    # then an answer; slow: cancelled in flight (billed)
    assert journal.requests == [f"r{i}" for i in range(6)] and journal.ended == ["r0", "r2"]
    assert [(r.request_id, r.estimated) for r in records] == [("r1", False), ("r3", True), ("r4", False), ("r5", True)]
    assert records[0].completion_tokens > 0 and records[1].role == "solve" and records[3].role == "judge"
    bound = prompt_token_bound(BackendRequest("default", (Message("user", "slow"),), params))
    assert (records[3].prompt_tokens, records[3].completion_tokens) == (bound, 77)
    total = lm.ledger.total()
    assert total.calls == 4 and total.estimated_calls == 2
