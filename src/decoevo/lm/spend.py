"""An experiment's dollars, shared by every process of it, and the hard cap that stops them all.

`decoevo reproduce` runs cells as child processes (or Ray tasks) and grades in the driver; each has its own
LM and ledger, so no single ledger sees the experiment's bill. When `DECOEVO_SPEND_FILE=PATH` is set
(reproduce sets it, and sweeps forward DECOEVO_* to their cells), every LM writes its paid requests to PATH,
an append-only log written under an exclusive `flock`:

    r ID USD PID HOST T a request about to be sent at T (Unix time) reserves USD, its worst case
                        (`request_bound`), for process PID on HOST
    s ID USD            ... and is settled at what it cost (its answer's usage; a bill we cannot see is
                        settled at its estimate, a request that cannot have been billed at 0)
    e TOKEN             the experiment (one invocation of it) began with this file (`begin`)
    x CAP               a request was refused at the cap CAP: the experiment stopped there (written once a
                        stop: the requests refused after it at the same cap add nothing)
    USD                 a cost without a reservation (the format before reservations; still read)

Every amount is a finite number of dollars, 0 or more, and every line one of these: a file that breaks
this (a negative or -inf amount would lift the cap, nan or inf block it), that shrinks, is replaced or is
deleted while the experiment runs, or that is a link or not a regular file, is refused as corrupt
(`SpendLogCorrupt`): every request stops as at the cap, and a command reading it says so in one line.
A process notices a deletion once it has opened or read the file; one started later knows the file by the
identity `begin` gave the experiment (`DECOEVO_SPEND_ID`: device, inode and the token of the `e` line it
wrote; a fresh file may reuse a deleted one's inode, never its token), so it stops too rather than begin a
new log at $0. A file emptied or deleted between runs is caught by whoever knows what was paid
(`decoevo reproduce` counts its runs' ledgers and call records, rundir/paid.py, and adds what is
missing, `add_spent`).

With `DECOEVO_MAX_COST=USD` too, a request is sent only if the spent dollars, plus every reservation in
flight in any process, plus its own reservation fit under the cap (`admit`). One that does not fit waits
while reservations in flight may still free room (a settled answer usually costs less than its worst
case), and is refused (`SpendCapReached`, a budget stop) when they cannot. So the experiment's spend never
passes the cap, as long as a server bills no more than a request's bound. A reservation whose process died
(on this host: its pid is gone) is settled at its estimate by whoever notices; one made on another host is
waited for until `HOST_WAIT_S` after it was made, then counted as spent for the decision. Cache hits reserve nothing.
A model without a price reserves and adds nothing (the plan says its dollars are unknown).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import itertools
import json
import math
import os
import secrets
import socket
import stat
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ..errors import CAP_STOP
from .budget import Admission, BudgetExceeded, admit
from .cache import pid_alive
from .errors import ConfigError
from .journal import prompt_token_bound
from .types import BackendRequest

FILE_ENV = "DECOEVO_SPEND_FILE"
CAP_ENV = "DECOEVO_MAX_COST"
# The log's identity when the experiment began ("DEVICE:INODE:HOST:TOKEN", `begin`): every process compares the file
# it opens with it, so one started after the log was deleted or replaced stops rather than begin a new one at $0.
ID_ENV = "DECOEVO_SPEND_ID"

REQUEST_OVERHEAD_TOKENS = 16  # the reply's priming tokens and any per-request framing a provider bills
SCHEMA_OVERHEAD_TOKENS = 64  # the instruction and message around a schema sent in the prompt
# Longer than a request with its retries and timeouts takes: a reservation from another host that is
# still in flight after this is taken as lost (its pid cannot be checked from here).
HOST_WAIT_S = 900.0
POLL_S = 0.02  # how often a request waiting for room looks again



class SpendCapReached(BudgetExceeded):
    """The experiment's shared dollar sum reached its cap; raising the cap continues it."""


class SpendLogCorrupt(ConfigError, BudgetExceeded):
    """The spend file cannot be trusted (a negative, infinite or NaN amount, a line we cannot read, shrunk
    or replaced while the experiment ran, a link or not a file): every request stops, as at the cap (a
    budget stop), and a command reading it says so in one line, rather than a cap lifted or blocked silently."""


