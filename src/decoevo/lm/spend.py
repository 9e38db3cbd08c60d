"""An experiment's dollars, shared by every process of it, and the cap that stops them all.

`decoevo reproduce` runs cells as child processes and grades in the driver; each has its own LM and ledger,
so no single ledger sees the experiment's bill. When `DECOEVO_SPEND_FILE=PATH` is set (reproduce sets it,
and sweeps forward DECOEVO_* to their cells), every LM appends the dollar cost of each paid request to PATH,
one number a line, under an exclusive `flock`, and reads the sum of all lines. With `DECOEVO_MAX_COST=USD`
too, a paid request is refused (`SpendCapReached`, a budget stop) once that sum, plus what this process has
in flight, reaches the cap: every process stops within about one request per concurrent process of it.
Answers from the request cache cost nothing and are never refused, so a raised cap continues without paying
twice. A model without a price adds 0 (the plan says its dollars are unknown).
"""

from __future__ import annotations

import fcntl
import math
import os
from pathlib import Path

from .budget import BudgetExceeded
from .errors import ConfigError

FILE_ENV = "DECOEVO_SPEND_FILE"
CAP_ENV = "DECOEVO_MAX_COST"
# How a cap-stopped run's summary begins: the sweep resumes such a run once the cap allows it.
CAP_STOP = "experiment cost cap reached"


class SpendCapReached(BudgetExceeded):
    """The experiment's shared dollar sum reached its cap; raising the cap continues it."""


def read_spend(path: Path) -> float:
    """The dollars recorded in a spend file so far (0 when there is none)."""
    return SharedSpend(path, None).total()


class SharedSpend:
    def __init__(self, path: Path, cap: float | None) -> None:
        self.path = Path(path)
        self.cap = cap
        self._offset = 0  # bytes summed so far: each check reads only what others appended since
        self._sum = 0.0

    @classmethod
    def from_env(cls) -> SharedSpend | None:
        where = os.environ.get(FILE_ENV)
        if not where:
            return None
        cap = os.environ.get(CAP_ENV)
        try:
            limit = float(cap) if cap else None
        except ValueError:
            raise ConfigError(f"{CAP_ENV}={cap!r}: not a number of dollars") from None
        if limit is not None and not (math.isfinite(limit) and limit > 0):
            raise ConfigError(f"{CAP_ENV}={cap!r}: the cap must be a positive number of dollars")
        return cls(Path(where), limit)

    def total(self) -> float:
        if not self.path.is_file():
            return self._sum
        with open(self.path, "rb") as f:
            fcntl.flock(f, fcntl.LOCK_SH)  # writers hold LOCK_EX: no half-written line is read
            f.seek(self._offset)
            data = f.read()
        complete = data[: data.rfind(b"\n") + 1]
        for line in complete.split():
            try:
                self._sum += float(line)
            except ValueError:  # a foreign line: counted as nothing rather than stopping every request
                continue
        self._offset += len(complete)
        return self._sum

    def check(self, pending_usd: float = 0.0) -> None:
        """Raise SpendCapReached if the experiment's sum, plus this process's calls in flight, is at the cap."""
        if self.cap is None:
            return
        spent = self.total()
        if spent + pending_usd >= self.cap:
            raise SpendCapReached(f"{CAP_STOP}: ${spent:.4f} of ${self.cap:.4f} spent by the whole experiment"
                                  + (f", about ${pending_usd:.4f} in flight here" if pending_usd else ""))

    def add(self, cost_usd: float | None) -> None:
        if not cost_usd:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            os.write(fd, f"{cost_usd!r}\n".encode())
        finally:
            os.close(fd)  # closing releases the lock
