"""Gold graders: each benchmark's official scoring rule on a 0-100 scale, applied by a grader model.

`rules` holds the pure formulas; one module per benchmark holds its grader role (prompt, output schema,
call) under the LM role `grader_<scheme>`, which `LMConfig.roles` can route to a separate model.
`grade` dispatches on the question's gold scheme; `aggregate` turns per-question results into the
benchmark score, counting (never zero-scoring) ungraded questions.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from ..domain import Question
from ..lm import LM, GenParams
from ..lm.errors import ConfigError
from . import rules
from .base import role_name
from .eqbench import grade_eqbench_cw
from .healthbench import grade_healthbench
from .llmeval_med import grade_llmeval_med
from .researchqa import grade_researchqa
from .result import BenchmarkScore, GradeResult, ItemGrade, UnknownPolicy, aggregate
from .scholarqa import grade_scholarqa_cs
from .weighted import grade_weighted
from .writingbench import grade_writingbench

Grader = Callable[..., Awaitable[GradeResult]]

GRADERS: dict[str, Grader] = {
    "healthbench": grade_healthbench,
    "writingbench": grade_writingbench,
    "scholarqa_cs": grade_scholarqa_cs,
    "researchqa": grade_researchqa,
    "llmeval_med": grade_llmeval_med,
    "eqbench_cw": grade_eqbench_cw,
    "weighted": grade_weighted,
}

GRADER_ROLES: tuple[str, ...] = tuple(role_name(s) for s in GRADERS)


async def grade(lm: LM, question: Question, response: str, *, params: GenParams | None = None) -> GradeResult:
    """Grade `response` under the official rule named by the question's gold rubric."""
    if question.gold is None:
        raise ConfigError(f"question {question.id} has no gold rubric to grade against")
    grader = GRADERS.get(question.gold.scheme)
    if grader is None:
        raise ConfigError(f"question {question.id}: no gold grader for scheme '{question.gold.scheme}' "
                          f"(known: {', '.join(GRADERS)})")
    return await grader(lm, question, response, params=params)


__all__ = [
    "GRADERS",
    "GRADER_ROLES",
    "BenchmarkScore",
    "GradeResult",
    "Grader",
    "ItemGrade",
    "UnknownPolicy",
    "aggregate",
    "grade",
    "grade_eqbench_cw",
    "grade_healthbench",
    "grade_llmeval_med",
    "grade_researchqa",
    "grade_scholarqa_cs",
    "grade_weighted",
    "grade_writingbench",
    "role_name",
    "rules",
]
