"""The evidence the paper's claims are checked against (analysis/claims.py), read from the report's runs.

Scores are paired on the questions graded for both methods (report.paired), per seed, as the paired
comparisons are; alignment, token use and trajectories come from each run's alignment.json, ledger and
dynamics.json. A claim's column names a benchmark (`healthbench`) or a transfer (`transfer-llmeval_med`):
a test column answers to its sweep name and to its data format, so a sweep that calls HealthBench
`hb_small` is still checked against the HealthBench claims.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field

from ..analysis.claims import Setting
from ..errors import CAP_STOP
from .discover import SweepInfo
from .labels import benchmark_label, benchmark_order
from .paired import paired_scores
from .run_record import RunRecord
from .tables import Column, Evals, collect_scores, paired_averages, shared_columns

ALIGNMENT = frozenset({"f1", "precision", "recall"})
CAP_WORDS = "the experiment's cost cap"  # how a sweep cell stopped or blocked by the cap says so (sweep/runner.py)


def _cell_method(cell: str) -> str:
    """The method of a sweep cell id, `benchmark/method-s<seed>` (sweep.plan.cell_id)."""
    name = cell.rsplit("/", 1)[-1]
    return name.rsplit("-s", 1)[0] if "-s" in name else name


def _aliases(col: Column, runs: Sequence[RunRecord]) -> frozenset[str]:
    if col.transfer:
        return frozenset({col.key})
    formats = set()
    for r in runs:
        data = r.config.get("data")  # a damaged config may hold anything here
        if r.benchmark == col.benchmark and isinstance(data, Mapping) and isinstance(data.get("format"), str):
            formats.add(data["format"])
    return frozenset({col.key} | {f for f in formats if f and f != "jsonl"})


@dataclass
class _Backbone:
    runs: list[RunRecord]
    columns: list[Column] = field(default_factory=list)
    evals: Evals = field(default_factory=dict)
    aliases: dict[Column, frozenset[str]] = field(default_factory=dict)


class RunEvidence:
    """`analysis.claims.Evidence` over run records, grouped by backbone."""

    def __init__(self, runs: Sequence[RunRecord], sweeps: Sequence[SweepInfo] = ()) -> None:
        self._capped = frozenset({r.method for r in runs if r.status == "budget stop"
                                  and str(r.status_detail or "").startswith(CAP_STOP)}
                                 | {_cell_method(cell) for sw in sweeps for cell, error in sw.failed
                                    if CAP_STOP in error or CAP_WORDS in error})
        groups: dict[str, list[RunRecord]] = defaultdict(list)
        for r in runs:
            groups[r.backbone].append(r)
        self._by: dict[str, _Backbone] = {}
        for backbone, rs in sorted(groups.items()):
            _, _, columns, evals = collect_scores(rs, [])
            self._by[backbone] = _Backbone(rs, columns, evals, {c: _aliases(c, rs) for c in columns})

    def settings(self, measure: str, scope: str, columns: Sequence[str]) -> list[Setting]:
        out = []
        for backbone, b in self._by.items():
            if measure == "score":
                if scope == "average":
                    if b.columns:
                        out.append(Setting(backbone, "average", f"{backbone} · average"))
                    continue
                out += [
                    Setting(backbone, c.key, f"{backbone} · {c.label}")
                    for c in b.columns
                    if not columns or b.aliases[c] & set(columns)
                ]
            else:  # per source benchmark
                benches = sorted({r.benchmark for r in b.runs}, key=benchmark_order)
                out += [
                    Setting(backbone, x, f"{backbone} · {benchmark_label(x)}")
                    for x in benches
                    if not columns or x in columns
                ]
        return out

    def _column(self, setting: Setting) -> tuple[_Backbone, Column | None]:
        b = self._by[setting.backbone]
        return b, next((c for c in b.columns if c.key == setting.column), None)

    def pair(self, setting: Setting, measure: str, a: str, b: str) -> Mapping[Hashable, tuple[float, float]]:
        bb, col = self._column(setting)
        if measure == "score":
            if setting.column == "average":
                ours, theirs, _ = paired_averages(bb.evals, shared_columns(bb.evals, bb.columns, a, b), a, b)
                return {s: (ours[s], theirs[s]) for s in ours}
            if col is None:
                return {}
            out: dict[Hashable, tuple[float, float]] = {}
            for (m, seed), by_col in bb.evals.items():
                if m != a or col not in by_col or col not in bb.evals.get((b, seed), {}):
                    continue
                p = paired_scores(by_col[col], bb.evals[(b, seed)][col])
                if p is not None:
                    out[seed] = (p.ours, p.theirs)
            return out
        va, vb = self.one(setting, measure, a), self.one(setting, measure, b)
        return {s: (va[s], vb[s]) for s in va if s in vb}

    def methods(self) -> frozenset[str]:
        return frozenset(r.method for b in self._by.values() for r in b.runs)

    def capped(self) -> frozenset[str]:
        """Methods with a run the experiment's cost cap stopped (its summary), or a cell that failed or was not
        started because of it (the sweep's status.json): their claims are partial, not "not run"."""
        return self._capped

    def one(self, setting: Setting, measure: str, a: str) -> Mapping[Hashable, float]:
        bb = self._by[setting.backbone]
        runs = [r for r in bb.runs if r.method == a and r.benchmark == setting.column]
        out: dict[Hashable, float] = {}
        for r in runs:
            v = _run_value(r, measure)
            if v is not None:
                out[r.seed] = v
        return out


def _run_value(r: RunRecord, measure: str) -> float | None:
    if measure in ALIGNMENT:
        v = getattr(r.alignment, measure) if r.alignment is not None else None
        return None if v is None else 100 * float(v)
    if measure == "tokens":
        return float(r.usage.total.effective_tokens) if r.usage is not None and r.finished else None
    if measure in ("gold_drop", "proxy_hold", "final_gold") and r.dynamics is not None:
        points = [p for p in r.dynamics.points if p.gold is not None]
        if measure == "final_gold":
            return points[-1].gold if points else None
        if len(points) < 2:
            return None
        # The peak is the best checkpoint before the final one (the latest of equal bests), so the drop is
        # negative when gold still rose at the end: a drop taken over all checkpoints is ≥ 0 by construction,
        # and a first maximum on a flat trajectory made "the proxy holds after the peak" hold vacuously.
        earlier = points[:-1]
        best = max(p.gold or 0.0 for p in earlier)
        peak = [p for p in earlier if (p.gold or 0.0) == best][-1]
        last = points[-1]
        if measure == "gold_drop":
            return (peak.gold or 0.0) - (last.gold or 0.0)
        if peak.proxy is None or last.proxy is None:
            return None
        return last.proxy - peak.proxy
    return None
