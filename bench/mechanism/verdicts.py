"""The one verdict rule of the mechanism benches and their pages (docs/mechanism.md, docs/when-to-co-evolve.md).

A verdict is read from the interval printed beside it, never from a separate test: **win** when the
interval lies above 0, **loss** when it lies below, **tie** otherwise (`decide`). Where a family of
comparisons is Holm-corrected, the interval printed is the one Holm's step-down test uses for that member
(`family`): a paired t interval at confidence 1 − α / (m − r + 1), r the member's rank by p-value, or the
rank of the first member Holm keeps when that comes earlier. A paired t interval excludes 0 exactly when
its two-sided test's p is below one minus its confidence, so that interval excludes 0 exactly when Holm
rejects: the printed interval and the verdict cannot disagree, and the correction is the same as before.

Shared by bench/mechanism/doc.py, advice.py and prior.py (it breaks the import circle doc ↔ advice).
"""

from __future__ import annotations

import sys
from collections.abc import Hashable, Mapping
from pathlib import Path
from typing import Any, Literal, TypeVar

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))

from decoevo.analysis.stats import PairedCI, holm, paired_difference

ALPHA = 0.05
Verdict = Literal["win", "loss", "tie", "not run"]
K = TypeVar("K", bound=Hashable)


def decide(low: float | None, high: float | None, margin: float = 0.0) -> Verdict:
    """The verdict from an interval for a difference (proposed − baseline): above `margin`, a win; below
    −`margin`, a loss; anything else (including an interval touching it), a tie. No interval: not run."""
    if low is None or high is None:
        return "not run"
    if low > margin:
        return "win"
    if high < -margin:
        return "loss"
    return "tie"


def of(test: PairedCI | None) -> Verdict:
    return "not run" if test is None else decide(test.ci_low, test.ci_high)


def by_seed(cells: list[dict[str, Any]], setting: str, method: str) -> dict[int, float]:
    return {c["seed"]: c["gold"] for c in cells if c["setting"] == setting and c["method"] == method}


def paired(cells: list[dict[str, Any]], setting: str, a: str, b: str, confidence: float = 1 - ALPHA
           ) -> PairedCI | None:
    """Gold of `a` − gold of `b` in one setting, paired by the seeds both ran; None below two seeds."""
    x, y = by_seed(cells, setting, a), by_seed(cells, setting, b)
    common = sorted(set(x) & set(y))
    if len(common) < 2:
        return None
    return paired_difference({s: x[s] for s in common}, {s: y[s] for s in common}, confidence)


def holm_confidence(pvalues: Mapping[K, float], alpha: float = ALPHA) -> dict[K, float]:
    """Per member, the confidence of the interval that excludes 0 exactly when Holm rejects it."""
    if not pvalues:
        return {}
    result = holm(pvalues, alpha)
    m = len(pvalues)
    kept = [r.rank for r in result.values() if not r.reject]
    first_kept = min(kept) if kept else m + 1
    return {k: 1 - alpha / (m - min(r.rank, first_kept) + 1) for k, r in result.items()}


def family(pairs: Mapping[K, tuple[Mapping[Any, float], Mapping[Any, float]] | None], alpha: float = ALPHA
           ) -> dict[K, tuple[PairedCI | None, float]]:
    """One Holm family of paired comparisons (a, b by seed): each member's interval at its Holm confidence,
    with its Holm-adjusted p (1.0 where the comparison could not be run)."""
    first = {k: None if p is None or len(p[0]) < 2 else paired_difference(p[0], p[1]) for k, p in pairs.items()}
    ps = {k: 1.0 if t is None or t.p_value is None else t.p_value for k, t in first.items()}
    if not ps:
        return {}
    adjusted = {k: r.adjusted for k, r in holm(ps, alpha).items()}
    level = holm_confidence(ps, alpha)
    out: dict[K, tuple[PairedCI | None, float]] = {}
    for k, p in pairs.items():
        test = None if first[k] is None or p is None else paired_difference(p[0], p[1], level[k])
        out[k] = (test, adjusted[k])
    return out


def cell_family(cells: list[dict[str, Any]], comparisons: Mapping[K, tuple[str, str, str]], alpha: float = ALPHA
                ) -> dict[K, tuple[PairedCI | None, float]]:
    """`family` over bench cells: name -> (setting, a, b), paired by the seeds both methods ran."""
    pairs: dict[K, tuple[dict[Any, float], dict[Any, float]] | None] = {}
    for k, (setting, a, b) in comparisons.items():
        x, y = by_seed(cells, setting, a), by_seed(cells, setting, b)
        common = sorted(set(x) & set(y))
        pairs[k] = ({s: x[s] for s in common}, {s: y[s] for s in common}) if len(common) >= 2 else None
    return family(pairs, alpha)


def ci_text(t: PairedCI | None) -> str:
    """"+3.1 [+0.4, +5.8]": the difference with the interval its verdict is read from."""
    if t is None:
        return "–"
    if t.ci_low is None or t.ci_high is None:
        return f"{t.mean_diff:+.1f}"
    return f"{t.mean_diff:+.1f} [{t.ci_low:+.1f}, {t.ci_high:+.1f}]"
