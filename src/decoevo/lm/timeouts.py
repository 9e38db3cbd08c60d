"""How long to wait for one request, sized to what it asks for, and measured from when the server could
have started on it.

A non-streamed completion sends its first byte only when generation is done, so the first-byte limit
must cover generating `max_tokens` at the slowest speed we accept, plus a fixed allowance for the prompt.
A fixed 120 s limit was both too long for a hung server (6 attempts: 12 minutes) and too short for a long
answer from a slow one.

A server with fewer slots than requests in flight (llama-cpp-python's server has one) queues the rest,
and a queued request's clock would run out behind the others: 8 requests at a one-slot server waited
8 answers long and timed out. So the clock of a request still waiting for its reply restarts whenever
another request to the same endpoint is answered (`EndpointProgress`): waiting behind the client's own
requests does not count, while a hung server (no answers at all) is still left after one limit."""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from .config import ModelSpec

T = TypeVar("T")

#: seconds allowed before generation starts (prompt processing, a slot freeing up)
FIRST_BYTE_ALLOWANCE_S = 20.0
#: seconds allowed to receive the body once it has started
TRANSFER_ALLOWANCE_S = 15.0


@dataclass(frozen=True)
class Timeouts:
    connect_s: float
    first_byte_s: float
    total_s: float

    def describe(self, which: str) -> str:
        value = {"connect": self.connect_s, "first_byte": self.first_byte_s, "total": self.total_s}[which]
        return f"{which.replace('_', '-')} timeout ({value:.1f}s)"


def default_first_byte_s(spec: ModelSpec, tokens: int) -> float:
    """The first-byte limit a reply of `tokens` gets when nothing else is known."""
    return FIRST_BYTE_ALLOWANCE_S + tokens / spec.min_tokens_per_s


def request_timeouts(spec: ModelSpec, max_tokens: int, stretch: float = 1.0) -> Timeouts:
    """The three limits for a request of `max_tokens`; explicit settings in `spec` win. `stretch` widens
    the default limits for a server seen to be slower than `min_tokens_per_s` (`EndpointProgress.stretch`)."""
    first_byte = spec.first_byte_timeout_s or stretch * default_first_byte_s(spec, max_tokens)
    total = spec.timeout_s or first_byte + TRANSFER_ALLOWANCE_S
    return Timeouts(connect_s=min(spec.connect_timeout_s, total), first_byte_s=min(first_byte, total),
                    total_s=total)


#: how many answer times an endpoint remembers (more than any request has requests ahead of it)
ANSWER_MEMORY = 4096
#: what remains of a slow answer's weight after each later answer
LOAD_DECAY = 0.9
#: the most the default limits are widened after timeouts without an answer in between
MAX_BACKOFF = 8.0


