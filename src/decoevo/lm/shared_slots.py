"""One concurrency budget per endpoint, shared by every process that points at the same slot directory.

A sweep runs its cells as separate processes; each cell's `AdaptiveLimiter` bounds only its own requests,
so k cells put k × max_concurrency requests at one server. When `DECOEVO_SHARED_SLOTS=DIR` is set (the
sweep sets it for its cells), every request to a server endpoint also holds one of the endpoint's
`max_concurrency` slots: a lock file `DIR/<endpoint hash>/slot-<i>` held with `flock`. The kernel
releases a lock when its holder dies, so a killed cell never leaks a slot, and nothing needs a broker.

A slot is held only around the HTTP request itself (never while waiting for anything else), so slots
cannot deadlock. A free slot is taken at once (one non-blocking `flock`); when all are taken, one poller
per process and endpoint retries on behalf of its waiters, in their order. A released slot is unlocked
rather than handed to a local waiter, so no cell keeps the budget to itself. The poller's period follows
how long requests hold a slot (1/40 of it, between 2 and 25 ms): a freed slot idles at most ~2.5% of a
request's time, and a scan of 64 taken slots (~60 µs) stays a small share of a core per waiting process.

On a cluster the same files on the shared filesystem serve every node (NFSv4 and cluster filesystems
lock across nodes). A named Ray actor as the semaphore was measured at ~1 ms of client CPU per request,
ten times the budget for what a request may add; a free slot here costs two system calls.
"""

from __future__ import annotations

import asyncio
import fcntl
import hashlib
import os
import time
from collections import deque
from pathlib import Path

ENV = "DECOEVO_SHARED_SLOTS"
POLL_MIN_S, POLL_MAX_S = 0.002, 0.025  # the poller's period: bounds
POLL_SHARE = 1 / 40  # the period as a share of the mean time a request holds a slot


class FileSlots:
    """`slots` lock files for one endpoint; `acquire()` returns a slot number that `release` takes back.

    Processes that disagree on `slots` share the files they have in common: the endpoint never has more
    requests in flight than the largest count any of them uses."""

    def __init__(self, directory: Path, endpoint: str, slots: int) -> None:
        where = Path(directory) / hashlib.sha256(endpoint.encode()).hexdigest()[:16]
        where.mkdir(parents=True, exist_ok=True)
        self.path = where
        self.slots = max(1, slots)
        self.hold_s = 0.0  # moving mean of how long a request holds a slot
        self._since = [0.0] * self.slots
        self._fds = [os.open(where / f"slot-{i}", os.O_RDWR | os.O_CREAT, 0o644) for i in range(self.slots)]
        self._held = [False] * self.slots  # flock is per open file: this process must not take its own slot twice
        self._next = os.getpid() % self.slots  # processes start their scans at different slots
        self._waiters: deque[asyncio.Future[int]] = deque()
        self._poller: asyncio.Task[None] | None = None
        self.waited = 0  # requests that found every slot taken (for reports and tests)

    def _try_take(self) -> int | None:
        n = self.slots
        for k in range(n):
            i = (self._next + k) % n
            if self._held[i]:
                continue
            try:
                fcntl.flock(self._fds[i], fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue
            self._held[i] = True
            self._since[i] = time.monotonic()
            self._next = (i + 1) % n
            return i
        return None

    async def acquire(self) -> int:
        if not self._waiters:  # earlier waiters go first
            slot = self._try_take()
            if slot is not None:
                return slot
        self.waited += 1
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[int] = loop.create_future()
        self._waiters.append(waiter)
        # one poller per loop: an LM reused under a new event loop must not wait on a dead loop's poller
        if self._poller is None or self._poller.done() or self._poller.get_loop() is not loop:
            self._poller = loop.create_task(self._poll())
        try:
            return await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():  # granted a slot it will not use
                self.release(waiter.result())
            elif waiter in self._waiters:
                self._waiters.remove(waiter)
            raise

    @property
    def poll_s(self) -> float:
        return min(POLL_MAX_S, max(POLL_MIN_S, self.hold_s * POLL_SHARE))

    def release(self, slot: int) -> None:
        if not self._fds:  # closed, which released every lock: a request cancelled at shutdown ends here
            return
        self.hold_s += 0.1 * (time.monotonic() - self._since[slot] - self.hold_s)
        self._held[slot] = False
        fcntl.flock(self._fds[slot], fcntl.LOCK_UN)

    async def _poll(self) -> None:
        while self._waiters:
            await asyncio.sleep(self.poll_s)
            while self._waiters:
                if self._waiters[0].done():  # cancelled while waiting
                    self._waiters.popleft()
                    continue
                slot = self._try_take()
                if slot is None:
                    break
                self._waiters.popleft().set_result(slot)

    def close(self) -> None:
        for fd in self._fds:
            os.close(fd)  # also releases any lock still held
        self._fds = []


class SharedSlots:
    """The slot pools of one slot directory, one per endpoint, made on first use."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        self._pools: dict[str, FileSlots] = {}

    @classmethod
    def from_env(cls) -> SharedSlots | None:
        where = os.environ.get(ENV)
        return cls(Path(where)) if where else None

    def pool(self, endpoint: str, slots: int) -> FileSlots:
        pool = self._pools.get(endpoint)
        if pool is None:
            pool = self._pools[endpoint] = FileSlots(self.directory, endpoint, slots)
        return pool

    def close(self) -> None:
        for pool in self._pools.values():
            pool.close()
        self._pools.clear()
