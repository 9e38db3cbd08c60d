"""What the co-evolved rubric generator writes for a set of questions: the run's final generator skill,
the run's own rubric role, prompt and parameters, so rubrics the run already generated come from the
request cache and new ones are paid once. Nothing is written to the run directory."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..aio import gather_all
from ..domain import Question, Rubric, Skill
from ..evaluation.run_view import RunView
from ..lm import LM, GenParams, LMError
from ..roles.generate_rubric import generate_rubric


@dataclass(frozen=True)
class RubricSet:
    generator: Skill
    rubrics: dict[str, Rubric]  # by question id, in the questions' order


class RubricFailed(LMError):
    """A question's rubric could not be generated: named, never left out of an export silently."""


def rubric_params(view: RunView) -> GenParams:
    hyper = view.config.hyper
    return GenParams(temperature=0.0, max_tokens=hyper.max_tokens_rubric, seed=view.seed)


async def generator_rubrics(view: RunView, questions: Sequence[Question], *, lm: LM | None = None,
                            concurrency: int | None = None) -> RubricSet:
    """R_q(g_final) for each question; an LMError names the question whose rubric failed."""
    import asyncio

    own = lm is None
    model = lm or LM(view.config.lm)
    generator = view.final("generator")
    sem = asyncio.Semaphore(concurrency or view.config.hyper.concurrency)

    async def one(q: Question) -> Rubric:
        async with sem:
            try:
                return await generate_rubric(model, q.view(), generator, params=rubric_params(view),
                                             max_criteria=view.config.hyper.max_criteria)
            except LMError as exc:
                failed = RubricFailed(f"question {q.id}: the rubric could not be generated ({exc.category}): "
                                      f"{str(exc)[:200]}", role=exc.role, model=exc.model)
                failed.category = exc.category
                raise failed from exc

    try:
        rubrics = list(await gather_all(*(one(q) for q in questions)))
    finally:
        if own:
            await model.aclose()
    return RubricSet(generator, {r.question_id: r for r in rubrics})
