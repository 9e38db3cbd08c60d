"""Every paid request of every command is in a ledger, also across kills and concurrent processes (issue 26,
item 9). The toy world behind a real HTTP server counts what it received; RUN/eval/ledger.json and a pilot's
OUT/pilot/ledger.json must count at least that many calls. A session still waiting for its answers is never
settled as lost by another one starting beside it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from decoevo.rundir import RequestLog, settle_interrupted

from .test_adversary_round3 import _kill_after, _toy_world_server

pytest.importorskip("uvicorn")


def _ledger_calls(path: Path) -> tuple[int, int]:
    total = json.loads(path.read_text())["total"]
    return int(total["calls"]), int(total["estimated_calls"])


def test_a_live_session_is_not_settled_by_another_and_a_dead_one_is(tmp_path: Path) -> None:
    """Before: a second evaluation starting beside a running one billed the running one's requests in flight
    as lost (and the answers then came too). Now only a session whose lock is free is settled."""
    from decoevo.rundir.requests import live_sessions

    live, dead = RequestLog(tmp_path), RequestLog(tmp_path)
    live.sent("k1", "solver", "default", 10, 64)
    dead.sent("k2", "solver", "default", 10, 64)
    dead.close()  # as the kernel does for a killed process
    assert live_sessions(tmp_path) == {live.session}
    settled = settle_interrupted(tmp_path)
    assert [line.key for line in settled] == ["k2"]
    live.close()
    assert [line.key for line in settle_interrupted(tmp_path)] == ["k1"]  # now it is lost: billed once
    assert settle_interrupted(tmp_path) == ()


def test_eval_killed_three_times_and_two_at_once_are_all_in_the_eval_ledger(tmp_path: Path) -> None:
    """Before: eval killed 3 times, server 44 requests, ledger-test.json 12; two concurrent evals, 8 vs 0.
    Now RUN/eval/ledger.json is made from the settled call log of every evaluation of the run."""
    from decoevo.testing.server import serve_app
    from decoevo.testing.toy_server import toy_run_args, write_toy_questions

    data = write_toy_questions(tmp_path / "toy.jsonl", n=30)
    delay = {"s": 0.0}
    server = _toy_world_server(delay)
    env = {**os.environ, "DECOEVO_CACHE": str(tmp_path / "cache.sqlite")}
    run = tmp_path / "runs" / "r"
    with serve_app(server.app()) as url:
        args = toy_run_args(f"{url}/v1", data, tmp_path / "runs", "r", steps=1, sets=("splits.test=12",))
        done = subprocess.run([sys.executable, "-m", "decoevo", *args], env=env, capture_output=True, text=True)
        assert done.returncode == 0, done.stdout + done.stderr
        delay["s"] = 0.3
        before = len(server.requests)
        for _ in range(3):
            _kill_after(["eval", str(run)], env, server, 3)
        # two at once, to the end: one grades the test split, the other the same again under another name
        both = [subprocess.Popen([sys.executable, "-m", "decoevo", "eval", str(run), *extra], env=env,
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                for extra in ([], ["--force"])]
        outs = [p.communicate(timeout=300)[0] for p in both]
        assert all(p.returncode == 0 for p in both), outs
        received = len(server.requests) - before
    billed, estimated = _ledger_calls(run / "eval" / "ledger.json")
    assert billed >= received, f"the server received {received} requests, eval/ledger.json counts {billed}"
    assert estimated > 0  # the kills left requests in flight: not vacuous
    assert billed - estimated <= received  # each answered call was received once: nothing counted twice
    lines = [json.loads(x) for x in (run / "eval" / "calls.jsonl").read_text().splitlines()]
    requests = [c["request"] for c in lines if not c["cached"]]
    assert len(requests) == len(set(requests))  # no request billed twice (answered and settled as lost)


@pytest.mark.slow  # (~15 s) the same ledger rule is checked for eval in the default run
def test_pilot_killed_three_times_is_all_in_its_ledger(tmp_path: Path) -> None:
    """Before: pilot killed 3 times, server 119 requests, OUT/pilot/ledger.json 51 (the last process's)."""
    from decoevo.testing.server import serve_app
    from decoevo.testing.toy_server import write_toy_questions

    data = write_toy_questions(tmp_path / "toy.jsonl", n=24)
    delay = {"s": 0.3}
    server = _toy_world_server(delay)
    env = {**os.environ, "DECOEVO_CACHE": str(tmp_path / "cache.sqlite")}
    with serve_app(server.app()) as url:
        pilot_args = ["pilot", str(tmp_path / "pilot"), "--base-url", f"{url}/v1", "--model", "toy", "--data",
                      str(data), "--preset", "default", "--seeds", "3", "--set",
                      "splits={pilot: 4, train: 6, probe: 2, solver_gate: 3, generator_gate: 3, test: 0}"]
        for _ in range(3):
            _kill_after(pilot_args, env, server, 3)
        delay["s"] = 0.0  # the kills needed requests in flight; the last process only has to finish
        finished = subprocess.run([sys.executable, "-m", "decoevo", *pilot_args], env=env, capture_output=True,
                                  text=True, timeout=300)
        assert finished.returncode == 0, finished.stdout + finished.stderr
        received = len(server.requests)
    billed, estimated = _ledger_calls(tmp_path / "pilot" / "pilot" / "ledger.json")
    assert billed >= received, f"the server received {received} requests, pilot/ledger.json counts {billed}"
    assert estimated > 0 and billed - estimated <= received


def test_evaluations_of_one_run_at_once_in_one_process_bill_each_request_once(tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """`decoevo reproduce` grades a run's transfer, dynamics and alignment at once in one process. Before,
    each new EvalSession settled the requests the others had in flight as lost: billed as an estimate and
    then again when answered. Now the ledger equals what the server received, with nothing estimated."""
    import asyncio

    from decoevo import api
    from decoevo.testing.server import serve_app
    from decoevo.testing.toy_server import toy_run_args, write_toy_questions

    data = write_toy_questions(tmp_path / "toy.jsonl", n=30)
    delay = {"s": 0.0}
    server = _toy_world_server(delay)
    env = {**os.environ, "DECOEVO_CACHE": str(tmp_path / "cache.sqlite")}
    monkeypatch.setenv("DECOEVO_CACHE", str(tmp_path / "cache.sqlite"))
    run = tmp_path / "runs" / "r"
    with serve_app(server.app()) as url:
        args = toy_run_args(f"{url}/v1", data, tmp_path / "runs", "r", steps=1, sets=("splits.test=12",))
        done = subprocess.run([sys.executable, "-m", "decoevo", *args], env=env, capture_output=True, text=True)
        assert done.returncode == 0, done.stdout + done.stderr
        delay["s"] = 0.2
        before = len(server.requests)

        async def later(split: str, after: int) -> None:  # starts while the others wait for answers
            while len(server.requests) < before + after:
                await asyncio.sleep(0.01)
            await api.evaluate_async(run, split=split)

        async def at_once() -> None:
            await asyncio.gather(api.evaluate_async(run, split="test"), later("probe", 2), later("solver_gate", 4))

        asyncio.run(at_once())
        received = len(server.requests) - before
    lines = [json.loads(x) for x in (run / "eval" / "calls.jsonl").read_text().splitlines()]
    paid = [c for c in lines if not c["cached"]]
    assert [c for c in paid if c.get("estimated")] == [] and len(paid) == received
    billed, estimated = _ledger_calls(run / "eval" / "ledger.json")
    assert received > 0 and (billed, estimated) == (received, 0), (received, billed, estimated)


def test_a_session_lock_file_appears_under_its_name_only_once_locked(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A settle starting beside a session that is just sending its first request must see it live: the
    session's lock file is never under its name unlocked (it was, between its creation and its flock, and a
    concurrent evaluation billed that first request as lost, then it was answered: billed twice)."""
    import fcntl

    from decoevo.rundir.requests import LIVE, live_sessions

    log = RequestLog(tmp_path)
    seen: list[set[str]] = []
    lock = fcntl.flock

    def watched(fd: int, operation: int) -> None:
        if operation == fcntl.LOCK_EX:  # the session taking its lock: what a settle would see right now
            names = {p.name for p in (tmp_path / LIVE).iterdir()}
            seen.append(names)
            assert log.session not in live_sessions(tmp_path)
        lock(fd, operation)

    monkeypatch.setattr(fcntl, "flock", watched)
    log.sent("k", "solver", "default", 10, 64)
    monkeypatch.undo()
    assert seen and all(log.session not in names for names in seen)  # not under its name before the lock
    assert live_sessions(tmp_path) == {log.session}
    log.close()
    assert live_sessions(tmp_path) == set() and not any((tmp_path / LIVE).iterdir())


def test_a_session_that_starts_while_a_settle_runs_is_not_billed(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """A settle reads the journal before it looks for live sessions: a session that starts right after the
    look (and so is not in it) and sends a request has no line in what the settle read. Read after the look,
    that request was billed as lost while its session went on to get the answer."""
    from decoevo.rundir import resume

    dead = RequestLog(tmp_path)
    dead.sent("k1", "solver", "default", 10, 64)
    dead.close()  # its process died with k1 in flight
    started: list[RequestLog] = []
    look = resume.live_sessions

    def look_then_start(root: Path) -> set[str]:
        found = look(root)
        started.append(RequestLog(root))
        started[0].sent("k2", "solver", "default", 10, 64)  # a session beginning right after the look
        return found

    monkeypatch.setattr(resume, "live_sessions", look_then_start)
    assert [line.key for line in settle_interrupted(tmp_path)] == ["k1"]
    monkeypatch.undo()
    assert [line.key for line in settle_interrupted(tmp_path)] == []  # k2's session is alive: still left to it
    started[0].close()


def test_a_request_settled_by_its_session_is_not_billed_after_it_dies(tmp_path: Path) -> None:
    """A request its own session settled (it never left, or could not have been billed) is done: a later
    settle bills only the one still in flight when the session died."""
    log = RequestLog(tmp_path)
    log.settled(log.sent("k1", "solver", "default", 10, 64))
    log.sent("k2", "solver", "default", 10, 64)
    log.close()  # died with k2 in flight
    assert [line.key for line in settle_interrupted(tmp_path)] == ["k2"]
