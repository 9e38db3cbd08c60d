"""A run's budget in calls, tokens and dollars, checked before every paid call. Answers inherited from
other runs' caches count (the budget is what the run would cost alone), and so do calls in flight."""

from __future__ import annotations

from dataclasses import dataclass

from .ledger import UsageLedger


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

    @property
    def limited(self) -> bool:
        return self.max_calls is not None or self.max_tokens is not None or self.max_cost is not None

    def check(self, ledger: UsageLedger, in_flight: InFlight | None = None) -> None:
        """Raise BudgetExceeded if one more paid call, on top of those in flight, would exceed a limit."""
        if not self.limited:
            return  # no limit: skip summing the ledger before every paid call
        pending = in_flight or InFlight()
        # Answers inherited from other runs' caches count: the budget is what this run would cost alone.
        total = ledger.total()
        calls = total.effective_calls + pending.calls
        if self.max_calls is not None and calls >= self.max_calls:
            raise BudgetExceeded(f"call budget reached: {total.effective_calls} of {self.max_calls} calls used"
                                 + (f", {pending.calls} in flight" if pending.calls else ""))
        tokens = total.effective_tokens + pending.tokens
        if self.max_tokens is not None and tokens >= self.max_tokens:
            raise BudgetExceeded(f"token budget reached: {total.effective_tokens} of {self.max_tokens} tokens used"
                                 + (f", about {pending.tokens:.0f} in flight" if pending.calls else ""))
        cost = total.effective_cost_usd + pending.cost_usd
        if self.max_cost is not None and cost >= self.max_cost:
            raise BudgetExceeded(f"cost budget reached: ${total.effective_cost_usd:.4f} of ${self.max_cost:.4f} used"
                                 + (f", about ${pending.cost_usd:.4f} in flight" if pending.calls else ""))
