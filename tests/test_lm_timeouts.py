"""Timeouts sized to the request, naming the limit that fired, and a hung server given up on quickly."""

from __future__ import annotations

import asyncio
import json
import socket
import time

import pytest

from decoevo.lm import GenParams, InfrastructureError, Message, ModelSpec
from decoevo.lm.timeouts import request_timeouts


def spec(**kwargs) -> ModelSpec:
    return ModelSpec(backend="openai", model="m", base_url="http://127.0.0.1:9/v1", **kwargs)


def test_default_limits_grow_with_max_tokens_and_a_hung_server_is_left_within_minutes():
    short, long = request_timeouts(spec(), 256), request_timeouts(spec(), 4096)
    assert short.first_byte_s < long.first_byte_s and short.total_s < long.total_s
    assert short.connect_s == 10.0 and short.first_byte_s < short.total_s
    default = spec()
    # The old default held a call 6 x 120 s = 12 minutes; now (timeout_retries + 1) attempts of the sized total.
    worst = (default.timeout_retries + 1) * request_timeouts(default, 512).total_s
    assert worst < 200
    # Explicit settings win, and no limit exceeds the total.
    fixed = request_timeouts(spec(timeout_s=5, first_byte_timeout_s=60, connect_timeout_s=30), 4096)
    assert (fixed.connect_s, fixed.first_byte_s, fixed.total_s) == (5, 5, 5)


async def _raw_server(handler):
    server = await asyncio.start_server(handler, "127.0.0.1", 0)
    return server, f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"


