"""Usage ledger: per role and per model, calls, cache hits, tokens, latency and failures by category."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field, fields
from typing import Protocol

from .errors import FailureCategory


class EffectiveUsage:
    """What a run would have spent alone: its paid calls plus the answers it inherited from a cache
    another run paid for. Shared by the live ledger row and the frozen counts a cost table sums."""

    calls: int
    prompt_tokens: int
    completion_tokens: int
    inherited_calls: int
    inherited_tokens: int
    cost_usd: float
    inherited_cost_usd: float

    @property
    def tokens(self) -> int:
        """Paid input + output tokens."""
        return self.prompt_tokens + self.completion_tokens

    @property
    def effective_calls(self) -> int:
        return self.calls + self.inherited_calls

    @property
    def effective_tokens(self) -> int:
        return self.tokens + self.inherited_tokens

    @property
    def effective_cost_usd(self) -> float:
        return self.cost_usd + self.inherited_cost_usd


@dataclass(frozen=True)
class Usage(EffectiveUsage):
    """Frozen usage counts (a ledger row as read back from `ledger.json`), summable with `+`."""

    calls: int = 0  # paid backend calls
    cache_hits: int = 0  # all hits, inherited ones included
    prompt_tokens: int = 0  # of the paid calls
    completion_tokens: int = 0
    inherited_calls: int = 0  # hits on answers another run paid for (in and out tokens are not split)
    inherited_tokens: int = 0
    cost_usd: float = 0.0  # dollars of the paid calls (priced models only)
    inherited_cost_usd: float = 0.0
    unpriced_calls: int = 0  # calls to a model with no price: the dollars are a lower bound
    estimated_calls: int = 0  # of `calls`, sent without an answer: tokens and dollars are upper bounds

    def __add__(self, other: Usage) -> Usage:
        return Usage(*(getattr(self, f.name) + getattr(other, f.name) for f in fields(Usage)))


@dataclass
class UsageRow(EffectiveUsage):
    calls: int = 0  # backend calls that returned a completion (each one was paid for)
    cache_hits: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    retries: int = 0
    repairs: int = 0
    # Cache hits on answers another run paid for: free here, but a fresh run would have paid them, so
    # budgets and cost comparisons count them (`effective_*`).
    inherited_calls: int = 0
    inherited_tokens: int = 0
    truncated: int = 0  # paid replies cut by max_tokens
    reasoning_tokens: int = 0  # of completion_tokens, reasoning the server reported (not in any answer)
    reasoning_chars: int = 0  # reasoning text stripped from paid replies before any role saw them
    cost_usd: float = 0.0  # what the paid calls cost (priced models only)
    inherited_cost_usd: float = 0.0  # what the inherited answers cost whoever paid them
    unpriced_calls: int = 0  # paid or inherited calls to a model with no price: the cost is a lower bound
    # Of `calls`, requests sent that never brought an answer back (killed, cancelled, timed out): a provider
    # may bill them, so they count, with their tokens at an upper bound (lm/journal.py).
    estimated_calls: int = 0
    failures: dict[str, int] = field(default_factory=lambda: {c.value: 0 for c in FailureCategory})

    def add(self, other: UsageRow) -> None:
        self.calls += other.calls
        self.cache_hits += other.cache_hits
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.latency_s += other.latency_s
        self.retries += other.retries
        self.repairs += other.repairs
        self.inherited_calls += other.inherited_calls
        self.inherited_tokens += other.inherited_tokens
        self.truncated += other.truncated
        self.reasoning_tokens += other.reasoning_tokens
        self.reasoning_chars += other.reasoning_chars
        self.cost_usd += other.cost_usd
        self.inherited_cost_usd += other.inherited_cost_usd
        self.unpriced_calls += other.unpriced_calls
        self.estimated_calls += other.estimated_calls
        for k, v in other.failures.items():
            self.failures[k] = self.failures.get(k, 0) + v


class LoggedCall(Protocol):
    """What `UsageLedger.of_calls` reads of a call-log line (rundir's `CallLine`)."""

    @property
    def role(self) -> str: ...
    @property
    def model(self) -> str: ...
    @property
    def cached(self) -> bool: ...
    @property
    def prompt_tokens(self) -> int: ...
    @property
    def completion_tokens(self) -> int: ...
    @property
    def truncated(self) -> bool: ...
    @property
    def reasoning_tokens(self) -> int: ...
    @property
    def estimated(self) -> bool: ...


class UsageLedger:
    @classmethod
    def of_calls(cls, calls: Iterable[LoggedCall],
                 cost_of: Callable[[str, int, int], float | None]) -> UsageLedger:
        """The ledger of a call log: a paid line is a call (estimated ones too), a cached one a hit. The
        log, completed by the write-ahead record, is what several processes appending to one directory
        agree on; no one of them holds all of it in memory."""
        ledger = cls()
        for c in calls:
            if c.cached:
                ledger.record_hit(c.role, c.model)
            else:
                ledger.record_call(c.role, c.model, c.prompt_tokens, c.completion_tokens, 0.0, truncated=c.truncated,
                                   reasoning_tokens=c.reasoning_tokens,
                                   cost_usd=cost_of(c.model, c.prompt_tokens, c.completion_tokens),
                                   estimated=c.estimated)
        return ledger

    def __init__(self) -> None:
        self.rows: dict[tuple[str, str], UsageRow] = {}

    def row(self, role: str, model: str) -> UsageRow:
        row = self.rows.get((role, model))
        if row is None:  # not setdefault: that builds a throwaway UsageRow on every call
            row = self.rows[(role, model)] = UsageRow()
        return row

    def record_call(self, role: str, model: str, prompt_tokens: int, completion_tokens: int, latency_s: float,
                    *, truncated: bool = False, reasoning_tokens: int = 0, reasoning_chars: int = 0,
                    cost_usd: float | None = 0.0, estimated: bool = False) -> None:
        """One paid call; `cost_usd` None when the model has no price; `estimated`: sent but never
        answered, its tokens an upper bound."""
        r = self.row(role, model)
        r.estimated_calls += estimated
        if cost_usd is None:
            r.unpriced_calls += 1
        else:
            r.cost_usd += cost_usd
        r.calls += 1
        r.prompt_tokens += prompt_tokens
        r.completion_tokens += completion_tokens
        r.latency_s += latency_s
        r.truncated += truncated
        r.reasoning_tokens += reasoning_tokens
        r.reasoning_chars += reasoning_chars

    def record_hit(self, role: str, model: str, inherited_tokens: int | None = None,
                   inherited_cost_usd: float | None = None) -> None:
        """A cache hit; `inherited_tokens` is set when the answer was paid for outside this run."""
        r = self.row(role, model)
        r.cache_hits += 1
        if inherited_tokens is not None:
            r.inherited_calls += 1
            r.inherited_tokens += inherited_tokens
            if inherited_cost_usd is None:
                r.unpriced_calls += 1
            else:
                r.inherited_cost_usd += inherited_cost_usd

    def record_retry(self, role: str, model: str) -> None:
        self.row(role, model).retries += 1

    def record_repair(self, role: str, model: str) -> None:
        self.row(role, model).repairs += 1

    def record_failure(self, role: str, model: str, category: FailureCategory) -> None:
        r = self.row(role, model)
        r.failures[category.value] = r.failures.get(category.value, 0) + 1

    def total(self, rows: Iterable[UsageRow] | None = None) -> UsageRow:
        out = UsageRow()
        for r in self.rows.values() if rows is None else rows:
            out.add(r)
        return out

    def by_role(self) -> dict[str, UsageRow]:
        out: dict[str, UsageRow] = {}
        for (role, _), r in self.rows.items():
            out.setdefault(role, UsageRow()).add(r)
        return out

    def to_dict(self) -> dict[str, object]:
        rows = [
            {"role": role, "model": model, **asdict(r), "tokens": r.tokens,
             "effective_cost_usd": r.effective_cost_usd}
            for (role, model), r in sorted(self.rows.items())
        ]
        tot = self.total()
        return {"rows": rows, "total": {**asdict(tot), "tokens": tot.tokens,
                                        "effective_cost_usd": tot.effective_cost_usd}}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    @classmethod
    def from_dict(cls, data: dict[str, object]) -> UsageLedger:
        """A ledger from `to_dict`'s form; a ValueError naming the bad field (`rows.2.calls: ...`) when the
        data is not one. Fields this version does not know are ignored (a newer writer's ledger reads)."""
        ledger = cls()
        rows = data.get("rows", []) if isinstance(data, dict) else None
        if not isinstance(rows, list):
            raise ValueError("rows: expected a list of rows")
        known = {f.name: f.type for f in fields(UsageRow)}
        for i, row in enumerate(rows):
            if not isinstance(row, dict):
                raise ValueError(f"rows.{i}: expected an object")
            for name in ("role", "model"):
                if not isinstance(row.get(name), str):
                    raise ValueError(f"rows.{i}.{name}: expected a string, got {row.get(name)!r}")
            values: dict[str, object] = {}
            for name, value in row.items():
                if name == "failures":
                    if not isinstance(value, dict) or not all(_count(v) for v in value.values()):
                        raise ValueError(f"rows.{i}.failures: expected counts by category, got {value!r}")
                elif name in known and name not in ("role", "model") and not _number(value):
                    raise ValueError(f"rows.{i}.{name}: expected a non-negative number, got {value!r}")
                if name in known:
                    values[name] = value
            ledger.rows[(row["role"], row["model"])] = UsageRow(**values)  # type: ignore[arg-type]
        return ledger

    def merge(self, other: UsageLedger) -> None:
        for key, r in other.rows.items():
            self.rows.setdefault(key, UsageRow()).add(r)

    def table(self, title: str = "Model usage"):  # -> rich.table.Table
        from rich.table import Table

        t = Table(title=title)
        for col in ("role", "model", "calls", "hits", "inherited", "in tok", "out tok", "sec",
                    "retry", "repair", "cut", "think tok", "infra", "parse", "refusal", "empty",
                    "$ paid", "$ eff"):
            t.add_column(col, justify="left" if col in ("role", "model") else "right")
        items = sorted(self.rows.items())
        for (role, model), r in [*items, (("TOTAL", ""), self.total())]:
            t.add_row(role, model, str(r.calls), str(r.cache_hits), str(r.inherited_calls), str(r.prompt_tokens),
                      str(r.completion_tokens), f"{r.latency_s:.1f}", str(r.retries), str(r.repairs),
                      str(r.truncated), str(r.reasoning_tokens),
                      str(r.failures.get("infrastructure", 0)), str(r.failures.get("parse", 0)),
                      str(r.failures.get("refusal", 0)), str(r.failures.get("empty", 0)),
                      dollars(r.cost_usd, r.unpriced_calls), dollars(r.effective_cost_usd, r.unpriced_calls))
        return t


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value >= 0 and value < float("inf")


def _count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def dollars(amount: float, unpriced_calls: int = 0) -> str:
    """A cost for a table: '-' when nothing was priced, '>=' when some calls had no price."""
    if unpriced_calls and not amount:
        return "-"
    return f"{'>=' if unpriced_calls else ''}${amount:.{4 if amount < 1 else 2}f}"