def request_bound(request: BackendRequest) -> tuple[int, int]:
    """(prompt, completion) tokens a provider can bill for `request` at most: a token is at least one UTF-8
    byte, plus chat-template tokens per message and per request, plus the schema (sent in the prompt by
    servers that take none), and the whole `max_tokens` allowance."""
    prompt = prompt_token_bound(request) + REQUEST_OVERHEAD_TOKENS
    if request.json_schema is not None:
        prompt += len(json.dumps(request.json_schema, ensure_ascii=False).encode("utf-8")) + SCHEMA_OVERHEAD_TOKENS
    return prompt, request.params.max_tokens


def _usd(raw: bytes) -> float:
    usd = float(raw)
    if not (math.isfinite(usd) and usd >= 0):
        raise ValueError(f"{usd}: not a finite amount of 0 or more")
    return usd


@dataclass(frozen=True)
class Held:
    """A reservation in flight, as the spend file says."""

    usd: float
    pid: int
    host: str
    at: float  # Unix time it was made


@dataclass(frozen=True)
class SpendState:
    spent: float  # settled dollars
    held: float  # reservations in flight (or never settled) at their estimates
    stopped_at: float | None  # the highest cap at which a request was refused

    @property
    def total(self) -> float:
        """What may have been billed: a reservation never settled counts at its estimate."""
        return self.spent + self.held


def read_state(path: Path) -> SpendState:
    return SharedSpend(path, None).state()


def read_spend(path: Path) -> float:
    """The dollars recorded in a spend file so far, a request never settled at its estimate (0: no file)."""
    return read_state(path).total


def at_cap(path: Path, cap: float) -> bool:
    """The experiment stopped at `cap` (or a higher one) or spent it: a rerun at it would pay nothing."""
    state = read_state(path)
    return state.total >= cap or (state.stopped_at is not None and state.stopped_at >= cap)


def add_spent(path: Path, usd: float) -> None:
    """Record `usd` paid without a reservation (what the ledgers say was paid and the file lacks)."""
    if not (math.isfinite(usd) and usd > 0):
        raise ValueError(f"{usd}: not a positive number of dollars")
    spend = SharedSpend(path, None)
    try:
        with spend._locked() as fd:
            os.write(fd, f"{usd!r}\n".encode())
    finally:
        spend.close()


def _parse_identity(identity: str, path: Path) -> tuple[int, int, str, str]:
    try:
        dev, ino, rest = identity.split(":", 2)
        host, token = rest.rsplit(":", 1)
        return int(dev), int(ino), host, token
    except ValueError:
        raise ConfigError(f"{ID_ENV}={identity!r}: not the identity of {path} (DEVICE:INODE:HOST:TOKEN)") from None


def begin(path: Path) -> str:
    """The experiment's log at `path`, created empty if absent (a regular file, not a link), and its identity
    for `ID_ENV`: every process of the experiment then refuses a log deleted or replaced since."""
    spend, token = SharedSpend(path, None), secrets.token_hex(8)
    try:
        with spend._locked() as fd:
            st = os.fstat(fd)
            os.write(fd, f"e {token}\n".encode())
    finally:
        spend.close()
    return f"{st.st_dev}:{st.st_ino}:{spend.host}:{token}"


def check(path: Path, identity: str) -> SpendState:
    """The log's state, if it is still the file the experiment began with (`begin`); SpendLogCorrupt, one
    line naming it, if it was deleted, replaced, shrunk or edited into something unreadable."""
    return SharedSpend(path, None, identity).state()


