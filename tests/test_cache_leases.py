"""Processes that share a request cache pay once for a request they all make at the same time: one
holds a lease on it and pays, the others wait for its answer (3 identical runs used to pay 3 times)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from decoevo.lm.cache import RequestCache
from decoevo.rundir import RunReader
from decoevo.testing.fake_openai import FakeOpenAI, Reply
from decoevo.testing.server import serve_app
from decoevo.testing.toy_server import toy_reply, toy_run_args, write_toy_questions


def test_a_lease_is_exclusive_and_ends_with_its_holder(tmp_path: Path) -> None:
    a, b = RequestCache(tmp_path / "c.sqlite"), RequestCache(tmp_path / "c.sqlite")
    assert a.claim("k", 60) and a.claim("k", 60)  # its own lease, again
    assert not a.held_elsewhere("k")  # its own lease is not another process's
    assert not b.claim("k", 60) and b.held_elsewhere("k")
    a.release("k")
    assert not b.held_elsewhere("k") and b.claim("k", 60)
    assert a.claim("expired", -1) and b.claim("expired", 60)  # an expired lease is taken over
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    conn = a._conn()
    conn.execute("INSERT INTO request_leases VALUES ('orphan', 'x', ?, ?, ?)", (a.host, dead.pid, time.time() + 600))
    assert not b.held_elsewhere("orphan") and b.claim("orphan", 60)  # its holder died: taken over at once


def test_a_lease_released_while_a_claim_looks_at_it_is_claimed_at_once(tmp_path: Path) -> None:
    """`claim` is True whenever no other process's live lease holds the key: one released between the
    claim's insert and its look at the holder is taken then, not refused for a later round."""
    a, b = RequestCache(tmp_path / "c.sqlite"), RequestCache(tmp_path / "c.sqlite")
    assert a.claim("k", 60)
    conn = b._conn()

    class ReleasedInBetween:  # the holder releases just as b looks at who holds the key
        def execute(self, sql: str, *args: object) -> object:
            if sql.startswith("SELECT owner"):
                a.release("k")
            return conn.execute(sql, *args)

    b._conn = ReleasedInBetween  # type: ignore[method-assign, assignment]
    assert b.claim("k", 60)
    assert not a.claim("k", 60) and a.held_elsewhere("k")  # b holds it now


def test_an_answer_stored_with_release_ends_the_lease_in_the_same_write(tmp_path: Path) -> None:
    from decoevo.lm.types import Completion

    a, b = RequestCache(tmp_path / "c.sqlite"), RequestCache(tmp_path / "c.sqlite")
    answer = Completion(text="42", prompt_tokens=3, completion_tokens=1, finish_reason="stop")
    assert a.claim("k", 60) and not b.claim("k", 60)
    a.put("k", "m", answer, release=True)
    assert not b.held_elsewhere("k") and b.get("k") == answer
    assert a.claim("kept", 60)
    a.put("kept", "m", answer)  # without release the lease stays until released
    assert b.held_elsewhere("kept")


def test_three_identical_runs_at_once_pay_each_request_once(tmp_path: Path) -> None:
    server = FakeOpenAI(lambda body, n: Reply(content=toy_reply(body, n).content, delay_s=0.05))
    data = write_toy_questions(tmp_path / "toy.jsonl")
    env = {**os.environ, "DECOEVO_CACHE": str(tmp_path / "cache.sqlite")}
    with serve_app(server.app()) as url:
        procs = [subprocess.Popen([sys.executable, "-m", "decoevo",
                                   *toy_run_args(f"{url}/v1", data, tmp_path / "runs", f"r{i}", steps=2,
                                                 sets=("splits.test=0",))],
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env) for i in range(3)]
        outputs = [p.communicate(timeout=300)[0].decode() for p in procs]
    assert all(p.returncode == 0 for p in procs), outputs
    bodies = [json.dumps(b, sort_keys=True) for b in server.requests]
    assert len(bodies) == len(set(bodies)), f"{len(bodies) - len(set(bodies))} requests were paid twice"
    paid = [sum(not c.cached for c in RunReader(tmp_path / "runs" / f"r{i}").calls()) for i in range(3)]
    assert sum(paid) == len(bodies) > 50
    totals = [RunReader(tmp_path / "runs" / f"r{i}").ledger()["total"] for i in range(3)]
    # each run's effective usage is the whole run's, whoever paid: the three runs cost the same
    assert len({t["calls"] + t["inherited_calls"] for t in totals}) == 1


def _open_cache(path: str, start: float) -> str:
    import time

    from decoevo.lm.cache import RequestCache

    time.sleep(max(0.0, start - time.time()))  # every process opens the new file at the same moment
    try:
        RequestCache(path).get("k")
    except Exception as exc:  # reported, not raised: the parent names what failed
        return f"{type(exc).__name__}: {exc}"
    return "ok"


def test_processes_opening_a_new_cache_at_once_all_open_it(tmp_path) -> None:
    """Four sweep cells starting together: one failed with 'database is locked' (SQLite answers it at once,
    without its busy handler, while another connection switches the new file to WAL)."""
    import multiprocessing as mp
    import time

    ctx = mp.get_context("spawn")
    with ctx.Pool(8) as pool:
        for trial in range(3):
            start = time.time() + 1.5
            path = str(tmp_path / f"c{trial}" / "requests.sqlite")
            assert pool.starmap(_open_cache, [(path, start)] * 8) == ["ok"] * 8