class EndpointProgress:
    """What this process has seen of one endpoint, to size its default limits the way TCP sizes its
    retransmission timeout: from the answers measured, and doubled after a timeout until an answer comes.

    `last`: when the endpoint last answered a request (monotonic seconds). `load`: the largest share of
    its own default first-byte limit a recent successful answer needed (decaying; None before the first).
    `backoff`: doubled by a timeout of a request sent after the last doubling (one doubling per wave of
    requests, as TCP backs off once per window), reset by a successful answer."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.last = float("-inf")
        self.answers = 0  # answers so far; `_times` holds the times of the latest ones
        self._times: deque[float] = deque(maxlen=ANSWER_MEMORY)
        self.in_flight = 0
        self.load: float | None = None
        self.backoff = 1.0
        self._backed_off_at = float("-inf")
        self.clock = clock

    def answered(self) -> None:
        self.last = self.clock()
        self.answers += 1
        self._times.append(self.last)

    def answer_time(self, number: int) -> float:
        """When answer `number` (1-based) came; the oldest remembered one if it is forgotten."""
        index = number - 1 - (self.answers - len(self._times))
        return self._times[max(0, index)] if self._times else self.last

    def observe(self, service_s: float, needed_s: float) -> None:
        """A successful answer took `service_s` (from its anchor) where the default limit for its length
        is `needed_s`."""
        share = service_s / max(needed_s, 1e-9)
        self.load = share if self.load is None else max(share, self.load * LOAD_DECAY)
        self.backoff = 1.0

    def timed_out(self, sent_at: float) -> None:
        if sent_at > self._backed_off_at:
            self.backoff = min(MAX_BACKOFF, 2.0 * self.backoff)
            self._backed_off_at = self.clock()

    def stretch(self) -> float:
        """The factor on the default limits: twice the load seen (at least 1), times the backoff. A server
        answering at a third of `min_tokens_per_s` gets limits six times as long; one whose first answers
        take longer than the default limit gets it doubled until they fit; a hung server is left after
        1 + 2 + 4 default limits (three attempts)."""
        return max(1.0, 2.0 * (self.load or 0.0)) * self.backoff


_PROGRESS: dict[str, EndpointProgress] = {}


def progress_of(url: str) -> EndpointProgress:
    """The one record per endpoint URL in this process: two model names served by one server queue together."""
    found = _PROGRESS.get(url)
    if found is None:
        found = _PROGRESS[url] = EndpointProgress()
    return found


class Exchange:
    """One request's clock at one endpoint; the code that talks to the server calls `heard` when the
    reply's status line arrives (for a non-streamed completion: generation is done) and `done` at the end.

    The requests this client had in flight at the endpoint when this one was sent are ahead of it in the
    server's queue; the clock restarts with each of their answers, and not after: once as many answers as
    there were requests ahead have come, this request is the one being served (a stuck request at a
    server with many slots is not kept alive by the others' answers)."""

    def __init__(self, progress: EndpointProgress) -> None:
        self.progress = progress
        self.started = progress.clock()
        self.ahead = progress.in_flight
        self._answers0 = progress.answers
        progress.in_flight += 1
        self._open = True
        self.heard_at: float | None = None
        self._anchor_when_heard = self.started

    def heard(self) -> None:
        self._anchor_when_heard = self.anchor()
        self.heard_at = self.progress.clock()

    def done(self) -> None:
        if self._open:
            self._open = False
            self.progress.in_flight -= 1

    def service_s(self) -> float:
        """Seconds from the anchor to the reply's start (to now, before it)."""
        return (self.heard_at if self.heard_at is not None else self.progress.clock()) - self.anchor()

    def anchor(self) -> float:
        """When this request's limits count from: its sending, or the latest answer to a request that was
        ahead of it, while it had no reply yet."""
        if self.heard_at is not None:
            return self._anchor_when_heard
        counted = min(self.ahead, self.progress.answers - self._answers0)
        if counted <= 0:
            return self.started
        return max(self.started, self.progress.answer_time(self._answers0 + counted))


async def within(work: Awaitable[T], limits_now: Callable[[], Timeouts], exchange: Exchange) -> T:
    """`await work`, or `LimitReached` naming the limit ("first_byte" or "total") that fired first, both
    counted from `exchange.anchor()`; the first-byte limit ends when the reply starts. `limits_now()` is
    asked again at each deadline: the endpoint's limits may have widened meanwhile.

    `work` runs in the calling task under a timer that cancels it at the deadline, as `asyncio.timeout`
    does, rather than in a task of its own watched by `asyncio.wait`: that cost a task, a waiter and its
    callbacks on every request (~3 % of a run's CPU)."""
    task = asyncio.current_task()
    assert task is not None, "within() runs in a task"
    loop = asyncio.get_running_loop()
    fired: tuple[str, Timeouts] | None = None
    timer: asyncio.TimerHandle | None = None

    def check(running: bool = True) -> None:
        """At a deadline (and once before the work starts, `running` False): cancel the work if it has
        passed, else wake at the next one (the deadline only ever moves later)."""
        nonlocal fired, timer
        limits = limits_now()
        anchor = exchange.anchor()
        deadline, which = anchor + limits.total_s, "total"
        if exchange.heard_at is None and anchor + limits.first_byte_s < deadline:
            deadline, which = anchor + limits.first_byte_s, "first_byte"
        remaining = deadline - exchange.progress.clock()
        if remaining > 0:
            timer = loop.call_later(remaining, check)
        elif fired is None:
            fired = (which, limits)
            if running:
                task.cancel()

    try:
        check(running=False)
        if fired is not None:  # no time at all: the work never starts
            if asyncio.iscoroutine(work):
                work.close()
            raise LimitReached(*fired)
        try:
            result = await work
        except BaseException as exc:
            # Our cancel, and no other pending (a Ctrl-C's cancel stays a cancel): the limit's error,
            # also when the work turned the cancel into an error of its own.
            if fired is not None and task.uncancel() == 0 and not isinstance(exc, KeyboardInterrupt | SystemExit):
                raise LimitReached(*fired) from None
            raise
        if fired is not None:  # the deadline came as the work ended: the answer stands
            task.uncancel()
        return result
    finally:
        if timer is not None:
            timer.cancel()
        exchange.done()


class LimitReached(TimeoutError):
    """`within`'s timeout; `which` is "first_byte" or "total", `limits` the limits in force."""

    def __init__(self, which: str, limits: Timeouts) -> None:
        super().__init__(which)
        self.which = which
        self.limits = limits
