"""The paper's claims (paper_claims.yaml) checked against a user's runs.

For each claim and each setting it covers (a backbone and a column, or a backbone's average), every test
is a paired comparison over matched seeds: the per-seed difference a − b (for token use the ratio a / b;
for the trajectory measures one method's own quantity), its mean and t-based 95% interval. A test
*holds* when the interval lies on the claimed side (and, with an expected magnitude, the mean is within
its tolerance), and *goes against* the claim when the interval lies on the other side. A claim is

- supported: every effect holds (quantifier `every`), more than half do (`most`), or at least the
  claim's `share` do (`share`: "14 of 15 settings");
- contradicted: some effect goes against it (`every`), at least half do (`most`), or too many do for the
  share to be reached even if every undecided effect held (`share`);
- not run: a method the claim names has no run at all, or no run has the claim's measure in the claim's
  columns (its table or figure was not requested: Table 5's alignment, Figure 3's checkpoints);
- not enough runs: otherwise: fewer than two paired seeds, or intervals that include the boundary (more
  seeds would decide). When a method the claim needs lacks runs or grades because its runs stopped at the
  experiment's cost cap (`Evidence.capped`), the claim is not enough runs and says so (the runs are
  partial and continue once the cap is raised), never "not run": its table was requested.

A claim with `decision: holm` (the paper's prespecified, Holm-corrected comparison) is decided on Holm's
step-down adjustment of its effects' paired t-test p-values, over all its effects (one per backbone for
the average gain): an effect holds when its mean is on the claimed side and its adjusted p ≤ 0.05, and goes
against the claim when its mean is on the other side with adjusted p ≤ 0.05. The unadjusted intervals of
three backbones at p = 0.024 each all exclude 0, but Holm's p is 0.072: not supported.

One tie rule for both ways of deciding: a difference identical on every paired seed (no spread, so a
degenerate interval and no t-test) counts by its sign, and an exact tie (Δ = 0 on every seed, interval
[0, 0]) goes against "a above b" (or "below"), since the runs then show no difference at all (in the
simulator, two methods that ship the same solver skill). Under Holm such an effect enters the family
with p = 0 (a nonzero constant difference) or p = 1 (a tie) and is decided by that sign.

Pure functions over an `Evidence` (what the runs hold); the report builds one from its run records.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, replace
from importlib import resources
from typing import Literal, Protocol

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from .stats import holm, paired_difference

Measure = Literal["score", "gain", "f1", "precision", "recall", "tokens", "gold_drop", "proxy_hold", "final_gold"]
ONE_METHOD: frozenset[str] = frozenset({"gold_drop", "proxy_hold", "final_gold"})
SUPPORTED, CONTRADICTED, NOT_ENOUGH, NOT_RUN = "supported", "contradicted", "not enough runs", "not run"
ALPHA = 0.05


class ClaimTest(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    a: str
    b: str | None = None  # None: a one-method measure
    direction: Literal["above", "below", "around", "at_least"]
    expected: float | None = None
    tolerance: float | None = Field(None, ge=0)
    measure: Measure | None = None  # overrides the claim's


class Claim(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    section: str
    statement: str
    paper: str
    measure: Measure
    scope: Literal["setting", "average"] = "setting"
    columns: tuple[str, ...] = ()
    quantifier: Literal["every", "most", "share"] = "every"
    share: float | None = Field(None, gt=0, le=1)  # quantifier `share`: the fraction of effects that must hold
    decision: Literal["interval", "holm"] = "interval"
    tests: tuple[ClaimTest, ...] = Field(min_length=1)

    @model_validator(mode="after")
    def _share_with_its_quantifier(self) -> Claim:
        if (self.quantifier == "share") != (self.share is not None):
            raise ValueError("`share` is given exactly when the quantifier is `share`")
        return self


class ClaimFile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    claims: tuple[Claim, ...]


def load_claims(text: str | None = None) -> tuple[Claim, ...]:
    """The bundled paper_claims.yaml (or `text` in its format)."""
    if text is None:
        text = resources.files(__package__).joinpath("paper_claims.yaml").read_text(encoding="utf-8")
    try:
        return ClaimFile.model_validate(yaml.safe_load(text)).claims
    except ValidationError as exc:
        raise ValueError(f"paper_claims.yaml: {exc.errors()[0]['loc']}: {exc.errors()[0]['msg']}") from None


@dataclass(frozen=True)
class Setting:
    backbone: str
    column: str  # a column key (benchmark, or transfer-NAME) or "average"
    label: str


class Evidence(Protocol):
    """What a set of runs holds, per setting and seed."""

    def settings(self, measure: str, scope: str, columns: Sequence[str]) -> list[Setting]: ...

    def pair(self, setting: Setting, measure: str, a: str, b: str) -> Mapping[Hashable, tuple[float, float]]:
        """Per seed both methods ran: (a's value, b's value), scores on the questions graded for both."""
        ...

    def one(self, setting: Setting, measure: str, a: str) -> Mapping[Hashable, float]: ...

    def methods(self) -> frozenset[str]:
        """The methods with at least one run."""
        ...

    def capped(self) -> frozenset[str]:
        """The methods with a run stopped at the experiment's cost cap, or not started because of it."""
        ...


