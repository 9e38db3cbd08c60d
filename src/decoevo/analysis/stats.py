"""Statistics the paper reports: mean ± sample std over seeds, paired t-based CIs, Holm correction,
relative gain over a baseline, the per-run benchmark average, and the question coverage a comparison rests on.

Everything is a pure function over plain numbers; results are frozen dataclasses so a table built from
them cannot be altered after the fact.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Hashable, Iterable, Mapping
from dataclasses import dataclass
from typing import TypeVar

# numpy and scipy are imported inside the functions that compute with them: importing scipy.stats costs
# about a second of CPU, and this module's dataclasses are loaded by every `decoevo run` (through the engine's
# criterion-drift record), which never calls them (tests/test_startup.py).

K = TypeVar("K", bound=Hashable)

COVERAGE_FLOOR = 0.95  # a score resting on fewer graded questions than this share is flagged


@dataclass(frozen=True)
class Coverage:
    """How many of the questions a score was meant to cover were graded (the rest were ungraded, not 0)."""

    graded: int
    total: int

    @property
    def fraction(self) -> float | None:
        return self.graded / self.total if self.total else None

    @property
    def low(self) -> bool:
        """Below COVERAGE_FLOOR (or nothing graded): the score may describe a different question mix."""
        return self.total > 0 and self.graded < COVERAGE_FLOOR * self.total

    def __add__(self, other: Coverage) -> Coverage:
        return Coverage(self.graded + other.graded, self.total + other.total)

    def format(self) -> str:
        return f"{self.graded}/{self.total}"


def graded_in_both(a: Mapping[K, float | None], b: Mapping[K, float | None]) -> frozenset[K]:
    """The questions both sides graded (score not None): the only ones a paired comparison may use, so a
    question one method's grader failed on never counts for the other method alone."""
    return frozenset(k for k, v in a.items() if v is not None and b.get(k) is not None)


@dataclass(frozen=True)
class MeanStd:
    n: int
    mean: float
    std: float | None  # sample std (ddof=1); None for a single value, where it is undefined rather than 0

    def format(self, digits: int = 1, std_digits: int | None = None) -> str:
        """'61.7±0.10' style, as in the paper's tables (std to one more digit by default)."""
        sd = digits + 1 if std_digits is None else std_digits
        return f"{self.mean:.{digits}f}" if self.std is None else f"{self.mean:.{digits}f}±{self.std:.{sd}f}"


@dataclass(frozen=True)
class PairedCI:
    """Paired comparison a − b over the seeds both share."""

    seeds: tuple[Hashable, ...]
    n: int
    mean_diff: float
    std_diff: float | None  # sample std of the per-seed differences
    confidence: float
    ci_low: float | None
    ci_high: float | None
    t_stat: float | None
    p_value: float | None  # two-sided paired t-test
    dof: int
    reason: str | None = None  # why the CI or p-value is missing or degenerate

    @property
    def significant(self) -> bool | None:
        """CI excludes 0 (None when there is no CI)."""
        if self.ci_low is None or self.ci_high is None:
            return None
        return self.ci_low > 0 or self.ci_high < 0


@dataclass(frozen=True)
class HolmResult:
    p_value: float
    adjusted: float  # Holm step-down adjusted p-value, monotone in the sorted order, capped at 1
    reject: bool
    rank: int  # 1 = smallest p-value
    alpha: float


def _finite(values: Iterable[float], what: str) -> list[float]:
    out = [float(v) for v in values]
    bad = [v for v in out if not math.isfinite(v)]
    if bad:
        raise ValueError(f"{what}: non-finite values {bad}")
    return out


def mean_std(values: Iterable[float]) -> MeanStd:
    xs = _finite(values, "mean_std")
    if not xs:
        raise ValueError("mean_std: no values")
    import numpy as np

    arr = np.asarray(xs, dtype=float)
    std = float(arr.std(ddof=1)) if len(xs) > 1 else None
    return MeanStd(n=len(xs), mean=float(arr.mean()), std=std)


def paired_difference(a: Mapping[K, float], b: Mapping[K, float], confidence: float = 0.95) -> PairedCI:
    """Mean of a[seed] − b[seed] with a t-based CI (n−1 dof) and the two-sided paired t-test p-value.

    The runs must be matched: a seed present on one side only is an error, not silently dropped, because
    dropping it would change which runs the comparison describes.
    """
    if not 0 < confidence < 1:
        raise ValueError(f"paired_difference: confidence must be in (0, 1), got {confidence}")
    only_a, only_b = set(a) - set(b), set(b) - set(a)
    if only_a or only_b:
        raise ValueError("paired_difference: seeds do not match; "
                         f"missing from b: {sorted(only_a, key=repr)}; missing from a: {sorted(only_b, key=repr)}")
    if not a:
        raise ValueError("paired_difference: no seeds")
    import numpy as np
    from scipy import stats as _sp

    seeds = tuple(sorted(a, key=repr))  # repr sort: seeds may be ints or strings
    diffs = np.asarray(_finite((float(a[s]) - float(b[s]) for s in seeds), "paired_difference"), dtype=float)
    n = len(diffs)
    mean = float(diffs.mean())
    if n < 2:
        return PairedCI(seeds, n, mean, None, confidence, None, None, None, None, 0,
                        reason="a single paired seed: the std, CI and t-test need at least 2")
    dof = n - 1
    sd = float(diffs.std(ddof=1))
    if sd == 0.0:
        # The t statistic is 0/0 (identical runs) or ±inf (a constant shift); use the limits so the result
        # still feeds a Holm table: no evidence of a difference, or a difference with no spread at all.
        p = 1.0 if mean == 0.0 else 0.0
        t = 0.0 if mean == 0.0 else math.copysign(math.inf, mean)
        why = "all differences are zero" if mean == 0.0 else "the differences have zero variance"
        return PairedCI(seeds, n, mean, 0.0, confidence, mean, mean, t, p, dof, reason=why)
    se = sd / math.sqrt(n)
    half = float(_sp.t.ppf(0.5 + confidence / 2, dof)) * se
    t = mean / se
    p = float(min(1.0, 2 * _sp.t.sf(abs(t), dof)))
    return PairedCI(seeds, n, mean, sd, confidence, mean - half, mean + half, t, p, dof)


