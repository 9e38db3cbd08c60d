"""The paper's cost table (Table 4): calls and tokens per method and per role, relative to SkillOpt.

Costs come from each run directory's `ledger.json` (what `UsageLedger.to_dict()` writes), read back
strictly into `lm.ledger.Usage`, the same counts and effective totals the live ledger has; the method
and seed come from `summary.json` (written when a run ends) or else `config.yaml`.

A method's cost is its *effective* usage: the backend calls it paid for plus the cache hits on answers
another run paid for (`inherited_calls` / `inherited_tokens` in the ledger). Runs of a sweep share one
request cache, so whichever run asks a question first pays for it; counting only paid calls would make
a method look cheaper for being scheduled later. Hits on answers the run itself paid for (a resume, a
repeated rubric) are not a cost and are reported apart, as are the paid/inherited shares.

Pass runs of one benchmark and one base model: the table averages over whatever it is given.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from ..lm.ledger import Usage
from ..methods import METHODS
from ..rundir.files import RunReadError, read_json, read_yaml

__all__ = ["BASELINE", "CostRow", "CostTable", "MethodCost", "RunUsage", "RunUsageError", "Usage", "cost_table",
           "load_run_usage", "load_runs"]

BASELINE = "skillopt"
_COUNTS = ("calls", "cache_hits", "prompt_tokens", "completion_tokens", "inherited_calls", "inherited_tokens")
# Ledgers written before cache inheritance was tracked have no such fields: nothing was inherited.
# Nor, before prices existed, dollars: nothing was priced.
_OPTIONAL = frozenset({"inherited_calls", "inherited_tokens", "unpriced_calls", "estimated_calls"})

class RunUsageError(ValueError):
    """A run directory whose usage cannot be read; the message names the file."""


@dataclass(frozen=True)
class RunUsage:
    run_dir: Path
    method: str
    seed: int | None
    finished: bool  # summary.json exists; a killed run's ledger is only its last checkpoint
    by_role: Mapping[str, Usage]  # summed over models
    models: tuple[str, ...]

    @property
    def total(self) -> Usage:
        return sum(self.by_role.values(), Usage())


@dataclass(frozen=True)
class CostRow:
    """Means over a method's runs. `calls` and `tokens` are effective (paid + inherited); the other fields
    break them down. The ratios compare effective usage and divide by the baseline's *total* mean (also
    for a role row, so a method's role ratios add up to its total ratio); None without a baseline run or
    with a zero total."""

    calls: float
    tokens: float
    paid_calls: float
    paid_tokens: float
    prompt_tokens: float  # paid input tokens
    completion_tokens: float  # paid output tokens
    inherited_calls: float
    inherited_tokens: float
    cache_hits: float
    calls_ratio: float | None
    tokens_ratio: float | None
    cost_usd: float = 0.0  # effective dollars (paid + inherited), mean over runs
    priced: bool = False  # some call was priced; all were when `unpriced_calls` is 0
    unpriced_calls: float = 0.0


@dataclass(frozen=True)
class MethodCost:
    method: str
    n_runs: int
    seeds: tuple[int | None, ...]
    total: CostRow
    by_role: Mapping[str, CostRow]


@dataclass(frozen=True)
class CostTable:
    baseline: str
    methods: tuple[MethodCost, ...]

    def method(self, name: str) -> MethodCost:
        for m in self.methods:
            if m.method == name:
                return m
        raise KeyError(f"no runs of method {name!r} in the cost table")

    def to_dict(self) -> dict[str, Any]:
        return {"baseline": self.baseline, "methods": [
            {"method": m.method, "n_runs": m.n_runs, "seeds": list(m.seeds), "total": asdict(m.total),
             "by_role": {role: asdict(row) for role, row in m.by_role.items()}}
            for m in self.methods]}

    def to_markdown(self) -> str:
        b = self.baseline
        lines = ["Calls and tokens are effective: paid, plus answers inherited from another run's cache entries.", "",
                 f"| method | runs | calls | tokens (in+out) | paid in | paid out | inherited calls "
                 f"| inherited tokens | cache hits | calls ×{b} | tokens ×{b} |",
                 "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for m in self.methods:
            t = m.total
            lines.append(f"| {m.method} | {m.n_runs} | {_num(t.calls)} | {_num(t.tokens)} | {_num(t.prompt_tokens)} "
                         f"| {_num(t.completion_tokens)} | {_num(t.inherited_calls)} | {_num(t.inherited_tokens)} "
                         f"| {_num(t.cache_hits)} | {_ratio(t.calls_ratio)} | {_ratio(t.tokens_ratio)} |")
        lines += ["", f"Per role (ratios are shares of the {b} total, so a method's rows add up to its total):", "",
                  f"| method | role | calls | tokens (in+out) | inherited calls | cache hits | calls ×{b} "
                  f"| tokens ×{b} |",
                  "|---|---|---:|---:|---:|---:|---:|---:|"]
        for m in self.methods:
            for role, r in m.by_role.items():
                lines.append(f"| {m.method} | {role} | {_num(r.calls)} | {_num(r.tokens)} "
                             f"| {_num(r.inherited_calls)} | {_num(r.cache_hits)} | {_ratio(r.calls_ratio)} "
                             f"| {_ratio(r.tokens_ratio)} |")
        return "\n".join(lines) + "\n"


def _num(x: float) -> str:
    # the paper writes 4.8k calls and 22.1M tokens
    for scale, suffix in ((1e9, "B"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= scale:
            return f"{x / scale:.1f}{suffix}"
    return f"{x:.0f}" if float(x).is_integer() else f"{x:.1f}"


def _ratio(x: float | None) -> str:
    return "–" if x is None else f"{x:.2f}×"


# ---- reading one run ---------------------------------------------------------------------------------


def _read(path: Path, kind: str) -> Any:
    """A run file through the run directory's one parser, its message (naming the file) kept."""
    try:
        return read_json(path) if kind == "json" else read_yaml(path)
    except RunReadError as e:
        raise RunUsageError(str(e)) from None