@dataclass(frozen=True)
class Effect:
    setting: Setting
    test: ClaimTest
    measure: str
    n: int  # paired seeds
    mean: float | None
    ci_low: float | None
    ci_high: float | None
    holds: bool
    against: bool
    note: str = ""
    p_value: float | None = None  # two-sided paired t-test
    p_holm: float | None = None  # Holm-adjusted over the claim's effects (claims decided by Holm)

    @property
    def what(self) -> str:
        m = self.measure
        if self.test.b is None:
            return f"{self.test.a}: {m}"
        if m == "gain":
            return f"({self.test.a} − {self.test.b}) / {self.test.b}: score, %"
        return f"{self.test.a} / {self.test.b}: {m}" if m == "tokens" else f"{self.test.a} − {self.test.b}: {m}"


@dataclass(frozen=True)
class ClaimResult:
    claim: Claim
    verdict: str
    effects: tuple[Effect, ...]
    reason: str

    @property
    def decisive(self) -> tuple[Effect, ...]:
        """The effects the verdict rests on: those against it, else the weakest that held, else all."""
        against = tuple(e for e in self.effects if e.against)
        if self.verdict == CONTRADICTED and against:
            return against
        return self.effects


def _judge(test: ClaimTest, mean: float, low: float | None, high: float | None) -> tuple[bool, bool]:
    """(holds, against) for one effect. Without an interval (one seed) neither."""
    if low is None or high is None:
        return False, False
    d = test.direction
    if d == "around":
        e, t = test.expected or 0.0, test.tolerance or 0.0
        return (e - t <= low and high <= e + t), (high < e - t or low > e + t)
    if d == "at_least":
        floor = (test.expected or 0.0) - (test.tolerance or 0.0)
        return low >= floor, high < floor
    if low == high:  # no spread over the seeds: the sign of the mean decides
        holds, against = (mean > 0, mean <= 0) if d == "above" else (mean < 0, mean >= 0)
    else:
        holds, against = (low > 0, high < 0) if d == "above" else (high < 0, low > 0)
    if test.expected is not None:
        t = test.tolerance or 0.0
        holds = holds and abs(mean - test.expected) <= t
        against = against or high < test.expected - t or low > test.expected + t
    return holds, against


def _source(measure: str) -> str:
    """What the evidence is asked for: a relative gain is computed from the two methods' scores."""
    return "score" if measure == "gain" else measure


