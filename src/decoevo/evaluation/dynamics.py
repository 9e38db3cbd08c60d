"""Training dynamics (paper Figure 3): every checkpoint of a run scored on a held-out diagnostic set,
by the training-time judge under the generated rubric (the proxy) and by the gold grader.

The same response feeds both scores. The proxy's rubric changes whenever the generator does, so its
magnitude is not comparable across checkpoints or methods; the gold trajectory is the comparable one.
Neither score is ever used by the run: the diagnostic split is excluded from every update."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..benchmarks import aggregate
from ..domain import Question
from ..grading import role_name
from ..lm import LMError
from ..rundir.records import DynamicsFile
from .independence import independence
from .run_view import Checkpoint
from .session import EvalSession, GradedResponse


@dataclass(frozen=True)
class DiagnosticScore:
    question_id: str
    proxy: float | None  # S in [0, 1]; None when the rubric or the verdict could not be produced
    proxy_error: str | None
    graded: GradedResponse


async def score_checkpoint(session: EvalSession, questions: list[Question], point: Checkpoint) -> list[DiagnosticScore]:
    solver = session.view.skill("solver", point.solver_version)
    generator = session.view.skill("generator", point.generator_version)

    async def one(q: Question) -> DiagnosticScore:
        response = await session.respond(q, solver)
        proxy: float | None = None
        error: str | None = None
        if isinstance(response, LMError):
            error = f"solve failed ({response.category})"
        else:
            try:
                rubric = await session.ctx.rubric(q.view(), generator)
                proxy = (await session.ctx.judge(q.view(), response, rubric)).score
            except LMError as exc:  # a failed proxy is missing, never 0
                error = f"{exc.role or 'proxy'} failed ({exc.category})"
        return DiagnosticScore(q.id, proxy, error, await session.grade(q, response))

    return await session.gather(one, questions)


def summarise(point: Checkpoint, scores: list[DiagnosticScore]) -> dict[str, Any]:
    proxies = [s.proxy for s in scores if s.proxy is not None]
    gold = aggregate([s.graded.grade for s in scores])
    return {
        "step": point.step, "skill_version": point.solver_version, "generator_version": point.generator_version,
        "proxy": 100 * sum(proxies) / len(proxies) if proxies else None,
        "n_proxy": len(proxies),
        "gold": gold.score, "n_gold_graded": gold.n_graded,
        "questions": [{"question_id": s.question_id, "proxy": s.proxy, "proxy_error": s.proxy_error,
                       "gold": s.graded.grade.score} for s in scores],
    }


async def dynamics(session: EvalSession, *, split: str = "diagnostic",
                   on_point: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
    """Score every checkpoint of the run's timeline; write and return RUN/eval/dynamics.json.

    Consecutive steps that kept the same skills cost nothing extra: their requests are cache hits."""
    view = session.view
    questions = view.split(split)
    points = []
    for point in view.timeline():
        summary = summarise(point, await score_checkpoint(session, questions, point))
        points.append(summary)
        if on_point is not None:
            on_point(summary)
    schemes = sorted({q.gold.scheme for q in questions if q.gold is not None})
    grader = independence(view.config.lm, session.lm_config, role_name(schemes[0]) if schemes else "")
    record = {"method": view.method, "seed": view.seed, "split": split, "n_questions": len(questions),
              "finished": view.finished, "grader_model": grader.grader_model, "self_graded": grader.self_graded,
              "self_graded_roles": sorted(grader.roles), "grader_independence": grader.label,
              "grader_prompt": "official" if questions and session.official(questions[0]) else "ours",
              "points": points}
    session.save("dynamics", record, DynamicsFile)
    return record
