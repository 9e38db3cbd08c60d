"""`timeouts.within` runs the request in the calling task under a timer (no task of its own): the limit's
error when the timer fires, a caller's own cancel kept a cancel, and the task left with no cancel pending
either way (a cancel left counted would cut the caller's next wait short, or hide a later timeout)."""

from __future__ import annotations

import asyncio
import inspect

import pytest

from decoevo.lm.timeouts import EndpointProgress, Exchange, LimitReached, Timeouts, within

LIMITS = Timeouts(connect_s=1.0, first_byte_s=0.05, total_s=5.0)


def exchange() -> Exchange:
    return Exchange(EndpointProgress())


async def test_a_reply_that_never_comes_is_the_first_byte_limit_and_the_task_is_left_clean() -> None:
    ex = exchange()
    with pytest.raises(LimitReached) as raised:
        await within(asyncio.Event().wait(), lambda: LIMITS, ex)
    assert raised.value.which == "first_byte"
    task = asyncio.current_task()
    assert task is not None and task.cancelling() == 0
    await asyncio.sleep(0.01)  # the caller's next wait is not cut short by a cancel left over
    assert ex.progress.in_flight == 0  # the exchange is closed


async def test_once_the_reply_starts_the_total_limit_counts() -> None:
    ex = exchange()

    async def heard_then_stuck() -> None:
        ex.heard()
        await asyncio.Event().wait()

    with pytest.raises(LimitReached) as raised:
        await within(heard_then_stuck(), lambda: Timeouts(1.0, 0.01, 0.1), ex)
    assert raised.value.which == "total"


async def test_limits_widened_before_the_deadline_are_waited_for() -> None:
    asked: list[float] = []

    def limits() -> Timeouts:  # the second look (at the first deadline) finds a wider limit
        asked.append(1)
        return LIMITS if len(asked) == 1 else Timeouts(1.0, 5.0, 5.0)

    async def slow() -> str:
        await asyncio.sleep(0.2)
        return "answer"

    assert await within(slow(), limits, exchange()) == "answer"
    assert len(asked) >= 2


async def test_a_callers_cancel_stays_a_cancel() -> None:
    started = asyncio.Event()

    async def request() -> None:
        started.set()
        await asyncio.Event().wait()

    waiting = asyncio.ensure_future(within(request(), lambda: Timeouts(1.0, 30.0, 60.0), exchange()))
    await started.wait()
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting


async def test_a_callers_cancel_at_the_deadline_is_not_taken_for_the_limit() -> None:
    """The caller's cancel comes in the very callback in which the deadline fires (the limits are read there):
    two cancels of the task, one of them the timer's; the caller's stays a cancel."""
    caller: list[asyncio.Task[bool]] = []
    reads: list[int] = []

    def limits() -> Timeouts:
        reads.append(1)
        if len(reads) > 1:  # read at the deadline, not at the start
            caller[0].cancel()
        return LIMITS

    caller.append(asyncio.ensure_future(within(asyncio.Event().wait(), limits, exchange())))
    with pytest.raises(asyncio.CancelledError):
        await caller[0]
    assert len(reads) > 1  # the deadline was reached


async def test_no_time_left_at_all_never_starts_the_work() -> None:
    progress = EndpointProgress()
    ex = Exchange(progress)
    started: list[bool] = []

    async def request() -> None:
        started.append(True)

    work = request()
    with pytest.raises(LimitReached):
        await within(work, lambda: Timeouts(1.0, -1.0, -1.0), ex)
    assert started == []
    assert inspect.getcoroutinestate(work) == inspect.CORO_CLOSED  # closed, not left "never awaited"
    await asyncio.sleep(0.01)  # nothing pending on the task
    task = asyncio.current_task()
    assert task is not None and task.cancelling() == 0


async def test_an_answer_in_time_leaves_no_timer_behind() -> None:
    async def quick() -> str:
        return "answer"

    assert await within(quick(), lambda: LIMITS, exchange()) == "answer"
    await asyncio.sleep(3 * LIMITS.first_byte_s)  # past the deadline: a timer left armed would cancel this


async def test_work_that_finishes_despite_the_cancel_keeps_its_answer_and_leaves_the_task_clean() -> None:
    async def stubborn() -> str:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            return "finished anyway"  # a library that turns a cancel into a normal end
        return "unreachable"

    assert await within(stubborn(), lambda: LIMITS, exchange()) == "finished anyway"
    task = asyncio.current_task()
    assert task is not None and task.cancelling() == 0