def _effect(evidence: Evidence, setting: Setting, claim: Claim, test: ClaimTest) -> Effect | None:
    measure = test.measure or claim.measure
    if test.b is None:
        values = dict(evidence.one(setting, measure, test.a))
    else:
        pairs = evidence.pair(setting, _source(measure), test.a, test.b)
        if measure == "tokens":
            values = {s: a / b for s, (a, b) in pairs.items() if b > 0}
        elif measure == "gain":  # the paper's relative gain, % of b's score
            values = {s: 100 * (a - b) / b for s, (a, b) in pairs.items() if b > 0}
        else:
            values = {s: a - b for s, (a, b) in pairs.items()}
    if not values:
        return None
    ci = paired_difference(values, dict.fromkeys(values, 0.0))
    holds, against = _judge(test, ci.mean_diff, ci.ci_low, ci.ci_high)
    note = "" if ci.ci_low is not None else "one paired seed: no interval"
    return Effect(setting, test, measure, ci.n, ci.mean_diff, ci.ci_low, ci.ci_high, holds, against, note,
                  ci.p_value)


def _no_spread(e: Effect) -> bool:
    return e.ci_low is not None and e.ci_low == e.ci_high and e.test.direction in ("above", "below")


def _holm_decided(effects: list[Effect]) -> list[Effect]:
    """Each effect decided on its Holm-adjusted p-value over the claim's effects (module docstring). An
    effect without a p-value (one seed, or no spread) cannot be rejected: it neither holds nor goes against."""
    pvalues = {i: e.p_value for i, e in enumerate(effects) if e.p_value is not None}
    flat = {i for i, e in enumerate(effects) if _no_spread(e)}
    pvalues.update({i: 0.0 if effects[i].mean else 1.0 for i in flat})  # the tie rule (module docstring)
    adjusted = holm(pvalues, alpha=ALPHA) if pvalues else {}
    out = []
    for i, e in enumerate(effects):
        if i not in adjusted:
            out.append(replace(e, holds=False, against=False, note=e.note or "no p-value: not decided"))
            continue
        if i in flat:  # decided by its sign, as an interval claim decides it (_judge)
            out.append(replace(e, p_holm=adjusted[i].adjusted, note=e.note or "no spread over the seeds: its sign "
                                                                              "decides (an exact tie goes against)"))
            continue
        side = (e.mean or 0.0) > 0 if e.test.direction == "above" else (e.mean or 0.0) < 0
        reject = adjusted[i].reject
        out.append(replace(e, holds=reject and side, against=reject and not side, p_holm=adjusted[i].adjusted))
    return out


def _measured(evidence: Evidence, claim: Claim) -> bool:
    """Some run of a method the claim names has its measure (a score column exists): else the table or
    figure that measures it was not requested, which is not a shortage of runs."""
    for test in claim.tests:
        measure = _source(test.measure or claim.measure)
        for setting in evidence.settings(measure, claim.scope, claim.columns):
            if measure == "score" or any(evidence.one(setting, measure, m) for m in (test.a, test.b) if m):
                return True
    return False


def _at_cap(methods: Sequence[str]) -> str:
    return (f"the runs of {', '.join(methods)} stopped at the experiment's cost cap (partial): raise --max-cost "
            "and run the experiment again to finish them")


