"""Compute parity: each method's effective tokens relative to its paired DecoEvo run (same benchmark and
seed), and whether the comparison is compute-matched.

The paper's controls are matched in compute (its Table 4 has SC-CoEvo and Direct Audit at about 1.0x
DecoEvo). A comparison whose method spent much less than DecoEvo confounds the method with its compute,
so the report says so: outside ±`PARITY_TOLERANCE` (per paired seed's mean ratio) it is flagged
"not compute-matched". `budget.top_up` with `budget.match_run` tops any method up to DecoEvo's caps;
`decoevo reproduce` and `decoevo sweep --parity` run the controls at DecoEvo's tokens that way
(`decoevo.sweep.spec.at_token_parity`).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from .costs import RunUsage

PARITY_TOLERANCE = 0.15
PROPOSED = "decoevo"


@dataclass(frozen=True)
class ParityRow:
    method: str
    seeds: tuple[int | None, ...]  # the seeds paired with a DecoEvo run
    ratios: tuple[float, ...]  # effective tokens / the paired DecoEvo run's, per seed
    calls_ratios: tuple[float, ...]
    unpaired: tuple[int | None, ...]  # the method's seeds without a DecoEvo run (or with a zero one)

    @property
    def mean_ratio(self) -> float | None:
        return statistics.fmean(self.ratios) if self.ratios else None

    @property
    def mean_calls_ratio(self) -> float | None:
        return statistics.fmean(self.calls_ratios) if self.calls_ratios else None

    @property
    def matched(self) -> bool | None:
        """Within ±PARITY_TOLERANCE of DecoEvo's tokens on average over the paired seeds (None: no pair)."""
        r = self.mean_ratio
        return None if r is None else abs(r - 1.0) <= PARITY_TOLERANCE


def parity_rows(runs: Sequence[RunUsage], proposed: str = PROPOSED) -> tuple[ParityRow, ...]:
    """One row per method other than `proposed`, over runs of one benchmark and backbone."""
    paired = {r.seed: r.total for r in runs if r.method == proposed}
    methods: dict[str, list[RunUsage]] = {}
    for r in runs:
        if r.method != proposed:
            methods.setdefault(r.method, []).append(r)
    out = []
    for method, group in methods.items():
        seeds, ratios, calls, unpaired = [], [], [], []
        for r in sorted(group, key=lambda x: (x.seed is None, x.seed or 0)):
            base = paired.get(r.seed)
            if base is None or base.effective_tokens <= 0 or base.effective_calls <= 0:
                unpaired.append(r.seed)
                continue
            seeds.append(r.seed)
            ratios.append(r.total.effective_tokens / base.effective_tokens)
            calls.append(r.total.effective_calls / base.effective_calls)
        out.append(ParityRow(method, tuple(seeds), tuple(ratios), tuple(calls), tuple(unpaired)))
    return tuple(out)
