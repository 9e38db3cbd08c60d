"""Dollars per call of one benchmark's runs and evaluations, for the projection: tokens per call of each
role (engine/tokens.py, from the prompts the roles and graders build at the plan's sizes), replaced by what
the experiment's own ledgers measured once some of it has run (a rerun's plan)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..engine.config import Hyper
from ..engine.tokens import CallTokens, capped_mean, lengths, measured_tokens, question_chars, role_tokens
from ..reply_lengths import RUBRIC_CRITERIA

if TYPE_CHECKING:  # plan.py imports the projection, which imports this module
    from .plan import ReproducePlan

Price = Callable[[float, float], float | None]


def expected_criteria(hyper: Hyper) -> float:
    """Criteria a generated rubric is expected to have: HealthBench's rubric sizes, at most max_criteria."""
    return capped_mean(RUBRIC_CRITERIA, hyper.max_criteria)


@dataclass(frozen=True)
class Bill:
    training: Mapping[str, CallTokens]  # per call of each training role (solver model)
    solve: CallTokens  # an evaluation answer
    grader: Mapping[str, CallTokens]  # one grader call, per data file
    matcher: CallTokens
    criteria: float  # criteria per generated rubric (matcher calls per question)
    solver_price: Price
    grader_price: Price

    def _cost(self, price: Price, tokens: CallTokens | None) -> float | None:
        return None if tokens is None else price(tokens.prompt, tokens.completion)

    def _sum(self, n: float, parts: list[tuple[float, float | None]]) -> float | None:
        if any(cost is None for _, cost in parts):
            return None
        return n * sum(times * (cost or 0.0) for times, cost in parts)

    def answer(self, n: float, path: str, grader_calls: float) -> float | None:
        """`n` answers solved and graded by the file's grader (`grader_calls` calls each)."""
        return self._sum(n, [(1.0, self._cost(self.solver_price, self.solve)),
                             (grader_calls, self._cost(self.grader_price, self.grader.get(path)))])

    def checkpoint(self, n: float, path: str, grader_calls: float) -> float | None:
        """`n` checkpoint answers: solved, scored by the proxy (rubric, judge), graded by the gold grader."""
        proxy = [(1.0, self._cost(self.solver_price, self.training.get(role)))
                 for role in ("generate_rubric", "judge")]
        return self._sum(n, [(1.0, self._cost(self.solver_price, self.solve)), *proxy,
                             (grader_calls, self._cost(self.grader_price, self.grader.get(path)))])

    def alignment(self, n: float, path: str) -> float | None:
        """`n` questions aligned: the final generator's rubric, one matcher call per criterion."""
        return self._sum(n, [(1.0, self._cost(self.solver_price, self.training.get("generate_rubric"))),
                             (self.criteria, self._cost(self.grader_price, self.matcher))])


def bench_bill(rp: ReproducePlan, bench: str, hyper: Hyper, solver_price: Price, grader_price: Price) -> Bill:
    """The bill of `bench`'s runs in plan `rp`: modelled from its data and sizes, with
    every role a ledger under its sweep folder has paid for at the tokens per call measured there."""
    from ..benchmarks import find
    from ..benchmarks.templates import resolve
    from ..engine.config import DataConfig
    from ..grading.base import role_name
    from ..tasks.load import load_questions
    from .grading_tokens import grading_tokens, matcher_tokens

    loaded = {}
    for choice in rp.data.values():
        if choice.path not in loaded:
            loaded[choice.path] = (choice, load_questions(DataConfig.model_validate(choice.config())))
    source = rp.data[bench]
    questions = loaded[source.path][1]
    sweep = rp.sweep_dir(bench)
    trained = measured_tokens(sorted(Path(sweep).glob("runs/*/*/ledger.json")))
    evaluated = measured_tokens(sorted(Path(sweep).glob("runs/*/*/eval/ledger-*.json")))
    modelled = role_tokens(hyper, question_chars(questions))
    training = {**modelled, **trained}
    answer_chars = lengths(hyper, question_chars(questions), "", "", 1.0).answer
    graders: dict[str, CallTokens] = {}
    for path, (choice, qs) in loaded.items():
        scheme = next((q.gold.scheme for q in qs if q.gold is not None), None)
        measured = evaluated.get(role_name(scheme)) if scheme is not None else None
        if measured is None:
            try:
                official = resolve(find(choice.format), "auto")
            except Exception:  # a prompt that cannot be loaded now: ours, as evaluation falls back
                official = None
            measured = grading_tokens(qs, answer_chars, official)
        if measured is not None:
            graders[path] = measured
    matcher = evaluated.get("matcher") or matcher_tokens(questions, lengths(hyper, 0.0, "", "", 1.0).criterion)
    return Bill(training, evaluated.get("solve", training["solve"]), graders, matcher, expected_criteria(hyper),
                solver_price, grader_price)