def evaluate_claim(claim: Claim, evidence: Evidence) -> ClaimResult:
    named = {t.a for t in claim.tests} | {t.b for t in claim.tests if t.b}
    absent = sorted(named - evidence.methods())
    capped = sorted(named & evidence.capped())
    if absent and set(absent) <= set(capped):
        return ClaimResult(claim, NOT_ENOUGH, (), _at_cap(capped))
    if absent:
        return ClaimResult(claim, NOT_RUN, (), f"no runs of {', '.join(absent)}: the table with "
                           f"{'this method' if len(absent) == 1 else 'these methods'} was not run")
    effects: list[Effect] = []
    for test in claim.tests:
        measure = test.measure or claim.measure
        for setting in evidence.settings(_source(measure), claim.scope, claim.columns):
            e = _effect(evidence, setting, claim, test)
            if e is not None:
                effects.append(e)
    if not effects:
        if capped:
            return ClaimResult(claim, NOT_ENOUGH, (), _at_cap(capped))
        if not _measured(evidence, claim):
            measures = sorted({t.measure or claim.measure for t in claim.tests})
            return ClaimResult(claim, NOT_RUN, (), f"no run has {', '.join(measures)}: what it is measured in "
                               f"({claim.section}) was not run")
        return ClaimResult(claim, NOT_ENOUGH, (), f"no paired runs of {', '.join(sorted(named))} with this measure")
    if claim.decision == "holm":
        effects = _holm_decided(effects)
    n, held, against = len(effects), sum(e.holds for e in effects), sum(e.against for e in effects)
    with_ci = sum(e.ci_low is not None for e in effects)
    tally = f"{held} of {n} effects hold, {against} go against the claim"
    if claim.decision == "holm":
        tally += " (Holm-adjusted p ≤ 0.05)"
    if claim.quantifier == "every":
        if against:
            return ClaimResult(claim, CONTRADICTED, tuple(effects), tally)
        if held == n:
            return ClaimResult(claim, SUPPORTED, tuple(effects), tally)
    elif claim.quantifier == "share":
        need = claim.share or 1.0
        if held >= need * n - 1e-9:
            return ClaimResult(claim, SUPPORTED, tuple(effects), f"{tally}; {need:.0%} must hold")
        if n - against < need * n - 1e-9:
            return ClaimResult(claim, CONTRADICTED, tuple(effects), f"{tally}; {need:.0%} must hold")
    else:
        if 2 * held > n:
            return ClaimResult(claim, SUPPORTED, tuple(effects), tally)
        if 2 * against >= n:
            return ClaimResult(claim, CONTRADICTED, tuple(effects), tally)
    why = "fewer than two paired seeds" if with_ci == 0 else "intervals include the boundary: more seeds would decide"
    if capped:
        why += f"; {_at_cap(capped)}"
    return ClaimResult(claim, NOT_ENOUGH, tuple(effects), f"{tally}; {why}")


def evaluate_claims(evidence: Evidence, claims: Sequence[Claim] | None = None) -> tuple[ClaimResult, ...]:
    return tuple(evaluate_claim(c, evidence) for c in (claims if claims is not None else load_claims()))


@dataclass(frozen=True)
class TableEvidence:
    """Evidence from plain per-seed values: values[(backbone, column, measure, method)][seed]. Scores in
    it are each method's own (callers that have per-question grades pair them on common questions)."""

    values: Mapping[tuple[str, str, str, str], Mapping[Hashable, float]]

    def settings(self, measure: str, scope: str, columns: Sequence[str]) -> list[Setting]:
        keys = sorted({(b, c) for (b, c, m, _) in self.values if m == measure and (not columns or c in columns)})
        if scope == "average":
            return [Setting(b, "average", f"{b} · average") for b in sorted({b for b, _ in keys})]
        return [Setting(b, c, f"{b} · {c}") for b, c in keys]

    def _column(self, setting: Setting, measure: str, method: str) -> dict[Hashable, float]:
        if setting.column != "average":
            return dict(self.values.get((setting.backbone, setting.column, measure, method), {}))
        cols = sorted({c for (b, c, m, _) in self.values if b == setting.backbone and m == measure})
        per = [self.values.get((setting.backbone, c, measure, method), {}) for c in cols]
        seeds = set.intersection(*(set(p) for p in per)) if per else set()
        return {s: sum(p[s] for p in per) / len(per) for s in seeds}

    def pair(self, setting: Setting, measure: str, a: str, b: str) -> dict[Hashable, tuple[float, float]]:
        va, vb = self._column(setting, measure, a), self._column(setting, measure, b)
        return {s: (va[s], vb[s]) for s in va if s in vb}

    def one(self, setting: Setting, measure: str, a: str) -> dict[Hashable, float]:
        return self._column(setting, measure, a)

    capped_methods: frozenset[str] = frozenset()

    def methods(self) -> frozenset[str]:
        return frozenset(m for (_, _, _, m) in self.values)

    def capped(self) -> frozenset[str]:
        return self.capped_methods
