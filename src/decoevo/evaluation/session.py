"""An evaluation session on a run: the run's engine primitives (same prompts and parameters, so the
run's cached answers are reused) plus the gold grader, with its own call log and ledger under RUN/eval/."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from pydantic import BaseModel

from ..benchmarks import find, grade
from ..benchmarks.record import OfficialPrompts, Sampling
from ..benchmarks.templates import GraderPrompt, resolve
from ..domain import Question, Response, Skill
from ..engine.context import EngineContext
from ..engine.run import call_line, spec_lookup
from ..grading import GradeResult
from ..lm import LM, CallRecord, LMError, ModelSpec, UsageLedger
from ..methods import get_method
from ..roles.solve import solve
from ..rundir import RequestLog, RunWriter, settle_interrupted, settled_calls
from .models import evaluation_lm_config
from .results import SaveDecision, save_result
from .run_view import RunView

T = TypeVar("T")
U = TypeVar("U")

EVAL_DIR = "eval"


@dataclass(frozen=True)
class GradedResponse:
    question_id: str
    response: str | None
    grade: GradeResult

    def to_dict(self) -> dict[str, Any]:
        return {"question_id": self.question_id, "response": self.response, "grade": self.grade.model_dump()}


def ungraded(question: Question, reason: str) -> GradeResult:
    scheme = question.gold.scheme if question.gold else "none"
    return GradeResult(question_id=question.id, scheme=scheme, score=None, items=(), ungraded_reason=reason)


def benchmark_sampling(question: Question) -> Sampling | None:
    bench = find(question.gold.scheme) if question.gold is not None else None
    return bench.sampling if bench is not None else None


class EvalSession:
    def __init__(self, view: RunView, *, grader: ModelSpec | None = None, matcher: ModelSpec | None = None,
                 use_cache: bool | None = None, lm: LM | None = None,
                 on_call: Callable[[CallRecord], None] | None = None, force: bool = False,
                 grader_prompt: GraderPrompt = "auto", concurrency: int | None = None) -> None:
        self.view = view
        # "auto": the benchmark's official prompt when `decoevo data fetch` has fetched it, else ours
        self.grader_prompt = grader_prompt
        self._official: dict[str, OfficialPrompts | None] = {}
        self.force = force  # replace an earlier result even when this one graded fewer questions
        self.saved: SaveDecision | None = None
        self.lm_config = evaluation_lm_config(view.config.lm, grader=grader, matcher=matcher, use_cache=use_cache)
        self.lm = lm or LM(self.lm_config)
        # Evaluation calls go to RUN/eval/calls.jsonl: RUN/calls.jsonl stays the training spend.
        # Everything an evaluation writes goes under RUN/eval/; the training record is only read.
        self.writer = RunWriter(view.path / EVAL_DIR)
        # An evaluation killed with requests in flight was billed for them: its records become estimated
        # calls in RUN/eval/calls.jsonl now, and this one's paid requests are on disk before they leave.
        self.interrupted = settle_interrupted(view.path / EVAL_DIR)
        self.journal: RequestLog | None = None
        if lm is None:  # a caller's own LM keeps its own record
            self.lm.journal = self.journal = RequestLog(view.path / EVAL_DIR)

        def record(rec: CallRecord) -> None:
            self.writer.record_call(call_line(rec))
            if on_call is not None:
                on_call(rec)

        self.lm.on_call = record
        # questions at once: the run's own, unless given (cannot change a grade: calls are cached per request)
        hyper = view.config.hyper if concurrency is None else view.config.hyper.model_copy(
            update={"concurrency": concurrency})
        self.ctx = EngineContext(self.lm, hyper, get_method(view.method), self.writer, view.seed,
                                 spec_lookup(view.config))

    async def gather(self, fn: Callable[[T], Awaitable[U]], items: Iterable[T]) -> list[U]:
        return await self.ctx.gather(fn, items)

    async def respond(self, question: Question, solver: Skill) -> Response | LMError:
        try:
            sampling = benchmark_sampling(question)
            if sampling is not None:  # the benchmark samples the graded answer its own way
                hyper = self.view.config.hyper
                params = replace(self.ctx.params(sampling.max_tokens or hyper.max_tokens_solve, sampling.temperature),
                                 min_p=sampling.min_p)
                return await solve(self.lm, question.view(), solver, params=params)
            return await self.ctx.respond(question.view(), solver)
        except LMError as exc:
            return exc

    async def grade(self, question: Question, response: Response | LMError) -> GradedResponse:
        """The gold grade of one response; a failed solve is an ungraded question, never a 0."""
        if isinstance(response, LMError):
            return GradedResponse(question.id, None, ungraded(question, f"solve failed ({response.category}): "
                                                                        f"{str(response)[:200]}"))
        return GradedResponse(question.id, response.text,
                              await grade(self.lm, question, response.text, official=self.official(question)))

    def official(self, question: Question) -> OfficialPrompts | None:
        """The official prompts this session grades `question`'s benchmark with (None: our own prompt);
        resolved once per benchmark, so a run is graded with one prompt throughout."""
        scheme = question.gold.scheme if question.gold is not None else ""
        if scheme not in self._official:
            self._official[scheme] = resolve(find(scheme), self.grader_prompt) if scheme else None
        return self._official[scheme]

    async def solve_and_grade(self, question: Question, solver: Skill) -> GradedResponse:
        return await self.grade(question, await self.respond(question, solver))

    async def aclose(self) -> None:
        try:
            await self.lm.aclose()
        finally:
            self.close_record()

    def close_record(self) -> None:
        """End this session's write-ahead record and rewrite RUN/eval/ledger.json from the whole call log:
        every evaluation of the run, this one, the others running now, the killed ones (their requests
        in flight billed as estimates). Each ledger-<name>.json holds only its own evaluation's calls; an
        evaluation that saved no result (stopped at a cost cap, failed, or graded less than the one kept) writes
        its paid calls to ledger-unsaved-<time>.json, so the per-evaluation ledgers sum to what was paid too."""
        self.writer.close()  # the call log it kept open (a later line opens it again)
        if self.journal is None:
            return
        self.journal.close()
        self.journal = None
        unsaved = self.saved is None or not self.saved.write
        if unsaved and self.lm.ledger.total().calls:
            self.writer.write_json(f"ledger-unsaved-{time.time_ns()}.json", self.lm.ledger.to_dict())
        calls = settled_calls(self.view.path / EVAL_DIR)
        if calls or (self.view.path / EVAL_DIR / "ledger.json").exists():
            self.writer.write_json("ledger.json", UsageLedger.of_calls(calls, self.lm.cost_of).to_dict())

    def save(self, name: str, record: dict[str, Any], model: type[BaseModel]) -> None:
        """Write RUN/eval/<name>.json and its ledger, unless an earlier result graded more."""
        self.saved = save_result(self.writer, f"{name}.json", record, model, force=self.force)
        if self.saved.write:
            self.save_ledger(name)

    def save_ledger(self, name: str) -> None:
        self.writer.write_json(f"ledger-{name}.json", self.lm.ledger.to_dict())
