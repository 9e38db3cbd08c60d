"""LLMEval-Med (Fudan NLP, 2025): Chinese clinical questions in five categories, each answer scored
1-5 against a physician's reference answer and checklist; the headline is the usability rate."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...grading.result import GradeResult
from ...grading.rules import mean
from ..healthbench import TASK_SPEC
from ..record import Benchmark, DataFile, DataSource, Split
from . import rules
from .grader import grade_llmeval_med
from .loader import load_llmeval_med
from .official import PROMPTS, grade_llmeval_med_official

# Evaluation-only data; checksum and size of the file at that commit (hashed from a clone).
SOURCE = DataSource(
    upstream="llmeval/LLMEval-Med@508516f",
    licence="evaluation only (see the repository)",
    homepage="https://github.com/llmeval/LLMEval-Med",
    splits=(Split("all", (DataFile(
        "dataset.json", "https://raw.githubusercontent.com/llmeval/LLMEval-Med/508516f/dataset/dataset.json",
        "58b60a92c20be4c62644fd3e028670514b452d125152715e52f6a9268a68db90", 1861859),),
        "dataset.json", "667 questions in 5 categories", records=667),),
)


def summarise(graded: Sequence[GradeResult]) -> tuple[float, dict[str, Any]]:
    """Over the graded answers: the usability rate (share of answers scored 4 or more), x100, each category
    weighted by its number of questions; the mean score (1-5 mapped to 0-100) and per-category usability
    rates are secondary. The headline is `summarise_all`'s, over every answer evaluated."""
    raw = [float(r.details["raw_score"]) for r in graded]
    by_category: dict[str, list[float]] = {}
    for r in graded:
        by_category.setdefault(str(r.details.get("category", "?")), []).append(float(r.details["raw_score"]))
    return rules.llmeval_med_usability_rate(raw), {
        "usable_rate": rules.llmeval_med_usability_rate(raw) / 100,
        "mean_score": mean([r.score for r in graded if r.score is not None]),
        "usable_rate_by_category": {k: rules.llmeval_med_usability_rate(v) / 100 for k, v in by_category.items()},
        "graded_without_reference": sum(1 for r in graded if r.details.get("reference_missing")),
        "graded_without_checklist": sum(1 for r in graded if r.details.get("checklist_missing")),
    }


def summarise_all(results: Sequence[GradeResult]) -> tuple[float, dict[str, Any]]:
    """The official usability rate: answers scored 4 or more over every answer evaluated, an unscored
    answer counting as not usable, as llmeval/LLMEval-Med's evaluate/Aggregate.py counts it (its `n` is
    every question of the file; its `usable_count` skips the unscored). The official grader keeps the first
    reply, as upstream does, so this is the rate of the first replies. Per category likewise."""
    graded = [r for r in results if r.score is not None]
    _, details = summarise(graded)

    def rate(group: Sequence[GradeResult]) -> float:
        return sum(r.score is not None and r.details.get("usable") is True for r in group) / len(group)

    by_category: dict[str, list[GradeResult]] = {}
    for r in results:
        by_category.setdefault(str(r.details.get("category", "?")), []).append(r)
    return rate(results) * 100, {**details, "usable_rate_of_graded": details["usable_rate"],
                                 "usable_rate": rate(results),
                                 "usable_rate_by_category": {k: rate(v) for k, v in by_category.items()}}


BENCHMARK: Benchmark = Benchmark(
    name="llmeval_med", label="LLMEval-Med", scheme="llmeval_med", load=load_llmeval_med,
    grade=grade_llmeval_med, task_spec=TASK_SPEC, source=SOURCE, summarise=summarise,
    headline="usability rate: share of answers scored 4 or more (of 5), x100",
    official_prompts=PROMPTS, official=grade_llmeval_med_official, summarise_all=summarise_all,
)
