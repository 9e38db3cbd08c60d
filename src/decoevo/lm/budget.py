"""A run's budget in calls, tokens and dollars, checked before every paid call. Answers inherited from
other runs' caches count (the budget is what the run would cost alone), and so do calls in flight."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Literal

from .ledger import UsageLedger
from .types import BackendRequest


class BudgetExceeded(Exception):
    """Raised before a paid call that would exceed the run's budget; runs stop cleanly on it."""


@dataclass(frozen=True)
class InFlight:
    """Paid calls admitted but not yet answered, and what they are expected to add: without them,
    up to max_concurrency - 1 calls could pass a budget check that the first answer then exhausts."""

    calls: int = 0
    tokens: float = 0.0
    cost_usd: float = 0.0


@dataclass(frozen=True)
class Budget:
    max_calls: int | None = None
    max_tokens: int | None = None
    max_cost: float | None = None  # USD, effective (paid + inherited), for priced models
    # max_tokens is a level to land on (a control matched to its paired run's tokens), not a cap: a call is
    # refused once the run ends nearer it without that call than with it (half the call's tokens left),
    # so the run lands within half a call of it, either side, rather than up to a whole call over.
    land_on_tokens: bool = False

    @property
    def limited(self) -> bool:
        return self.max_calls is not None or self.max_tokens is not None or self.max_cost is not None

    def check(self, ledger: UsageLedger, in_flight: InFlight | None = None, next_tokens: float = 0.0) -> None:
        """Raise BudgetExceeded if one more paid call, on top of those in flight, would exceed a limit
        (`next_tokens`: that call's expected tokens, read with `land_on_tokens`)."""
        if not self.limited:
            return  # no limit: skip summing the ledger before every paid call
        pending = in_flight or InFlight()
        # Answers inherited from other runs' caches count: the budget is what this run would cost alone.
        total = ledger.total()
        calls = total.effective_calls + pending.calls
        if self.max_calls is not None and calls >= self.max_calls:
            raise BudgetExceeded(f"call budget reached: {total.effective_calls} of {self.max_calls} calls used"
                                 + (f", {pending.calls} in flight" if pending.calls else ""))
        if self.max_tokens is not None and refuses_on_tokens(total.effective_tokens + pending.tokens,
                                                             self.max_tokens, next_tokens, land=self.land_on_tokens):
            raise BudgetExceeded(f"token budget reached: {total.effective_tokens} of {self.max_tokens} tokens used"
                                 + (f", about {pending.tokens:.0f} in flight" if pending.calls else "")
                                 + (f", the next call's ~{next_tokens:.0f} would land further from it"
                                    if self.land_on_tokens and next_tokens else ""))
        cost = total.effective_cost_usd + pending.cost_usd
        if self.max_cost is not None and cost >= self.max_cost:
            raise BudgetExceeded(f"cost budget reached: {usd(total.effective_cost_usd)} of {usd(self.max_cost)} used"
                                 + cache_note(total.inherited_cost_usd)
                                 + (f", about {usd(pending.cost_usd)} in flight" if pending.calls else ""))


def usd(amount: float) -> str:
    """Dollars as a budget message shows them: 4 decimals, or 2 significant digits below $0.0001 (a cap of
    `--max-cost 1e-300` read "$0.0000", as if no cap had been given)."""
    return f"${amount:.4f}" if amount == 0 or abs(amount) >= 1e-4 else f"${amount:.2g}"


def cache_note(inherited: float) -> str:
    """Which part of what a run used against its cost cap its cache answered: not paid now, but counted at
    its price (the cap is what the run would cost alone), so "$14 used" on a cache hit is not read as a
    paid call."""
    return f" ({usd(inherited)} of it answered by the cache, counted at its price)" if inherited > 0 else ""


def refuses_on_tokens(used: float, target: float, next_tokens: float, *, land: bool) -> bool:
    """Whether a token budget refuses the next paid call at `used` tokens. A cap refuses once `used` reaches
    it. A target to land on (`land`) refuses the call once the run would end farther from the target with
    it (at used + next_tokens) than without it (at used): past the midpoint, used + next_tokens / 2 ≥ target.
    At the midpoint both ends are as far; the call is refused, so a control never pays to be as far over."""
    return used + (next_tokens / 2 if land else 0.0) >= target


def in_flight(paying: int, ledger: UsageLedger) -> InFlight:
    """The calls paying now, each expected to cost what a call has cost on average so far."""
    if not paying:
        return InFlight()
    total = ledger.total()
    if not total.effective_calls:
        return InFlight(paying)
    share = paying / total.effective_calls
    return InFlight(paying, total.effective_tokens * share, total.effective_cost_usd * share)


def expected_tokens(ledger: UsageLedger, role: str, model: str, request: BackendRequest) -> float:
    """A paid call's expected tokens, to land on a token target: its prompt at about 4 characters a token,
    and the completion its role's paid calls have averaged in this run (before the first, what any call
    has averaged; before any, its allowance), never more than its allowance (often several times the use)."""
    allowance = request.params.max_tokens
    row = ledger.rows.get((role, model))
    seen = row if row is not None and row.calls else ledger.total()
    completion = min(seen.completion_tokens / seen.calls, allowance) if seen.calls else allowance
    return sum(len(m.content) for m in request.messages) / 4 + completion


POLL_S = 0.02  # how often a request waiting for room under the cost cap looks again
Admission = Literal["reserve", "wait", "refuse"]


def admit(spent: float, held: float, freeable: float, estimate: float, cap: float) -> Admission:
    """Whether a request reserving `estimate` may be sent now, given the dollars `spent`, the reservations
    `held` in flight, and the part `freeable` of them that may still settle for less (not a lost one)."""
    if spent + held + estimate <= cap:
        return "reserve"
    if freeable > 0 and spent + (held - freeable) + estimate <= cap:
        return "wait"  # were they to settle at nothing, it would fit
    return "refuse"


@dataclass
class CostHold:
    """A run's `max_cost` as a hard cap, as `decoevo reproduce --max-cost` is for an experiment (lm/spend.py):
    each paid request holds its worst case (`spend.request_bound` at the model's price) while it is in
    flight, and is sent only when the run's dollars (paid + inherited) plus every hold plus its own fit under
    the cap; it waits while holds may still settle for less, and is refused when even their settling at
    nothing would not make room. So a run never pays past its cap, as long as a server bills no more than
    a request's bound (before: the check counted calls in flight at the run's average, and a first call
    was never refused: `--max-cost 1e-300` paid a $14 request)."""

    held: float = 0.0
    _sleep: float = field(default=POLL_S, repr=False)

    async def reserve(self, ledger: UsageLedger, cap: float, worst: float) -> float:
        while True:
            total = ledger.total()
            spent = total.effective_cost_usd
            verdict = admit(spent, self.held, self.held, worst, cap)
            if verdict == "reserve":  # no await since the look: no other request passes it meanwhile
                self.held += worst
                return worst
            if verdict == "refuse":
                raise BudgetExceeded(
                    f"cost budget reached: {usd(spent)} of {usd(cap)} used" + cache_note(total.inherited_cost_usd)
                    + (f", up to {usd(self.held)} in flight" if self.held else "")
                    + f"; the next request may cost up to {usd(worst)}")
            await asyncio.sleep(self._sleep)

    def release(self, usd: float) -> None:
        self.held = max(0.0, self.held - usd)
