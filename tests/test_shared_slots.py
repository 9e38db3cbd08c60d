"""Shared endpoint slots (`lm/shared_slots.py`): processes pointing at one slot directory never have more
requests in flight at an endpoint than its slot count; a dead holder's slot is free again; a cancelled
waiter leaks nothing; two LMs sharing slots keep a real HTTP server within the limit."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time

import pytest

from decoevo.lm import LM, LMConfig, Message, ModelSpec
from decoevo.lm.shared_slots import ENV, FileSlots
from decoevo.testing.fake_openai import FakeOpenAI, Reply


async def _hold(pool: FileSlots, counter: dict[str, int], seconds: float) -> None:
    slot = await pool.acquire()
    counter["now"] += 1
    counter["max"] = max(counter["max"], counter["now"])
    try:
        await asyncio.sleep(seconds)
    finally:
        counter["now"] -= 1
        pool.release(slot)


async def test_pools_sharing_a_directory_never_exceed_the_slot_count(tmp_path):
    # flock is per open file, so two pools in one process contend exactly as two processes do
    a, b = FileSlots(tmp_path, "http://x/v1", 3), FileSlots(tmp_path, "http://x/v1", 3)
    other = FileSlots(tmp_path, "http://y/v1", 3)  # another endpoint has its own budget
    counter, other_counter = {"now": 0, "max": 0}, {"now": 0, "max": 0}
    await asyncio.gather(*[_hold(p, counter, 0.01) for p in (a, b) for _ in range(8)],
                         *[_hold(other, other_counter, 0.01) for _ in range(3)])
    assert counter["max"] == 3 and counter["now"] == 0
    assert other_counter["max"] == 3
    assert a.waited + b.waited >= 13  # 16 requests, 3 slots
    for pool in (a, b, other):
        pool.close()


async def test_a_killed_holder_frees_its_slots(tmp_path):
    holder = subprocess.Popen([sys.executable, "-c", (
        "import asyncio, sys, time; from pathlib import Path; from decoevo.lm.shared_slots import FileSlots\n"
        f"p = FileSlots(Path({str(tmp_path)!r}), 'e', 2)\n"
        "asyncio.run(p.acquire()); asyncio.run(p.acquire()); print('held', flush=True); time.sleep(60)")],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        pool = FileSlots(tmp_path, "e", 2)
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(pool.acquire(), 0.1)  # both slots are taken
        holder.kill()
        holder.wait()
        slot = await asyncio.wait_for(pool.acquire(), 5)
        assert slot in (0, 1)
        pool.close()
    finally:
        holder.kill()


async def test_a_cancelled_waiter_leaks_no_slot(tmp_path):
    pool = FileSlots(tmp_path, "e", 1)
    first = await pool.acquire()
    waiter = asyncio.ensure_future(pool.acquire())
    await asyncio.sleep(0.01)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    pool.release(first)
    assert await asyncio.wait_for(pool.acquire(), 1) == 0  # the only slot is free again
    pool.close()


async def test_lms_sharing_slots_keep_a_server_within_its_limit(tmp_path, monkeypatch):
    pytest.importorskip("uvicorn")
    from decoevo.testing.server import serve_app

    fake = FakeOpenAI(lambda body, n: Reply(content="ok", delay_s=0.02))
    with serve_app(fake.app()) as url:
        spec = ModelSpec(backend="openai", model="fake", base_url=f"{url}/v1", max_concurrency=3)

        async def many(lm: LM, tag: str) -> None:
            await asyncio.gather(*[lm.complete([Message("user", f"{tag} {i}")], role="solver") for i in range(12)])

        def make() -> LM:
            return LM(LMConfig(models={"default": spec}, use_cache=False))

        async with make() as a, make() as b:  # without shared slots: 2 × 3 in flight
            await asyncio.gather(many(a, "a"), many(b, "b"))
        assert fake.max_in_flight == 6

        fake.max_in_flight = 0
        monkeypatch.setenv(ENV, str(tmp_path / "slots"))
        async with make() as a, make() as b:
            started = time.monotonic()
            await asyncio.gather(many(a, "c"), many(b, "d"))
            assert time.monotonic() - started < 10
        assert fake.max_in_flight == 3


async def test_the_poll_period_follows_how_long_requests_hold_a_slot(tmp_path):
    pool = FileSlots(tmp_path, "e", 1)
    assert pool.poll_s == 0.002  # nothing known yet: the shortest period
    for _ in range(20):
        slot = await pool.acquire()
        await asyncio.sleep(0.2)
        pool.release(slot)
    assert 0.15 < pool.hold_s < 0.4
    assert 0.15 / 40 < pool.poll_s <= 0.01  # a freed slot idles at most ~1/40 of a request
    pool.close()
