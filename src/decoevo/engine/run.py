"""Running a method end to end: splits, the inner and outer loops, checkpoints, resume and budget."""

from __future__ import annotations

import contextlib
import json
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..benchmarks import structural_spec
from ..domain import Question, QuestionView, Skill
from ..lm import LM, Budget, BudgetExceeded, LMError, ParseError, RefusalError, UsageLedger
from ..lm.client import CallRecord
from ..lm.errors import ConfigError
from ..methods import MethodSpec, get_method
from ..rundir import (
    FORMAT_VERSION,
    CallLine,
    RunEvent,
    RunLock,
    RunReader,
    RunWriter,
    StartEvent,
    Summary,
    prepare_resume,
)
from ..rundir.records import INPUTS, SPLITS, Inputs
from ..tasks.errors import DatasetError
from ..tasks.load import load_questions
from ..tasks.specs import INITIAL_GENERATOR_SKILL, INITIAL_SOLVER_SKILL
from ..tasks.splits import Splits, make_splits
from ..userfiles import check_lm_files, read_user_text
from .config import RunConfig
from .context import EngineContext
from .inner import InnerOutcome, inner_step
from .inputs import RunInputs, data_changes, data_sha256, identity_changes
from .outer import OuterOutcome, outer_step
from .policies import should_audit
from .state import LoopState

Observer = Callable[[RunEvent, LoopState], None]


@dataclass(frozen=True)
class RunResult:
    run_dir: Path
    state: LoopState
    ledger: UsageLedger

    @property
    def solver(self) -> Skill:
        return self.state.solver


def call_line(record: CallRecord) -> CallLine:
    return CallLine(role=record.role, model=record.model, key=record.key, cached=record.cached,
                    prompt_tokens=record.prompt_tokens, completion_tokens=record.completion_tokens,
                    truncated=bool(getattr(record, "truncated", False)))


def resolve_budget(config: RunConfig, method: MethodSpec) -> Budget:
    """The run's budget; `match_run` takes it from another run's ledger (Budget-Matched control)."""
    calls, tokens = config.budget.max_calls, config.budget.max_tokens
    if config.budget.match_run:
        ledger_path = Path(config.budget.match_run) / "ledger.json"
        if not ledger_path.is_file():
            raise ConfigError(f"budget.match_run: {ledger_path} not found; point it at a finished run directory")
        total = UsageLedger.from_dict(json.loads(ledger_path.read_text(encoding="utf-8"))).total()
        calls, tokens = calls or total.calls, tokens or total.tokens
    if method.budget_matched and calls is None and tokens is None:
        raise ConfigError("method budget_matched needs a budget: set budget.match_run to the paired DecoEvo run "
                          "directory, or budget.max_calls / budget.max_tokens")
    return Budget(calls, tokens)


def spec_lookup(config: RunConfig) -> Callable[[str], str]:
    if config.data.task_spec:
        path = Path(config.data.task_spec)
        if not path.is_file():
            raise DatasetError(path, None, None, "task_spec file not found")
        text = read_user_text(path, "task_spec file").strip()
        if not text:
            raise DatasetError(path, None, None, "task_spec file is empty")
        return lambda task: text
    return structural_spec


def initial_state(config: RunConfig, method: MethodSpec, spec: str) -> LoopState:
    generator_text = config.initial_generator_skill or INITIAL_GENERATOR_SKILL
    if method.task_prior:
        generator_text += f"\n\nWhat this task values:\n{spec}"
    return LoopState(
        solver=Skill(kind="solver", version=0, text=config.initial_solver_skill or INITIAL_SOLVER_SKILL),
        generator=Skill(kind="generator", version=0, text=generator_text),
    )


def build_splits(config: RunConfig, method: MethodSpec, questions: list[Question]) -> Splits:
    required = ["train", "solver_gate"] if method.optimize_solver else []
    if method.runs_audits:
        required.append("probe")
        if method.evolve_generator and method.generator_acceptance != "accept_all":
            required.append("generator_gate")
    return make_splits(questions, config.splits, config.seed, required=required)