class SharedSpend:
    def __init__(self, path: Path, cap: float | None, identity: str | None = None) -> None:
        self.path = Path(path)
        self.cap = cap
        self.host, self.pid = socket.gethostname(), os.getpid()
        token = f"{self.pid:x}.{secrets.token_hex(3)}"  # two LMs of one process draw distinct ids
        self._ids = (f"{token}.{n:x}" for n in itertools.count())
        self._offset = 0  # bytes read so far: each look reads only what was appended since
        self._spent = 0.0
        self._held: dict[str, Held] = {}
        self._stopped: float | None = None
        self._fd: int | None = None  # kept open: opening it twice per request was half the CPU it adds
        self._fd_pid = 0
        self._lines = 0  # complete lines read so far (to name a bad one)
        self._broken: SpendLogCorrupt | None = None  # once corrupt, refused for good
        self._ino: tuple[int, int] | None = None  # the file first read: replaced or deleted later is refused
        self._expected = _parse_identity(identity, self.path) if identity else None
        if self._expected is not None and self._expected[2] == self.host:  # another host sees another device
            self._ino = self._expected[:2]
        self._tokens: set[str] = set()  # the `e` lines read: the expected one must be among them

    @classmethod
    def from_env(cls) -> SharedSpend | None:
        where = os.environ.get(FILE_ENV)
        if not where:
            return None
        cap, identity = os.environ.get(CAP_ENV), os.environ.get(ID_ENV)
        try:
            limit = float(cap) if cap else None
        except ValueError:
            raise ConfigError(f"{CAP_ENV}={cap!r}: not a number of dollars") from None
        if limit is not None and not (math.isfinite(limit) and limit > 0):
            raise ConfigError(f"{CAP_ENV}={cap!r}: the cap must be a positive number of dollars")
        return cls(Path(where), limit, identity or None)

    # ---- reading ----------------------------------------------------------------------------------
    def _corrupt(self, why: str) -> SpendLogCorrupt:
        # kept: the bad line is behind the read offset now, and a later look must not pass it silently
        self._broken = SpendLogCorrupt(f"{self.path}: {why}; the experiment's cost cannot be counted from it, so "
                                       "nothing more is paid: restore the file (or start a new experiment directory)")
        return self._broken

    def _read(self, fd: int) -> None:
        size = os.fstat(fd).st_size
        if size < self._offset:  # read from here on, the appended lines would never be seen: a wait without end
            raise self._corrupt(f"shrank from {self._offset} to {size} bytes while the experiment ran")
        if size > self._offset:
            data = os.pread(fd, size - self._offset, self._offset)
            complete = data[: data.rfind(b"\n") + 1]  # writers hold LOCK_EX: only a torn tail can be partial
            self._offset += len(complete)
            for line in complete.splitlines():
                self._lines += 1
                if line.strip():
                    self._apply(line.split())
        if self._expected is not None and self._expected[3] not in self._tokens:
            # the whole file read and no line of the experiment's beginning: emptied, or a fresh file in its place
            raise self._corrupt("was emptied (or replaced by an empty file) while the experiment ran" if size == 0
                                else "was replaced while the experiment ran")

    def _apply(self, f: list[bytes]) -> None:
        try:
            if len(f) == 6 and f[0] == b"r":
                self._held[f[1].decode()] = Held(_usd(f[2]), int(f[3]), f[4].decode(), float(f[5]))
            elif len(f) == 3 and f[0] == b"s":
                usd = _usd(f[2])
                if self._held.pop(f[1].decode(), None) is not None:  # a second settlement counts nothing
                    self._spent += usd
            elif len(f) == 2 and f[0] == b"e":
                self._tokens.add(f[1].decode())
            elif len(f) == 2 and f[0] == b"x":
                self._stopped = max(self._stopped or 0.0, _usd(f[1]))
            elif len(f) == 1:
                self._spent += _usd(f[0])
            else:
                raise ValueError("not a line of a spend file")
        except (ValueError, UnicodeDecodeError):
            # a negative or -inf amount would lift the cap, nan or inf block it, a foreign line be skipped
            shown = b" ".join(f).decode("utf-8", "replace")[:80]
            raise self._corrupt(f"line {self._lines} ({shown!r}) is not a spend record (amounts are finite "
                                "dollars, 0 or more)") from None

    def _check_file(self) -> bool:
        """True when the spend file exists (a regular file, not a link); the log is refused otherwise."""
        if self._broken is not None:
            raise self._broken
        try:
            st = os.lstat(self.path)
        except FileNotFoundError:
            # it held records this process read, this process opened it, or the experiment began with it:
            # deleted while the experiment ran (a new log would count from $0)
            if self._offset or self._ino is not None or self._expected is not None:
                raise self._corrupt("was deleted while the experiment ran") from None
            return False
        if stat.S_ISLNK(st.st_mode):  # written through, the records would land wherever it points
            raise self._corrupt("is a symbolic link, not the experiment's own file")
        if not stat.S_ISREG(st.st_mode):
            raise self._corrupt("is not a regular file")
        if self._ino is not None and (st.st_dev, st.st_ino) != self._ino:
            raise self._corrupt("was replaced while the experiment ran")
        return True

    def state(self) -> SpendState:
        if not self._check_file():
            return SpendState(self._spent, sum(h.usd for h in self._held.values()), self._stopped)
        fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW)
        try:
            fcntl.flock(fd, fcntl.LOCK_SH)
            self._remember(fd)
            self._read(fd)
        finally:
            os.close(fd)
        return SpendState(self._spent, sum(h.usd for h in self._held.values()), self._stopped)

    def _remember(self, fd: int) -> None:
        st = os.fstat(fd)
        if self._ino is None:
            self._ino = (st.st_dev, st.st_ino)
        elif (st.st_dev, st.st_ino) != self._ino:
            raise self._corrupt("was replaced while the experiment ran")

    # ---- writing ----------------------------------------------------------------------------------
    @contextlib.contextmanager
    def _locked(self) -> Iterator[int]:
        self._check_file()
        if self._fd is None or self._fd_pid != os.getpid():  # a forked child must not share the parent's lock
            self.path.parent.mkdir(parents=True, exist_ok=True)
            flags = os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW
            try:
                self._fd, self._fd_pid = os.open(self.path, flags, 0o644), os.getpid()
            except OSError as exc:  # a link or a directory put there since the check
                raise self._corrupt(f"cannot be opened ({exc.strerror})") from None
            self._remember(self._fd)
        fcntl.flock(self._fd, fcntl.LOCK_EX)
        try:
            yield self._fd
        finally:
            fcntl.flock(self._fd, fcntl.LOCK_UN)

    def close(self) -> None:
        if self._fd is not None and self._fd_pid == os.getpid():
            os.close(self._fd)
        self._fd = None

    def __del__(self) -> None:  # an LM that was never closed must not leak its descriptor
        with contextlib.suppress(Exception):
            self.close()

    def _try_reserve(self, usd: float) -> tuple[Admission, str]:
        with self._locked() as fd:
            self._read(fd)
            while True:
                held = sum(h.usd for h in self._held.values())
                if self.cap is None:
                    verdict: Admission = "reserve"
                else:
                    verdict = admit(self._spent, held, self._freeable(), usd, self.cap)
                if verdict != "wait" or not self._settle_dead(fd):
                    break
                self._read(fd)  # the dead reservations' settlements, just written
            if verdict == "reserve":
                rid = next(self._ids)
                os.write(fd, f"r {rid} {usd!r} {self.pid} {self.host} {time.time():.3f}\n".encode())
                return verdict, rid
            if verdict == "refuse" and self.cap is not None and (self._stopped or 0.0) < self.cap:  # once a stop
                os.write(fd, f"x {self.cap!r}\n".encode())
                self._stopped = self.cap
            return verdict, f"${self._spent:.4f} spent and ${held:.4f} in flight"

    def _freeable(self) -> float:
        """Reservations that may still settle for less: on this host alive (or dead: settled when waiting),
        on another host made less than HOST_WAIT_S ago (by its clock: hosts' clocks differ by far less)."""
        cutoff = time.time() - HOST_WAIT_S
        return sum(h.usd for h in self._held.values() if h.host == self.host or h.at > cutoff)

    def _settle_dead(self, fd: int) -> bool:
        """Settle at their estimates the reservations of this host's processes that are gone."""
        dead = [rid for rid, h in self._held.items()
                if h.host == self.host and h.pid != self.pid and not pid_alive(h.pid)]
        for rid in dead:
            os.write(fd, f"s {rid} {self._held[rid].usd!r}\n".encode())
        return bool(dead)

    async def reserve(self, usd: float | None) -> str | None:
        """Reserve `usd` before a request is sent, waiting while other reservations may free room; raise
        SpendCapReached when they cannot. Returns the reservation to `settle` (None: nothing reserved)."""
        if not usd:
            return None
        while True:
            verdict, said = self._try_reserve(usd)
            if verdict == "reserve":
                return said
            if verdict == "refuse":
                raise SpendCapReached(f"{CAP_STOP}: a request of up to ${usd:.4f} does not fit under the "
                                      f"${self.cap:.4f} cap of the whole experiment ({said})")
            await asyncio.sleep(POLL_S)

    def settle(self, rid: str | None, usd: float | None) -> None:
        """The reserved request ended, costing `usd` (0 or None: nothing billed)."""
        if rid is None:
            return
        with self._locked() as fd:
            os.write(fd, f"s {rid} {float(usd or 0.0)!r}\n".encode())
