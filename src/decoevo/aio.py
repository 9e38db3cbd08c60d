"""Awaiting independent steps together, with the outcome the same as awaiting them one after another.

`together(a, b, ...)` runs the awaitables concurrently, waits until every one has finished (no sibling is
left running after a failure), then raises the first exception in argument order, the one the sequential
code would have raised, or returns the results in order. Only the wall time changes; a failure can cost
the calls a sibling made, which the sequential code would not have made.

`one_by_one()` switches it to awaiting in order within a block (and the tasks started inside it), so a
test can compare a run against its sequential twin.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Awaitable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar, overload

A = TypeVar("A")
B = TypeVar("B")
C = TypeVar("C")

_SEQUENTIAL: contextvars.ContextVar[bool] = contextvars.ContextVar("decoevo_sequential_awaits", default=False)


@contextmanager
def one_by_one() -> Iterator[None]:
    token = _SEQUENTIAL.set(True)
    try:
        yield
    finally:
        _SEQUENTIAL.reset(token)


async def done(value: A) -> A:
    """An awaitable that is already finished: a placeholder for a step a method does not take."""
    return value


@overload
async def together(a: Awaitable[A], b: Awaitable[B], /) -> tuple[A, B]: ...
@overload
async def together(a: Awaitable[A], b: Awaitable[B], c: Awaitable[C], /) -> tuple[A, B, C]: ...
@overload
async def together(*aws: Awaitable[Any]) -> tuple[Any, ...]: ...


async def together(*aws: Awaitable[Any]) -> tuple[Any, ...]:
    if _SEQUENTIAL.get():
        results: list[Any] = []
        try:
            for aw in aws:
                results.append(await aw)
        finally:
            for aw in aws[len(results) + 1:]:  # never started: close them without a "never awaited" warning
                close = getattr(aw, "close", None)
                if close is not None:
                    close()
        return tuple(results)
    return tuple(await gather_all(*aws))


def _retrieve(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()


def abandon(task: asyncio.Future[Any]) -> None:
    """Cancel a task nobody will await again (its awaiter was interrupted). What it ends with is retrieved
    when it ends: one that failed before the cancel reached it (a connection the shutdown closed under it)
    would otherwise print "Task exception was never retrieved" and a traceback after the one-line message."""
    task.cancel()
    task.add_done_callback(_retrieve)


@overload
async def gather_all(a: Awaitable[A], b: Awaitable[B], /) -> tuple[A, B]: ...
@overload
async def gather_all(*aws: Awaitable[A]) -> tuple[A, ...]: ...


async def gather_all(*aws: Awaitable[Any]) -> tuple[Any, ...]:
    """`asyncio.gather`, except that every awaitable runs to its end before the first failure (in argument
    order) is raised. A plain gather returns at the first failure and leaves the others running: after a
    budget stop, model calls still in flight behind a run that has ended, holding server slots and paid
    for but never recorded."""
    tasks = [asyncio.ensure_future(aw) for aw in aws]  # not gather(return_exceptions): a result may be one
    if not tasks:
        return ()
    try:
        await asyncio.wait(tasks)
    except BaseException:  # cancelled from outside (Ctrl-C): so are they
        for task in tasks:
            abandon(task)
        raise
    failed = [t for t in tasks if t.cancelled() or t.exception() is not None]  # every exception retrieved
    if failed:
        failed[0].result()  # raises the first failure in argument order
    return tuple(t.result() for t in tasks)