class Engine:
    def __init__(self, config: RunConfig, run_dir: Path | str, *, lm: LM | None = None,
                 observer: Observer | None = None, questions: list[Question] | None = None,
                 on_call: Callable[[CallRecord], None] | None = None, accept_changed_data: bool = False) -> None:
        self.config = config
        self.accept_changed_data = accept_changed_data  # resume: continue on changed data / splits
        self.method = get_method(config.method)
        self.run = RunWriter(run_dir)
        self._owns_lm = lm is None  # then run_async closes it: its HTTP connections end with the run
        if lm is None:
            check_lm_files(config.lm)
        self.lm = lm or LM(config.lm)
        self.lm.budget = resolve_budget(config, self.method)
        self.on_call = on_call
        self.lm.on_call = self._record_call
        self.observer = observer
        self.questions = questions if questions is not None else load_questions(config.data)
        self.splits = build_splits(config, self.method, self.questions)
        self.spec_for = spec_lookup(config)
        main_task = Counter(q.task for q in self.splits.train or self.questions).most_common(1)[0][0]
        self.ctx = EngineContext(self.lm, config.hyper, self.method, self.run, config.seed, self.spec_for)
        self.main_spec = self.spec_for(main_task)

    def views(self, name: str) -> list[QuestionView]:
        return [q.view() for q in getattr(self.splits, name)]

    def _record_call(self, record: CallRecord) -> None:
        self.run.record_call(call_line(record))
        if self.on_call is not None:
            self.on_call(record)

    def _emit(self, kind: str, state: LoopState, **data: Any) -> None:
        event = self.run.event(kind, **data)
        if self.observer is not None:
            self.observer(event, state)

    def _check_inputs(self) -> None:
        """A resume continues the recorded run: an edited method or seed is refused; changed data or
        splits too, unless accepted explicitly (then the record is updated to what is used now)."""
        reader = RunReader(self.run.path)
        if reader.checkpoint() is None:
            return  # no step completed: the run starts over from the configuration as it is now
        start = next((e for e in reader.events(problems=[]) if isinstance(e, StartEvent)), None)
        inputs = reader.model(Inputs, INPUTS) if reader.has(INPUTS) else None
        now = RunInputs(self.method.name, self.config.seed, data_sha256(self.config.data.path), self.splits.ids())
        recorded = RunInputs(start.method if start else now.method, start.seed if start else now.seed,
                             inputs.data_sha256 if inputs else None,
                             reader.split_ids() if reader.has(SPLITS) else now.splits)
        where = f"cannot resume {self.run.path}: "
        identity = identity_changes(recorded, now)
        if identity:
            raise ConfigError(where + "; ".join(identity) + "; a run keeps its method and seed (start a new run "
                              "for another)")
        changes = data_changes(recorded, now, self.config.data.path)
        if changes and not self.accept_changed_data:
            raise ConfigError(where + "; ".join(changes) + "; restore the data, or pass --accept-changed-data to "
                              "continue on it")
        if changes:
            self.run.write_json(SPLITS, now.splits)
        if changes or inputs is None:
            self._record_inputs(now.data_sha256)

    def _record_inputs(self, sha: str | None) -> None:
        self.run.write_model(INPUTS, Inputs(data_path=self.config.data.path, data_sha256=sha))

    def _start(self, resume: bool) -> LoopState:
        if resume:
            self._check_inputs()
        point = prepare_resume(self.run.path) if resume else None
        if point is not None:
            # Calls paid after the last checkpoint (before a kill or an error stop) are not in its ledger:
            # add them back, so spend and budgets count every paid call exactly once across resumes.
            ledger = UsageLedger.from_dict(point.checkpoint.ledger) if point.checkpoint else UsageLedger()
            for call in point.paid_after:
                ledger.record_call(call.role, call.model, call.prompt_tokens, call.completion_tokens, 0.0)
            self.lm.ledger = ledger
            self.lm.own_keys |= point.own_keys
        if point is not None and point.checkpoint is not None:
            state = LoopState.model_validate(point.checkpoint.state)
            self._emit("resume", state, next_step=state.next_step)
            return state
        state = initial_state(self.config, self.method, self.main_spec)
        self.run.write_text("config.yaml", self.config.to_yaml())
        self.run.write_json(SPLITS, self.splits.ids())
        self._record_inputs(data_sha256(self.config.data.path))
        self.run.save_skill(state.solver, None)
        self.run.save_skill(state.generator, None)
        self._emit("start", state, method=self.method.name, seed=self.config.seed, format_version=FORMAT_VERSION)
        return state

    def total_steps(self) -> int:
        if not self.method.optimize_solver:
            return 0
        h = self.config.hyper
        return h.steps * (h.budget_step_cap if self.method.budget_matched else 1)

    async def run_async(self, resume: bool = False) -> RunResult:
        try:
            with RunLock(self.run.path):  # one writer per run directory, released even on a kill
                if not resume and (self.run.path / "config.yaml").exists():  # another process got here first
                    raise ConfigError(f"{self.run.path} already holds a run; continue it with "
                                      f"`decoevo resume {self.run.path}`")
                return await self._run_steps(resume)
        finally:
            if self._owns_lm:
                await self.lm.aclose()

    async def _run_steps(self, resume: bool) -> RunResult:
        state = self._start(resume)
        train, gate_s = self.views("train"), self.views("solver_gate")
        probe, gate_g = self.views("probe"), self.views("generator_gate")
        h = self.config.hyper
        try:
            while state.next_step < self.total_steps():
                step = state.next_step
                notes = state.audit_notes if self.method.audit_to_solver else None
                try:
                    inner = await inner_step(self.ctx, step, state.solver, state.generator, train, gate_s, notes)
                    self._after_inner(state, inner)
                except (ParseError, RefusalError) as exc:
                    self._step_failed(state, "inner_step_failed", exc, step=step)
                    state.consecutive_rejections += 1
                if self.method.runs_audits and should_audit(step, h.audit_every, state.consecutive_rejections,
                                                            h.max_stalls):
                    try:
                        outer = await outer_step(self.ctx, state.outer_rounds, state.solver, state.generator,
                                                 probe, gate_g)
                        self._after_outer(state, outer)
                    except (ParseError, RefusalError) as exc:
                        self._step_failed(state, "outer_round_failed", exc, round=state.outer_rounds)
                        state.outer_rounds += 1
                        state.consecutive_rejections = 0
                state.next_step += 1
                self.run.checkpoint(state.model_dump(mode="json"), self.lm.ledger.to_dict())
        except BudgetExceeded as exc:
            state.stopped = str(exc)
            self._emit("budget_stop", state, reason=str(exc), at_step=state.next_step)
        except LMError as exc:  # e.g. retries exhausted: record why the run stopped, then let the caller report
            self._emit("stopped", state, category=exc.category.value, role=exc.role, error=str(exc)[:500],
                       at_step=state.next_step)
            self.run.write_json("ledger.json", self.lm.ledger.to_dict())
            raise
        except Exception as exc:  # not a model failure (bad input met mid-run, a full disk, a bug): say why
            with contextlib.suppress(Exception):  # the log may be what failed; the original error matters
                self._emit("stopped", state, category="error", role="", error=f"{type(exc).__name__}: {exc}"[:500],
                           at_step=state.next_step)
                self.run.write_json("ledger.json", self.lm.ledger.to_dict())
            raise
        self._finish(state)
        return RunResult(self.run.path, state, self.lm.ledger)

    def _step_failed(self, state: LoopState, kind: str, exc: LMError, **where: Any) -> None:
        """A model output stayed unusable after bounded repair. Nothing is scored or accepted from the
        step; the incumbent skills stay, and the failure is logged with its category and role."""
        state.failed_steps += 1
        self._emit(kind, state, category=exc.category.value, role=exc.role, error=str(exc)[:500], **where)

    def _after_inner(self, state: LoopState, inner: InnerOutcome) -> None:
        data: dict[str, Any] = {"step": inner.step, "batch_scores": inner.batch_scores}
        if inner.decision is not None:
            d = inner.decision
            data.update(accepted=d.accepted, J_incumbent=d.incumbent, J_candidate=d.candidate, n=d.n)
        else:
            data.update(accepted=False, note="no failures under the current rubrics")
        if inner.accepted and inner.candidate is not None:
            self.run.save_skill(inner.candidate, state.solver)
            state.solver, state.consecutive_rejections = inner.candidate, 0
            state.solver_accepts += 1
        else:
            if inner.candidate is not None:
                self.run.save_candidate(inner.candidate, f"step{inner.step:03d}_rejected")
            state.consecutive_rejections += 1
        data["solver_version"] = state.solver.version
        self._emit("inner_step", state, **data)

    def _after_outer(self, state: LoopState, outer: OuterOutcome) -> None:
        data: dict[str, Any] = {"round": outer.round, "structural_records": len(outer.structural),
                                "contrastive_records": len(outer.contrastive)}
        if outer.decision is not None:
            data.update(accepted=outer.decision.accepted, policy=outer.decision.policy,
                        reason=outer.decision.reason, deltas=outer.decision.deltas)
        if outer.accepted and outer.candidate is not None:
            self.run.save_skill(outer.candidate, state.generator)
            state.generator = outer.candidate
            state.generator_accepts += 1
        elif outer.candidate is not None:
            self.run.save_candidate(outer.candidate, f"round{outer.round:03d}_rejected")
        if outer.notes_for_solver:
            state.audit_notes = outer.notes_for_solver
        state.outer_rounds += 1
        state.consecutive_rejections = 0  # the audit answered the stall; count afresh
        data["generator_version"] = state.generator.version
        self._emit("outer_round", state, **data)

    def _finish(self, state: LoopState) -> None:
        self.run.write_text("final_solver_skill.md", state.solver.text.strip() + "\n")
        self.run.write_json("ledger.json", self.lm.ledger.to_dict())
        summary = Summary(
            method=self.method.name, seed=self.config.seed, steps_done=state.next_step,
            solver_version=state.solver.version, generator_version=state.generator.version,
            solver_accepts=state.solver_accepts, generator_accepts=state.generator_accepts,
            outer_rounds=state.outer_rounds, failed_steps=state.failed_steps, stopped=state.stopped,
            usage=dict(self.lm.ledger.to_dict()["total"]),  # type: ignore[call-overload]
            status="budget_stop" if state.stopped else "finished", format_version=FORMAT_VERSION,
        )
        self.run.summary(summary)
        self._emit("finish", state, **summary.model_dump(mode="json", exclude={"usage", "format_version"}))
