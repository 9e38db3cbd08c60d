"""Grading a response under its question's official rule, and scoring a benchmark, by gold scheme."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

from ..domain import Question
from ..grading.base import role_name
from ..grading.result import BenchmarkScore, GradeResult
from ..grading.result import aggregate as aggregate_with
from ..lm import LM, GenParams
from ..lm.errors import ConfigError
from .record import Grader, OfficialPrompts, mean_score
from .registry import BY_SCHEME


class _Graders(Mapping[str, Grader]):
    """Gold scheme -> its benchmark's grader; the benchmark's folder is imported when its grader is looked up
    (the registry's docstring says why)."""

    def __getitem__(self, scheme: str) -> Grader:
        return BY_SCHEME[scheme].grade

    def __contains__(self, scheme: object) -> bool:
        return scheme in BY_SCHEME

    def __iter__(self) -> Iterator[str]:
        return iter(BY_SCHEME)

    def __len__(self) -> int:
        return len(BY_SCHEME)


GRADERS: Mapping[str, Grader] = _Graders()

# One LM role per gold scheme, so `LMConfig.roles` can route a benchmark's grader to its own model.
GRADER_ROLES: tuple[str, ...] = tuple(role_name(s) for s in GRADERS)


async def grade(lm: LM, question: Question, response: str, *, params: GenParams | None = None,
                official: OfficialPrompts | None = None) -> GradeResult:
    """Grade `response` under the official rule named by the question's gold rubric; with the benchmark's
    `official` prompts (benchmarks/templates.py), verbatim and parsed as its official scorer does."""
    if question.gold is None:
        raise ConfigError(f"question {question.id} has no gold rubric to grade against")
    grader = GRADERS.get(question.gold.scheme)
    if grader is None:
        raise ConfigError(f"question {question.id}: no gold grader for scheme '{question.gold.scheme}' "
                          f"(known: {', '.join(GRADERS)})")
    bench = BY_SCHEME[question.gold.scheme]
    if official is not None and bench.official is not None:
        if official.benchmark != bench.name:
            raise ConfigError(f"question {question.id}: official prompts of {official.benchmark} given for a "
                              f"{bench.name} question")
        return await bench.official(lm, question, response, official, params=params)
    return await grader(lm, question, response, params=params)


def grading_calls(question: Question) -> int:
    """Grader calls to grade one answer to `question` under its official rule: one per rubric item for
    HealthBench and WritingBench, one per batch for ResearchQA, one for LLMEval-Med and EQ-Bench CW."""
    if question.gold is None:
        return 0
    bench = BY_SCHEME.get(question.gold.scheme)
    return bench.grader_calls(question) if bench is not None else 1


def aggregate(results: Sequence[GradeResult]) -> BenchmarkScore:
    """The benchmark score of one scheme's results, by that benchmark's own summary rule."""
    schemes = {r.scheme for r in results}
    bench = BY_SCHEME.get(next(iter(schemes))) if len(schemes) == 1 else None
    out = aggregate_with(results, bench.summarise if bench is not None else mean_score)
    if bench is not None and bench.summarise_all is not None and out.score is not None:
        score, details = bench.summarise_all(results)
        out = out.model_copy(update={"score": score, "details": details})
    return out
