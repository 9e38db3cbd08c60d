"""LLMEval-Med's official rule, as pure functions: one 1-5 score per answer; "usable" when it is 4 or more.
The benchmark's headline is the usability rate (the share of usable answers)."""

from __future__ import annotations

from collections.abc import Sequence

from ...grading.rules import check_range, mean

USABLE_AT = 4


def llmeval_med_score(score: float) -> float:
    """One 1-5 score per answer, mapped linearly: 1 -> 0, 5 -> 100 (our secondary, mean-score column)."""
    check_range([score], 1, 5, "llmeval_med")
    return (score - 1) / 4 * 100


def llmeval_med_usable(score: float) -> bool:
    """The benchmark calls an answer usable when it scores 4 or more."""
    check_range([score], 1, 5, "llmeval_med")
    return score >= USABLE_AT


def llmeval_med_usability_rate(raw_scores: Sequence[float]) -> float:
    """The official headline: the share of answers scored 4 or more, x100."""
    if not raw_scores:
        raise ValueError("llmeval_med: no scores")
    return mean([1.0 if llmeval_med_usable(s) else 0.0 for s in raw_scores]) * 100