def _count(path: Path, where: str, row: Mapping[str, Any], key: str) -> int:
    v = row.get(key, 0 if key in _OPTIONAL else None)
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise RunUsageError(f"{path}: {where}: {key!r} must be a non-negative integer, got {v!r}")
    return v


def _dollars(path: Path, where: str, row: Mapping[str, Any], key: str) -> float:
    v = row.get(key, 0.0)
    if isinstance(v, bool) or not isinstance(v, int | float) or not 0 <= v < float("inf"):
        raise RunUsageError(f"{path}: {where}: {key!r} must be a non-negative number of dollars, got {v!r}")
    return float(v)


def _read_ledger(path: Path) -> tuple[dict[str, Usage], tuple[str, ...]]:
    data = _read(path, "json")
    rows = data.get("rows") if isinstance(data, dict) else None
    if not isinstance(rows, list):
        raise RunUsageError(f"{path}: expected an object with a 'rows' list (UsageLedger.to_dict())")
    by_role: dict[str, Usage] = {}
    seen: set[tuple[str, str]] = set()
    for i, row in enumerate(rows):
        where = f"rows[{i}]"
        if not isinstance(row, dict):
            raise RunUsageError(f"{path}: {where} is not an object")
        role, model = row.get("role"), row.get("model")
        if not (isinstance(role, str) and role and isinstance(model, str)):
            raise RunUsageError(f"{path}: {where}: needs string 'role' and 'model', got {role!r}, {model!r}")
        if (role, model) in seen:
            raise RunUsageError(f"{path}: {where}: duplicate row for role {role!r}, model {model!r}")
        seen.add((role, model))
        u = Usage(**{k: _count(path, where, row, k) for k in _COUNTS},
                  cost_usd=_dollars(path, where, row, "cost_usd"),
                  inherited_cost_usd=_dollars(path, where, row, "inherited_cost_usd"),
                  unpriced_calls=_count(path, where, row, "unpriced_calls"),
                  estimated_calls=_count(path, where, row, "estimated_calls"))
        if "tokens" in row and row["tokens"] != u.tokens:  # a hand-edited or truncated ledger
            raise RunUsageError(f"{path}: {where}: 'tokens' {row['tokens']!r} != prompt + completion {u.tokens}")
        if u.inherited_calls > u.cache_hits:  # every inherited answer arrived as a cache hit
            raise RunUsageError(f"{path}: {where}: 'inherited_calls' {u.inherited_calls} exceeds "
                                f"'cache_hits' {u.cache_hits}")
        by_role[role] = by_role.get(role, Usage()) + u
    total = data.get("total")
    if isinstance(total, dict):
        summed = sum(by_role.values(), Usage())
        for k in ("calls", "prompt_tokens", "completion_tokens", "inherited_calls", "inherited_tokens"):
            if total.get(k, 0 if k in _OPTIONAL else None) != getattr(summed, k):
                raise RunUsageError(f"{path}: 'total.{k}' {total.get(k)!r} does not match the rows' sum "
                                    f"{getattr(summed, k)}")
    return dict(sorted(by_role.items())), tuple(sorted({m for _, m in seen}))


