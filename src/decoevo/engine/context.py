"""What the loops share: the model, the hyperparameters, the method, the run directory, and the
evaluation primitives (solve, rubric per (generator version, question), judge, score)."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from ..aio import gather_all
from ..domain import Judgement, QuestionView, Response, Rubric, Skill
from ..lm import LM, GenParams
from ..methods import MethodSpec
from ..roles.generate_rubric import generate_rubric
from ..roles.judge import judge
from ..roles.solve import solve
from ..rundir import RunWriter
from ..scoring import rubric_score
from .config import Hyper

T = TypeVar("T")
U = TypeVar("U")


@dataclass(frozen=True)
class Scored:
    """A response judged under a rubric, with its rubric score S."""

    question: QuestionView
    response: Response
    rubric: Rubric
    judgement: Judgement
    score: float


@dataclass
class EngineContext:
    lm: LM
    hyper: Hyper
    method: MethodSpec
    run: RunWriter  # evaluation sessions pass one rooted at RUN/eval: the training record is never written
    seed: int
    spec_for: Callable[[str], str]
    # keyed by the skill's text, not its version: a rejected candidate and the next one share a number
    _rubrics: dict[tuple[str, str], asyncio.Future[Rubric]] = field(default_factory=dict)

    def rng(self, *parts: object) -> random.Random:
        """A generator seeded by the run seed and a label, so every draw is reproducible on resume."""
        return random.Random(":".join(str(p) for p in (self.seed, *parts)))

    def params(self, max_tokens: int, temperature: float = 0.0, sample_index: int = 0) -> GenParams:
        return GenParams(temperature=temperature, max_tokens=max_tokens, seed=self.seed, sample_index=sample_index)

    async def gather(self, fn: Callable[[T], Awaitable[U]], items: Iterable[T]) -> list[U]:
        """Run fn over items, at most `hyper.concurrency` at once, preserving order."""
        sem = asyncio.Semaphore(self.hyper.concurrency)

        async def one(item: T) -> U:
            async with sem:
                return await fn(item)

        return list(await gather_all(*(one(i) for i in items)))

    # ---- primitives ------------------------------------------------------------------------------
    async def rubric(self, question: QuestionView, generator: Skill) -> Rubric:
        """R_q(g): generated once per (generator skill, question) and reused by every comparison."""
        key = (generator.text, question.id)
        if key not in self._rubrics:
            self._rubrics[key] = asyncio.ensure_future(
                generate_rubric(self.lm, question, generator, max_criteria=self.hyper.max_criteria,
                                params=self.params(self.hyper.max_tokens_rubric)))
        try:
            return await self._rubrics[key]
        except BaseException:
            self._rubrics.pop(key, None)  # a failed generation is not memoised: the next step may ask again
            raise

    def forget_generator(self, generator: Skill) -> None:
        """Drop memoised rubrics of a rejected candidate (they stay in the request cache)."""
        for key in [k for k in self._rubrics if k[0] == generator.text]:
            del self._rubrics[key]

    async def respond(self, question: QuestionView, solver: Skill, sample_index: int = 0,
                      temperature: float = 0.0) -> Response:
        return await solve(self.lm, question, solver, sample_index=sample_index,
                           params=self.params(self.hyper.max_tokens_solve, temperature))

    async def judge(self, question: QuestionView, response: Response, rubric: Rubric) -> Scored:
        judgement = await judge(self.lm, question, response.text, rubric, mode=self.hyper.judge_mode,
                                params=self.params(self.hyper.max_tokens_judge))
        return Scored(question, response, rubric, judgement, rubric_score(rubric, judgement))

    async def evaluate(self, question: QuestionView, solver: Skill, generator: Skill) -> Scored:
        response, rubric = await gather_all(self.respond(question, solver), self.rubric(question, generator))
        return await self.judge(question, response, rubric)

    async def per_question_scores(self, questions: Sequence[QuestionView], solver: Skill,
                                  generator: Skill) -> dict[str, float]:
        """S(q, r_q(s), R_q(g)) for each q: the per-question terms of J_D(s, g)."""
        scored = await self.gather(lambda q: self.evaluate(q, solver, generator), questions)
        return {s.question.id: s.score for s in scored}
