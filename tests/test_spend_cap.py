"""Issue 25 item 3: the experiment's dollar cap (`DECOEVO_MAX_COST`, lm/spend.py) is a hard cap across
processes: each request reserves its worst case in the shared spend file before it is sent, waits while
reservations in flight may free room, is refused when they cannot, and is settled at its usage after."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from decoevo.lm import LM, LMConfig, Message, ModelSpec
from decoevo.lm import spend as spend_mod
from decoevo.lm.spend import CAP_ENV, FILE_ENV, SharedSpend, SpendCapReached, admit, at_cap, read_spend, read_state
from decoevo.lm.types import BackendRequest, Completion, GenParams

PRICE = (2.0, 8.0)  # USD per million prompt, completion tokens

# One process of an experiment: N requests, 8 in flight at once, each answered after 50 ms with 10 prompt and
# 100 completion tokens (well under its bound: max_tokens 512), starting together at a given wall time.
WORKER = """
import asyncio, json, sys, time
from decoevo.lm import LM, LMConfig, Message, ModelSpec
from decoevo.lm.budget import BudgetExceeded
from decoevo.lm.types import Completion

class Slow:
    identity, max_concurrency, paid = "slow", 8, 0
    async def complete(self, request):
        self.paid += 1
        await asyncio.sleep(0.05)
        return Completion(text="ok", prompt_tokens=10, completion_tokens=100)
    async def aclose(self):
        return None

async def main(tag, n, start):
    backend = Slow()
    spec = ModelSpec(input_price_per_mtok=2.0, output_price_per_mtok=8.0)
    lm = LM(LMConfig(models={"default": spec}, use_cache=False), backends={"default": backend})
    await asyncio.sleep(max(0.0, start - time.time()))
    results = await asyncio.gather(*(lm.complete([Message("user", f"{tag} question {i}")], role="solve")
                                     for i in range(n)), return_exceptions=True)
    refused = sum(isinstance(r, BudgetExceeded) for r in results)
    other = [repr(r) for r in results if isinstance(r, BaseException) and not isinstance(r, BudgetExceeded)]
    print(json.dumps({"paid": backend.paid, "refused": refused, "other": other}))