def _identity(source: Mapping[str, Any], file: Path) -> tuple[str, int | None]:
    method, seed = source.get("method"), source.get("seed")
    if not (isinstance(method, str) and method):
        raise RunUsageError(f"{file}: no 'method'")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise RunUsageError(f"{file}: 'seed' must be an integer, got {seed!r}")
    return method, seed


def load_run_usage(run_dir: Path | str) -> RunUsage:
    path = Path(run_dir)
    if not path.is_dir():
        raise RunUsageError(f"{path}: not a run directory")
    by_role, models = _read_ledger(path / "ledger.json")
    found: list[tuple[Path, tuple[str, int | None]]] = []
    for name, kind in (("summary.json", "json"), ("config.yaml", "yaml")):
        file = path / name
        if file.is_file():
            data = _read(file, kind)
            if not isinstance(data, dict):
                raise RunUsageError(f"{file}: expected a mapping")
            found.append((file, _identity(data, file)))
    if not found:
        raise RunUsageError(f"{path}: neither summary.json nor config.yaml says which method ran")
    if len(found) == 2 and found[0][1] != found[1][1]:
        raise RunUsageError(f"{path}: summary.json says method/seed {found[0][1]}, config.yaml says {found[1][1]}")
    method, seed = found[0][1]
    return RunUsage(path, method, seed, (path / "summary.json").is_file(), MappingProxyType(by_role), models)


def load_runs(run_dirs: Iterable[Path | str]) -> list[RunUsage]:
    return [load_run_usage(d) for d in run_dirs]


# ---- the table ---------------------------------------------------------------------------------------


def _mean_row(usages: list[Usage], base: CostRow | None) -> CostRow:
    n = len(usages)
    m = {k: sum(getattr(u, k) for u in usages) / n for k in _COUNTS}
    paid_tokens = m["prompt_tokens"] + m["completion_tokens"]
    calls, tokens = m["calls"] + m["inherited_calls"], paid_tokens + m["inherited_tokens"]
    calls_ratio = calls / base.calls if base is not None and base.calls > 0 else None
    tokens_ratio = tokens / base.tokens if base is not None and base.tokens > 0 else None
    return CostRow(calls=calls, tokens=tokens, paid_calls=m["calls"], paid_tokens=paid_tokens,
                   prompt_tokens=m["prompt_tokens"], completion_tokens=m["completion_tokens"],
                   inherited_calls=m["inherited_calls"], inherited_tokens=m["inherited_tokens"],
                   cache_hits=m["cache_hits"], calls_ratio=calls_ratio, tokens_ratio=tokens_ratio,
                   cost_usd=sum(u.effective_cost_usd for u in usages) / n,
                   priced=any(u.effective_cost_usd > 0 for u in usages),
                   unpriced_calls=sum(u.unpriced_calls for u in usages) / n)


def _method_order(name: str) -> tuple[int, str]:
    known = list(METHODS)
    return (known.index(name), "") if name in known else (len(known), name)


def cost_table(runs: list[RunUsage], baseline: str = BASELINE, allow_unfinished: bool = False) -> CostTable:
    """Mean effective calls and tokens per method over its runs, in total and per role (a role a run never
    used counts as 0 for that run), with ratios to the baseline method's total.

    Unfinished runs are refused unless allowed, since their ledger stops at the last checkpoint and
    would understate the method's cost; a (method, seed) given twice is refused, since it would count twice.
    """
    if not runs:
        raise ValueError("cost_table: no runs")
    if not allow_unfinished and (open_runs := [str(r.run_dir) for r in runs if not r.finished]):
        raise ValueError(f"cost_table: unfinished runs (no summary.json): {open_runs}; "
                         "pass allow_unfinished=True to include them")
    by_method: dict[str, list[RunUsage]] = {}
    seen: dict[tuple[str, int], Path] = {}
    for r in runs:
        if r.seed is not None:
            if (r.method, r.seed) in seen:
                raise ValueError(f"cost_table: {r.method} seed {r.seed} given twice: "
                                 f"{seen[(r.method, r.seed)]} and {r.run_dir}")
            seen[(r.method, r.seed)] = r.run_dir
        by_method.setdefault(r.method, []).append(r)

    base = _mean_row([r.total for r in by_method[baseline]], None) if baseline in by_method else None
    methods = []
    for name in sorted(by_method, key=_method_order):
        group = by_method[name]
        roles = sorted({role for r in group for role in r.by_role})
        by_role = {role: _mean_row([r.by_role.get(role, Usage()) for r in group], base) for role in roles}
        seeds = tuple(sorted((r.seed for r in group), key=lambda s: (s is None, s or 0)))
        methods.append(MethodCost(name, len(group), seeds, _mean_row([r.total for r in group], base),
                                  MappingProxyType(by_role)))
    return CostTable(baseline, tuple(methods))