async def test_a_server_that_never_answers_fails_on_the_first_byte_timeout_after_few_attempts(cache, openai_lm):
    seen = 0

    async def hang(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal seen
        await reader.readuntil(b"\r\n\r\n")
        seen += 1
        await asyncio.sleep(30)  # accepts the request, never answers

    server, url = await _raw_server(hang)
    try:
        lm = openai_lm(url, cache, first_byte_timeout_s=0.3, max_retries=5, timeout_retries=1)
        started = time.monotonic()
        with pytest.raises(InfrastructureError, match=r"timed out 2 time\(s\): first-byte timeout \(0\.3s\)") as info:
            await lm.complete([Message("user", "q")], role="solve")
        elapsed = time.monotonic() - started
    finally:
        server.close()
    assert seen == 2 and elapsed < 3  # timeout_retries=1: two attempts, not max_retries + 1 = 6
    assert "max_tokens=512" in str(info.value)
    assert "to wait longer: --set lm.models.default.first_byte_timeout_s=0.6" in str(info.value)
    assert lm.ledger.rows[("solve", "default")].failures["infrastructure"] == 1


async def test_a_reply_that_trickles_in_fails_on_the_total_timeout(cache, openai_lm):
    async def trickle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n")
        for _ in range(100):
            writer.write(b" ")
            await writer.drain()
            await asyncio.sleep(0.05)

    server, url = await _raw_server(trickle)
    try:
        lm = openai_lm(url, cache, timeout_s=0.5, first_byte_timeout_s=0.4, max_retries=0)
        with pytest.raises(InfrastructureError, match=r"total timeout \(0\.5s\)"):
            await lm.complete([Message("user", "q")], role="solve")
    finally:
        server.close()


async def test_a_listener_that_never_accepts_fails_on_the_connect_timeout(openai_lm):
    """A socket whose accept queue is full: the kernel drops further SYNs, so connecting hangs."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    fillers = []
    for _ in range(4):  # fill the accept queue (its real length is backlog + 1 or so)
        s = socket.socket()
        s.setblocking(False)
        s.connect_ex(("127.0.0.1", port))
        fillers.append(s)
    try:
        lm = openai_lm(f"http://127.0.0.1:{port}", None, connect_timeout_s=0.3, max_retries=0)
        started = time.monotonic()
        with pytest.raises(InfrastructureError, match=r"connect timeout \(0\.3s\)"):
            await lm.complete([Message("user", "q")], role="solve")
        assert time.monotonic() - started < 3
    finally:
        for s in [*fillers, listener]:
            s.close()


def _completion_reply(text: str) -> bytes:
    body = json.dumps({"choices": [{"message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                       "usage": {"prompt_tokens": 3, "completion_tokens": 2}}).encode()
    return (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s"
            % (len(body), body))


async def test_requests_queued_behind_a_one_slot_server_wait_their_turn(openai_lm):
    """llama-cpp-python's server answers one request at a time. Each answer here takes 0.25 s against a
    first-byte limit of 0.6 s: the 6th of 6 concurrent requests waits 1.5 s, yet the server answers
    something every 0.25 s, so none times out (before, the 3rd to 6th did, three times each)."""
    slot = asyncio.Lock()
    served = 0

    async def one_slot(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal served
        head = await reader.readuntil(b"\r\n\r\n")
        length = int(next(h for h in head.split(b"\r\n") if h.lower().startswith(b"content-length")).split(b":")[1])
        await reader.readexactly(length)
        async with slot:
            await asyncio.sleep(0.25)
            served += 1
            writer.write(_completion_reply(f"answer {served}"))
            await writer.drain()
        writer.close()

    server, url = await _raw_server(one_slot)
    try:
        lm = openai_lm(url, None, first_byte_timeout_s=0.6, timeout_retries=0, max_concurrency=6)
        started = time.monotonic()
        replies = await asyncio.gather(*(lm.complete([Message("user", f"q{i}")], role="solve") for i in range(6)))
        assert time.monotonic() - started >= 1.5
        assert sorted(r.text for r in replies) == [f"answer {i}" for i in range(1, 7)]
        assert served == 6 and lm.ledger.total().retries == 0
    finally:
        server.close()


def test_default_limits_follow_the_servers_speed_and_back_off_like_tcp():
    from decoevo.lm.timeouts import EndpointProgress, default_first_byte_s

    now = [0.0]
    progress = EndpointProgress(clock=lambda: now[0])
    base = request_timeouts(spec(), 400)
    assert progress.stretch() == 1.0
    # a wave of requests sent together times out: one doubling, not one per request
    for _ in range(8):
        progress.timed_out(sent_at=0.0)
    assert progress.stretch() == 2.0
    now[0] = 50.0
    progress.timed_out(sent_at=40.0)  # a retry sent after the doubling, timed out again
    progress.timed_out(sent_at=10.0)  # sent before it: says nothing new
    assert progress.stretch() == 4.0
    widened = request_timeouts(spec(), 400, progress.stretch())
    assert widened.first_byte_s == pytest.approx(4 * base.first_byte_s)
    # a hung server never answers: three attempts wait 1 + 2 + 4 limits, and the backoff is capped
    for t in range(100, 2000, 100):
        now[0] = float(t)
        progress.timed_out(sent_at=float(t))
    assert progress.stretch() == 8.0
    # an answer measures the server: one that needed 1.5x its default limit gets 3x, decaying later
    progress.observe(1.5 * default_first_byte_s(spec(), 119), default_first_byte_s(spec(), 119))
    assert progress.stretch() == pytest.approx(3.0)
    progress.observe(2.0, default_first_byte_s(spec(), 100))
    assert 2.5 < progress.stretch() < 3.0
    for _ in range(20):
        progress.observe(1.0, default_first_byte_s(spec(), 100))
    assert progress.stretch() < 1.5
    # a fast server keeps the defaults, and explicit settings are never stretched
    fast = EndpointProgress()
    fast.observe(2.0, default_first_byte_s(spec(), 100))
    assert fast.stretch() == 1.0
    assert request_timeouts(spec(first_byte_timeout_s=7), 400, 3.0).first_byte_s == 7


async def test_a_server_slower_than_the_default_limit_is_waited_for_after_one_timeout(openai_lm):
    """Each answer takes 0.5 s against a (test-sized) default limit of 0.3 s. As llama-cpp-python's server
    does, a request the client gave up on still holds the slot until it is generated, so the first retry
    (limit 0.6 s) waits behind it and times out too; the second (1.2 s) is answered. The next request
    uses the measured speed at once. Before, all three attempts had 0.3 s and the call failed."""
    slot = asyncio.Lock()

    async def slow(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = int(next(h for h in head.split(b"\r\n") if h.lower().startswith(b"content-length")).split(b":")[1])
        await reader.readexactly(length)
        async with slot:
            await asyncio.sleep(0.5)
            writer.write(_completion_reply("slow but sure"))
            await writer.drain()
        writer.close()

    server, url = await _raw_server(slow)
    try:
        import decoevo.lm.timeouts as timeouts

        allowance = timeouts.FIRST_BYTE_ALLOWANCE_S
        timeouts.FIRST_BYTE_ALLOWANCE_S = 0.3 - 16 / 1000.0  # 0.3 s for max_tokens=16 at 1000 tokens/s
        try:
            lm = openai_lm(url, None, min_tokens_per_s=1000.0, timeout_retries=2)
            params = GenParams(max_tokens=16)
            first = await lm.complete([Message("user", "q1")], role="solve", params=params)
            assert first.text == "slow but sure" and lm.ledger.total().retries == 2
            second = await lm.complete([Message("user", "q2")], role="solve", params=params)
            assert second.text == "slow but sure" and lm.ledger.total().retries == 2
        finally:
            timeouts.FIRST_BYTE_ALLOWANCE_S = allowance
    finally:
        server.close()


async def test_a_stuck_request_is_not_kept_alive_by_answers_to_requests_sent_after_it(openai_lm):
    """A server with many slots answers the others while one request is stuck: only answers to requests
    that were ahead of it restart its clock, so it times out after its own limit."""

    async def many_slots(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = int(next(h for h in head.split(b"\r\n") if h.lower().startswith(b"content-length")).split(b":")[1])
        body = await reader.readexactly(length)
        if b"stuck" in body:
            await asyncio.sleep(30)
        await asyncio.sleep(0.05)
        writer.write(_completion_reply("fine"))
        await writer.drain()
        writer.close()

    server, url = await _raw_server(many_slots)
    try:
        lm = openai_lm(url, None, first_byte_timeout_s=0.5, timeout_retries=0, max_retries=0)
        stuck = asyncio.ensure_future(lm.complete([Message("user", "stuck")], role="solve"))
        answered_after = None
        for i in range(30):  # answers keep coming for ~1.5 s
            await lm.complete([Message("user", f"q{i}")], role="solve")
            if stuck.done():
                answered_after = i
                break
        with pytest.raises(InfrastructureError, match=r"first-byte timeout \(0\.5s\)"):
            await stuck
        # it timed out while the other answers were still coming (not when they stopped): a condition, not a
        # timed bound, so a loaded machine that slows the answers down cannot break it
        assert answered_after is not None and answered_after < 29, answered_after
    finally:
        server.close()