asyncio.run(main(sys.argv[1], int(sys.argv[2]), float(sys.argv[3])))
"""


def each_usd(prompt: int = 10, completion: int = 100) -> float:
    return (prompt * PRICE[0] + completion * PRICE[1]) / 1e6


def test_three_processes_with_eight_in_flight_each_never_spend_past_a_tiny_cap(tmp_path: Path):
    """Before, each process checked the shared sum plus its own calls in flight: the three first waves
    (24 requests, $0.0197) all passed a $0.01 cap with nothing spent yet (fails on the old code)."""
    spend, cap = tmp_path / "spend.log", 0.01
    env = {**os.environ, FILE_ENV: str(spend), CAP_ENV: repr(cap)}
    start = time.time() + 3.0  # after every interpreter has imported decoevo
    procs = [subprocess.Popen([sys.executable, "-c", WORKER, f"p{k}", "40", repr(start)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for k in range(3)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), [o[1][-2000:] for o in outs]
    done = [json.loads(o[0]) for o in outs]
    assert not any(d["other"] for d in done), done
    paid = sum(d["paid"] for d in done)
    spent = read_spend(spend)
    assert spent == pytest.approx(paid * each_usd())  # every paid request settled at its usage, once
    assert spent <= cap * (1 + 1e-9)  # float sums in another order may differ in the last bit
    assert all(d["refused"] > 0 for d in done)  # the cap stopped every process
    # requests waited for room rather than being refused early: with a worst case of ~$0.0042 and a
    # cost of $0.00082, the cap pays for more than its room at worst-case reservations (2)
    assert paid > 3
    state = read_state(spend)
    assert state.held == 0 and state.stopped_at == cap


def request(text: str = "question", max_tokens: int = 512) -> BackendRequest:
    return BackendRequest("default", (Message("user", text),), GenParams(max_tokens=max_tokens))


def priced_lm(backend: object) -> LM:
    spec = ModelSpec(input_price_per_mtok=PRICE[0], output_price_per_mtok=PRICE[1])
    return LM(LMConfig(models={"default": spec}, use_cache=False), backends={"default": backend})  # type: ignore[dict-item]


class Quick:
    identity, max_concurrency = "quick", 4

    def __init__(self) -> None:
        self.paid = 0

    async def complete(self, request: BackendRequest) -> Completion:
        self.paid += 1
        return Completion(text="ok", prompt_tokens=10, completion_tokens=100)

    async def aclose(self) -> None:
        return None


def reservation(path: Path, usd: float, pid: int, host: str, at: float | None = None) -> str:
    with open(path, "a", encoding="utf-8") as f:
        f.write(f"r foreign.1 {usd!r} {pid} {host} {time.time() if at is None else at}\n")
    return "foreign.1"


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_the_admission_rule():
    assert admit(spent=0.5, held=0.3, freeable=0.3, estimate=0.2, cap=1.0) == "reserve"
    assert admit(spent=0.5, held=0.4, freeable=0.4, estimate=0.2, cap=1.0) == "wait"
    assert admit(spent=0.5, held=0.4, freeable=0.0, estimate=0.2, cap=1.0) == "refuse"  # nothing can free room
    assert admit(spent=0.5, held=0.4, freeable=0.05, estimate=0.2, cap=1.0) == "refuse"  # not enough can
    assert admit(spent=0.9, held=0.0, freeable=0.0, estimate=0.2, cap=1.0) == "refuse"


def test_a_request_reserves_its_bound_and_is_settled_at_its_usage(tmp_path, monkeypatch):
    spend = tmp_path / "spend.log"
    monkeypatch.setenv(FILE_ENV, str(spend))
    monkeypatch.setenv(CAP_ENV, "1.0")
    backend = Quick()
    result = asyncio.run(priced_lm(backend).complete([Message("user", "question")], role="solve"))
    assert result.text == "ok" and backend.paid == 1
    lines = [line.split() for line in spend.read_text().splitlines()]
    assert [f[0] for f in lines] == ["r", "s"] and lines[0][1] == lines[1][1]
    prompt, completion = spend_mod.request_bound(request())
    assert prompt >= len(b"question") and completion == 512
    assert float(lines[0][2]) == pytest.approx(each_usd(prompt, completion))
    assert float(lines[1][2]) == pytest.approx(each_usd())
    assert read_spend(spend) == pytest.approx(each_usd())


def test_a_waiting_request_goes_once_a_live_reservation_settles_for_less(tmp_path):
    spend = tmp_path / "spend.log"
    other = SharedSpend(spend, 0.01)
    mine = SharedSpend(spend, 0.01)

    async def scenario() -> float:
        rid = await other.reserve(0.009)
        waiting = asyncio.create_task(mine.reserve(0.004))
        await asyncio.sleep(0.2)
        assert not waiting.done()  # $0.009 in flight + $0.004 does not fit under $0.01: it waits
        other.settle(rid, 0.001)
        started = time.monotonic()
        assert await asyncio.wait_for(waiting, 5) is not None
        return time.monotonic() - started

    asyncio.run(scenario())
    assert read_state(spend).spent == pytest.approx(0.001) and read_state(spend).held == pytest.approx(0.004)


def test_a_dead_processs_reservation_is_settled_at_its_estimate_and_blocks_nothing(tmp_path):
    """Before, nothing reserved; now a reservation whose pid is gone would block every request for ever
    unless it is settled by whoever finds it."""
    spend = tmp_path / "spend.log"
    gate = SharedSpend(spend, 0.01)
    reservation(spend, 0.007, dead_pid(), gate.host)
    assert asyncio.run(asyncio.wait_for(gate.reserve(0.002), 5)) is not None  # fits beside it
    with pytest.raises(SpendCapReached):  # $0.007 + $0.002 + $0.004 > $0.01; the dead one is settled
        asyncio.run(asyncio.wait_for(gate.reserve(0.004), 5))
    assert "s foreign.1 0.007\n" in spend.read_text()
    assert read_state(spend).spent == pytest.approx(0.007)


def test_another_hosts_reservation_is_waited_for_a_bounded_time(tmp_path, monkeypatch):
    monkeypatch.setattr(spend_mod, "HOST_WAIT_S", 0.3)
    spend = tmp_path / "spend.log"
    gate = SharedSpend(spend, 0.01)
    reservation(spend, 0.008, 1, "another-node")
    started = time.monotonic()
    with pytest.raises(SpendCapReached):
        asyncio.run(asyncio.wait_for(gate.reserve(0.004), 10))
    assert time.monotonic() - started >= 0.3  # it waited: that node's request may still settle for less
    assert "s foreign.1" not in spend.read_text()  # not settled for it: it may be alive
    # one made longer ago than that (a node of a killed earlier run) is not waited for at all: with a wait of
    # 60 s, the refusal comes before wait_for's 10 s (no timed bound a loaded machine could break)
    monkeypatch.setattr(spend_mod, "HOST_WAIT_S", 60.0)
    again = tmp_path / "again.log"
    reservation(again, 0.008, 1, "another-node", at=time.time() - 120.0)
    with pytest.raises(SpendCapReached):
        asyncio.run(asyncio.wait_for(SharedSpend(again, 0.01).reserve(0.004), 10))


def test_a_stop_at_a_cap_holds_until_the_cap_is_raised_and_old_spend_files_still_count(tmp_path):
    spend = tmp_path / "spend.log"
    spend.write_text("0.25\n0.125\n")  # the format before reservations: one cost a line
    assert read_spend(spend) == pytest.approx(0.375)
    gate = SharedSpend(spend, 0.5)
    with pytest.raises(SpendCapReached):
        asyncio.run(gate.reserve(0.2))
    assert read_spend(spend) == pytest.approx(0.375)  # a refused request spends nothing
    assert at_cap(spend, 0.5) and at_cap(spend, 0.4) and not at_cap(spend, 0.6)


def test_lms_that_write_the_spend_file_do_not_keep_its_descriptor_after_closing(tmp_path, monkeypatch):
    """The spend file is kept open between requests (half the CPU it adds): each LM closes it."""
    monkeypatch.setenv(FILE_ENV, str(tmp_path / "spend.log"))
    monkeypatch.setenv(CAP_ENV, "1.0")

    async def use_and_close() -> None:
        lm = priced_lm(Quick())
        await lm.complete([Message("user", "question")], role="solve")
        await lm.aclose()

    before = len(os.listdir("/proc/self/fd"))
    for _ in range(20):
        asyncio.run(use_and_close())
    assert len(os.listdir("/proc/self/fd")) < before + 5
    assert read_spend(tmp_path / "spend.log") == pytest.approx(20 * each_usd())


# ---- the mutation bench's survivors in lm/spend.py (docs/reliability.md "Mutation bench") --------------------

def test_a_spend_file_not_written_yet_reads_as_nothing_spent(tmp_path):
    spend = SharedSpend(tmp_path / "spend.log", 1.0)
    state = spend.state()
    assert (state.spent, state.held) == (0.0, 0.0) and not (tmp_path / "spend.log").exists()


async def test_a_request_without_a_price_reserves_nothing(tmp_path):
    spend = SharedSpend(tmp_path / "spend.log", 1.0)
    assert await spend.reserve(None) is None and await spend.reserve(0.0) is None
    assert not (tmp_path / "spend.log").exists()  # nothing written for a call with no dollars


async def test_a_spend_file_replaced_under_a_process_that_holds_it_open_is_refused(tmp_path):
    """The process keeps its descriptor open between requests: without a look at the path's inode, it
    would go on counting in the replaced file while every other process reads the new one."""
    path = tmp_path / "spend.log"
    spend = SharedSpend(path, 1.0)
    assert await spend.reserve(0.1) is not None  # opens and keeps the file
    replacement = tmp_path / "other.log"
    replacement.write_text("0\n")
    os.replace(replacement, path)
    with pytest.raises(spend_mod.SpendLogCorrupt, match="replaced"):
        await spend.reserve(0.1)
    spend.close()


# ---- survivors of the bench at issue 46 (lm/spend.py, docs/reliability.md) -----------------------------------

async def test_a_process_given_the_experiments_identity_works_on_the_untouched_log(tmp_path):
    """The identity check must not refuse the experiment's own log: its `e TOKEN` line is what it looks for."""
    path = tmp_path / "spend.log"
    path.write_text("0.25\n")
    identity = spend_mod.begin(path)
    gate = SharedSpend(path, 1.0, identity)
    rid = await gate.reserve(0.1)
    gate.settle(rid, 0.05)
    gate.close()
    assert spend_mod.check(path, identity).spent == pytest.approx(0.30)
    with pytest.raises(spend_mod.SpendLogCorrupt, match="replaced"):  # another invocation's token
        spend_mod.check(path, identity.rsplit(":", 1)[0] + ":0123456789abcdef")


def test_dollars_the_ledgers_knew_are_written_back_once(tmp_path):
    path = tmp_path / "spend.log"
    spend_mod.add_spent(path, 0.25)
    spend_mod.add_spent(path, 0.5)
    assert read_spend(path) == pytest.approx(0.75)
    for bad in (0.0, -1.0, float("nan")):
        with pytest.raises(ValueError):
            spend_mod.add_spent(path, bad)


async def test_closing_twice_is_harmless(tmp_path):
    spend = SharedSpend(tmp_path / "spend.log", 1.0)
    await spend.reserve(0.1)
    spend.close()
    spend.close()  # an LM closed twice, or closed and then collected


def test_a_dead_reservation_that_blocks_the_room_is_settled_then_the_request_refused(tmp_path):
    """Waiting on a dead process's reservation would wait for ever: it is settled (at its estimate, so spent)
    and the request that still does not fit is refused."""
    spend = tmp_path / "spend.log"
    gate = SharedSpend(spend, 0.01)
    reservation(spend, 0.009, dead_pid(), gate.host)
    with pytest.raises(SpendCapReached):
        asyncio.run(asyncio.wait_for(gate.reserve(0.004), 10))
    assert read_state(spend).spent == pytest.approx(0.009)
