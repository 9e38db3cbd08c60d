"""The paper's score functions (eqs. 2-8: S, J, φ_str, φ_ctr, m_g), as pure functions on plain numbers."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from .domain import Judgement, Rubric
from .thresholds import reaches


def weighted_score(weights: Sequence[float], scores: Sequence[float]) -> float:
    """S(q, r, R) = Σ w_i e_i / Σ w_i  (eq. 2)."""
    if len(weights) != len(scores):
        raise ValueError(f"{len(weights)} weights but {len(scores)} criterion scores")
    if not weights:
        raise ValueError("a rubric needs at least one criterion")
    if any(w <= 0 for w in weights):
        raise ValueError("criterion weights must be positive")
    if any(not 0.0 <= e <= 1.0 for e in scores):
        raise ValueError("criterion scores must lie in [0, 1]")
    return sum(w * e for w, e in zip(weights, scores, strict=True)) / sum(weights)


def rubric_score(rubric: Rubric, judgement: Judgement) -> float:
    return weighted_score(rubric.weights, [s.score for s in judgement.scores])


def mean_score(per_question: Mapping[str, float]) -> float:
    """J_D(s, g) = mean over D of S(q, r_q(s), R_q(g))  (eq. 3)."""
    if not per_question:
        raise ValueError("J is undefined on an empty question set")
    return sum(per_question.values()) / len(per_question)


def structural_adequacy(adequacy: Sequence[float]) -> float:
    """φ_str(g; D) = mean of u_q(g)  (eq. 5)."""
    if not adequacy:
        raise ValueError("φ_str is undefined on an empty question set")
    return sum(adequacy) / len(adequacy)


def pair_margin(score_preferred: float, score_other: float) -> float:
    """m_g(p) = S(q, r+, R_q(g)) − S(q, r−, R_q(g))  (eq. 7)."""
    return score_preferred - score_other


def contrastive_resolution(margins_by_question: Mapping[str, Sequence[float]], gamma: float) -> float | None:
    """φ_ctr(g; Γ): the question-balanced share of pairs with m_g(p) ≥ γ  (eq. 8; `thresholds.reaches`).
    None when Γ is empty: the objective is then unavailable, not zero."""
    if not 0.0 < gamma <= 1.0:
        raise ValueError("γ must lie in (0, 1]")
    per_question = [
        sum(1 for m in margins if reaches(m, gamma)) / len(margins)
        for margins in margins_by_question.values() if margins
    ]
    if not per_question:
        return None
    return sum(per_question) / len(per_question)
