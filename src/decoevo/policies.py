"""Acceptance and scheduling policies: small pure objects returning frozen decisions.

Score decoupling lives in the types: `GeneratorAcceptance.decide` takes `AuditObjectives`, which has
no field for a solver score, so the DecoEvo policy cannot see J. The score-coupled baseline is a
separate policy with a separate input type.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from .scoring import mean_score
from .thresholds import below, exceeds


@dataclass(frozen=True)
class SolverGateDecision:
    accepted: bool
    incumbent: float
    candidate: float
    n: int

    @property
    def delta(self) -> float:
        return self.candidate - self.incumbent


@dataclass(frozen=True)
class SolverGate:
    """Accept s' iff J_Vs(s', g_t) > J_Vs(s_t, g_t) + ε, paired on the same questions (eq. 4); the
    comparison is `thresholds.exceeds` (a difference of exactly ε is not above it)."""

    epsilon: float

    def decide(self, incumbent: Mapping[str, float], candidate: Mapping[str, float]) -> SolverGateDecision:
        if set(incumbent) != set(candidate):
            raise ValueError("the solver gate compares both skills on the same questions")
        j_old, j_new = mean_score(incumbent), mean_score(candidate)
        # the paired difference (one mean over per-question differences), compared within the tolerance
        delta = mean_score({q: candidate[q] - incumbent[q] for q in incumbent})
        return SolverGateDecision(exceeds(delta, self.epsilon), j_old, j_new, len(incumbent))


def paired_lower_bound(diffs: Sequence[float], z: float) -> float:
    """mean(d) − z·sd(d)/√n, sd the sample standard deviation (0 for one difference): the lower confidence
    bound of a paired difference that both noise-aware gates compare with their margin."""
    n = len(diffs)
    mean = sum(diffs) / n
    spread = (sum((d - mean) ** 2 for d in diffs) / (n - 1)) ** 0.5 if n > 1 else 0.0
    return mean - z * spread / n**0.5


@dataclass(frozen=True)
class PairedBoundGate:
    """The noise-aware solver gate (an option, `hyper.solver_gate: paired_bound`): accept s' iff the lower
    confidence bound of the paired per-question difference clears ε, mean(d) − z·sd(d)/√n > ε, where
    d_q = S(q, r_q(s'), R_q) − S(q, r_q(s_t), R_q). A point margin accepts a candidate of equal quality
    whenever judge noise happens to favour it; the bound asks the difference to stand out of the noise
    measured on the same questions. With one question (no spread) it is the point margin."""

    epsilon: float
    z: float

    def decide(self, incumbent: Mapping[str, float], candidate: Mapping[str, float]) -> SolverGateDecision:
        if set(incumbent) != set(candidate):
            raise ValueError("the solver gate compares both skills on the same questions")
        diffs = [candidate[q] - incumbent[q] for q in incumbent]
        lower = paired_lower_bound(diffs, self.z)
        return SolverGateDecision(exceeds(lower, self.epsilon), mean_score(incumbent), mean_score(candidate),
                                  len(diffs))


class SolverGateParams(Protocol):
    """The hyperparameters the solver gates read (`engine.config.Hyper` has them, frozen)."""

    @property
    def epsilon(self) -> float: ...
    @property
    def solver_gate(self) -> str: ...
    @property
    def solver_gate_z(self) -> float: ...


def solver_gate(p: SolverGateParams) -> SolverGate | PairedBoundGate:
    """The solver gate the configuration asks for: the paper's point margin (default) or the paired bound."""
    if p.solver_gate == "paired_bound":
        return PairedBoundGate(p.epsilon, p.solver_gate_z)
    return SolverGate(p.epsilon)


@dataclass(frozen=True)
class AuditObjectives:
    """Φ_str and Φ_ctr on V_g. Either may be unavailable (None): an ablation turned it off, or the
    frozen near-tie set is empty. Deliberately carries nothing about solver scores."""

    structural: float | None = None
    contrastive: float | None = None
    # Per-item values behind the two means, for the paired-bound rule: u_q by question id, and per frozen
    # pair its signed resolution (+1 when m ≥ γ, −1 when m ≤ −γ, else 0). Still no solver score.
    structural_items: Mapping[str, float] = field(default_factory=dict)
    contrastive_items: Mapping[str, float] = field(default_factory=dict)

    def available(self) -> dict[str, float]:
        return {k: v for k, v in (("structural", self.structural), ("contrastive", self.contrastive))
                if v is not None}


@dataclass(frozen=True)
class GeneratorDecision:
    accepted: bool
    policy: str
    reason: str
    deltas: dict[str, float] = field(default_factory=dict)


@runtime_checkable
class GeneratorAcceptance(Protocol):
    """A score-decoupled generator policy: it decides on audit objectives, which carry no solver score."""

    name: str

    def decide(self, incumbent: AuditObjectives, candidate: AuditObjectives) -> GeneratorDecision: ...


@runtime_checkable
class SolverScoreAcceptance(Protocol):
    """A score-coupled generator policy (the SC-CoEvo baseline): it decides on the solver's aggregate score."""

    name: str

    def decide(self, incumbent_j: float, candidate_j: float) -> GeneratorDecision: ...


@dataclass(frozen=True)
class ParetoAcceptance:
    """Accept iff some available Δ_k > δ and every available Δ_j ≥ −η  (eq. 10)."""

    delta: float
    eta: float
    name: str = "pareto"

    def decide(self, incumbent: AuditObjectives, candidate: AuditObjectives) -> GeneratorDecision:
        old, new = incumbent.available(), candidate.available()
        keys = sorted(set(old) & set(new))
        if not keys:
            return GeneratorDecision(False, self.name, "no audit objective available")
        deltas = {k: new[k] - old[k] for k in keys}
        improved = [k for k in keys if exceeds(deltas[k], self.delta)]
        regressed = [k for k in keys if below(deltas[k], -self.eta)]
        if regressed:
            return GeneratorDecision(False, self.name, f"regressed beyond η on {', '.join(regressed)}", deltas)
        if not improved:
            return GeneratorDecision(False, self.name, "no objective improved by more than δ", deltas)
        return GeneratorDecision(True, self.name, f"improved {', '.join(improved)}", deltas)


@dataclass(frozen=True)
class ParetoBoundAcceptance:
    """The noise-aware Pareto rule (an option, `hyper.generator_gate: paired_bound`). An objective counts as
    improved only when the lower confidence bound of its paired per-item difference, mean − z·sd/√n,
    exceeds δ: per V_g question for Φ_str, per frozen pair of signed resolutions for Φ_ctr (a pair the
    candidate resolves the wrong way counts against it, where eq. 9 counts it as a tie). Regression is
    judged as in eq. 10 (a point Δ below −η). Without per-item values it is `ParetoAcceptance`."""

    delta: float
    eta: float
    z: float
    name: str = "pareto_bound"

    def _bound(self, old: Mapping[str, float], new: Mapping[str, float]) -> float | None:
        keys = sorted(set(old) & set(new))
        if len(keys) < 2 or set(old) != set(new):
            return None
        return paired_lower_bound([new[k] - old[k] for k in keys], self.z)

    def decide(self, incumbent: AuditObjectives, candidate: AuditObjectives) -> GeneratorDecision:
        old, new = incumbent.available(), candidate.available()
        keys = sorted(set(old) & set(new))
        if not keys:
            return GeneratorDecision(False, self.name, "no audit objective available")
        deltas = {k: new[k] - old[k] for k in keys}
        regressed = [k for k in keys if below(deltas[k], -self.eta)]
        if regressed:
            return GeneratorDecision(False, self.name, f"regressed beyond η on {', '.join(regressed)}", deltas)
        items = {"structural": (incumbent.structural_items, candidate.structural_items),
                 "contrastive": (incumbent.contrastive_items, candidate.contrastive_items)}
        improved = []
        for k in keys:
            bound = self._bound(*items[k])
            if bound is not None:
                deltas[f"{k}_lower_bound"] = bound
            if exceeds(bound if bound is not None else deltas[k], self.delta):
                improved.append(k)
        if not improved:
            return GeneratorDecision(False, self.name, "no objective's lower bound improved by more than δ", deltas)
        return GeneratorDecision(True, self.name, f"improved {', '.join(improved)} (lower bound)", deltas)


@dataclass(frozen=True)
class AcceptAll:
    """The no-verification ablation: every candidate generator is accepted."""

    name: str = "accept_all"

    def decide(self, incumbent: AuditObjectives, candidate: AuditObjectives) -> GeneratorDecision:
        return GeneratorDecision(True, self.name, "verification disabled")


@dataclass(frozen=True)
class ScoreCoupledAcceptance:
    """SC-CoEvo's rule: accept g' when it raises the current solver's aggregate score under generated
    rubrics, J_Vg(s_t, g') > J_Vg(s_t, g_t) + margin. Its input type is the solver score, not audits."""

    margin: float
    name: str = "score_coupled"

    def decide(self, incumbent_j: float, candidate_j: float) -> GeneratorDecision:
        d = candidate_j - incumbent_j
        ok = exceeds(d, self.margin)
        return GeneratorDecision(ok, self.name, "solver score rose" if ok else "solver score did not rise",
                                 {"solver_score": d})


def should_audit(step: int, audit_every: int, consecutive_rejections: int, max_stalls: int, *,
                 last_round: int | None = None) -> bool:
    """The outer loop runs every K inner steps (after steps K, 2K, ...) or after M consecutive rejections.

    With `last_round` (the step of the last outer round, -1 before any: `audit_schedule: since_last_round`)
    the K steps count from the last round, so a round brought forward by a stall moves the next scheduled
    one instead of being followed by it one step later, with neither skill changed in between."""
    if consecutive_rejections >= max_stalls:
        return True
    if last_round is None:
        return (step + 1) % audit_every == 0
    return step - last_round >= audit_every


def select_failures(scores: dict[str, float], max_failures: int) -> list[str]:
    """The questions to learn from: those the rubric did not fully credit, lowest score first."""
    failed = sorted((s, qid) for qid, s in scores.items() if below(s, 1.0))
    return [qid for _, qid in failed[:max_failures]]


# ---- how a method verifies a candidate generator ------------------------------------------------------
class AcceptanceParams(Protocol):
    """The hyperparameters the acceptance policies read (`engine.config.Hyper` has them, frozen)."""

    @property
    def delta(self) -> float: ...
    @property
    def eta(self) -> float: ...
    @property
    def sc_margin(self) -> float: ...
    @property
    def generator_gate(self) -> str: ...
    @property
    def generator_gate_z(self) -> float: ...


@dataclass(frozen=True)
class VerifyByAudits:
    """DecoEvo: the candidate and the incumbent are scored on audit objectives only (Φ_str, Φ_ctr on V_g
    with a frozen near-tie set), and Pareto acceptance decides. Never a solver score."""

    name: str = "pareto"
    needs_generator_gate: bool = True

    def policy(self, p: AcceptanceParams) -> ParetoAcceptance | ParetoBoundAcceptance:
        if p.generator_gate == "paired_bound":
            return ParetoBoundAcceptance(p.delta, p.eta, p.generator_gate_z)
        return ParetoAcceptance(p.delta, p.eta)


@dataclass(frozen=True)
class VerifyBySolverScore:
    """SC-CoEvo: the candidate is accepted when it raises the current solver's aggregate score on V_g."""

    name: str = "score_coupled"
    needs_generator_gate: bool = True

    def policy(self, p: AcceptanceParams) -> ScoreCoupledAcceptance:
        return ScoreCoupledAcceptance(p.sc_margin)


@dataclass(frozen=True)
class AcceptEveryCandidate:
    """The no-verification ablation: nothing is measured, every valid candidate is accepted."""

    name: str = "accept_all"
    needs_generator_gate: bool = False

    def policy(self, p: AcceptanceParams) -> AcceptAll:
        return AcceptAll()


GeneratorVerification = VerifyByAudits | VerifyBySolverScore | AcceptEveryCandidate