def holm(pvalues: Mapping[K, float], alpha: float = 0.05) -> dict[K, HolmResult]:
    """Holm–Bonferroni step-down over one family of comparisons.

    adjusted_(i) = max_{j<=i} min(1, (m − j + 1) p_(j)); a hypothesis is rejected while every smaller
    p-value was rejected and p_(i) <= alpha / (m − i + 1), which is the textbook rule and avoids the
    float rounding of comparing (m − i + 1) p_(i) against alpha.
    """
    if not 0 < alpha < 1:
        raise ValueError(f"holm: alpha must be in (0, 1), got {alpha}")
    for name, p in pvalues.items():
        if not 0.0 <= float(p) <= 1.0:  # also false for NaN
            raise ValueError(f"holm: p-value of {name!r} must be in [0, 1], got {p!r}")
    order = sorted(pvalues, key=lambda k: (pvalues[k], repr(k)))  # ties broken stably by name
    m = len(order)
    out: dict[K, HolmResult] = {}
    running, still_rejecting = 0.0, True
    for i, name in enumerate(order):
        p = float(pvalues[name])
        running = max(running, min(1.0, (m - i) * p))
        still_rejecting = still_rejecting and p <= alpha / (m - i)
        out[name] = HolmResult(p_value=p, adjusted=running, reject=still_rejecting, rank=i + 1, alpha=alpha)
    return {name: out[name] for name in pvalues}  # the caller's order


PRIMARY_FAMILY = "primary"  # the paper's prespecified family: DecoEvo vs SkillOpt, one comparison per backbone
EXPLORATORY_FAMILY = "exploratory"  # every other comparison, corrected as its own family


def comparison_family(proposed: str, other: str, *, paper_proposed: str, paper_baseline: str) -> str:
    """The Holm family a comparison belongs to. The paper (§4.2, "Paired analysis") prespecifies only
    DecoEvo vs SkillOpt per backbone; adding the ablations and controls to that family would make its
    correction stricter than the paper's, so they form a second, exploratory family."""
    return PRIMARY_FAMILY if (proposed, other) == (paper_proposed, paper_baseline) else EXPLORATORY_FAMILY


def holm_by_family(pvalues: Mapping[K, float], family: Mapping[K, str], alpha: float = 0.05
                   ) -> dict[K, HolmResult]:
    """Holm's correction applied within each family separately (`family` names each key's family)."""
    missing = set(pvalues) - set(family)
    if missing:
        raise ValueError(f"holm_by_family: no family for {sorted(missing, key=repr)}")
    out: dict[K, HolmResult] = {}
    for name in sorted(set(family[k] for k in pvalues)):
        out.update(holm({k: p for k, p in pvalues.items() if family[k] == name}, alpha))
    return {k: out[k] for k in pvalues}


def relative_gain(method: float, baseline: float) -> float:
    """100 · (method − baseline) / baseline, e.g. 64.8 vs 61.7 → 5.0 (%)."""
    method, baseline = _finite((method, baseline), "relative_gain")
    if baseline <= 0:
        raise ValueError(f"relative_gain: the baseline must be positive (scores are on 0-100), got {baseline}")
    return 100.0 * (method - baseline) / baseline


def per_run_average(scores_by_benchmark: Mapping[str, float], benchmarks: Collection[str] | None = None) -> float:
    """Unweighted mean over benchmarks within one run (the paper's "Avg." column, before aggregating
    over seeds). Pass `benchmarks` to insist every run covers the same set: a run missing a benchmark
    would otherwise average over a different mix and not be comparable."""
    if not scores_by_benchmark:
        raise ValueError("per_run_average: no benchmark scores")
    if benchmarks is not None:
        missing, extra = set(benchmarks) - set(scores_by_benchmark), set(scores_by_benchmark) - set(benchmarks)
        if missing or extra:
            raise ValueError(f"per_run_average: benchmarks differ; missing {sorted(missing)}, "
                             f"unexpected {sorted(extra)}")
    import numpy as np

    return float(np.mean(_finite(scores_by_benchmark.values(), "per_run_average")))
