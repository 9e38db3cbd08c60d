"""Running a method end to end: splits, the inner and outer loops, checkpoints, resume and budget."""

from __future__ import annotations

import contextlib
import json
import uuid
from collections import Counter
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..benchmarks import structural_spec
from ..domain import Question, QuestionView, Skill
from ..errors import DatasetError
from ..lm import LM, Budget, BudgetExceeded, CallRecord, LMError, ParseError, RefusalError, UsageLedger
from ..lm.errors import ConfigError
from ..lm.spend import SpendLogCorrupt
from ..methods import MethodSpec, get_method
from ..policies import should_audit
from ..rundir import (
    FORMAT_VERSION,
    CallLine,
    RequestLog,
    RunEvent,
    RunLock,
    RunReadError,
    RunWriter,
    StartEvent,
    Summary,
)
from ..rundir.outcomes import outcome_of
from ..rundir.records import CHECKPOINT, INPUTS, PROVENANCE, SPLITS, Inputs
from ..tasks.load import load_questions
from ..tasks.specs import INITIAL_GENERATOR_SKILL, INITIAL_SOLVER_SKILL
from ..tasks.splits import Splits, make_splits
from ..userfiles import check_lm_files, read_user_text
from .coevolution_budget import CoevolutionBudget, Spend
from .config import RunConfig, with_backend_token_limits
from .context import EngineContext
from .estimate import estimate_calls, planned_steps
from .inner import InnerOutcome, inner_step
from .inputs import RunInputs, checkpoint_mismatch, data_changes, data_sha256, identity_changes
from .provenance import gather_provenance
from .resume_config import NEUTRAL_IN_WORDS, result_changes
from .state import LoopState
from .tokens import measured_tokens, role_tokens
from .top_up import more_steps, rewrite_sample_index
from .validity import Validity

if TYPE_CHECKING:
    from ..rundir.reader import RunReader
    from .outer import OuterOutcome

Observer = Callable[[RunEvent, LoopState], None]


def outer_step(*args: Any, **kwargs: Any) -> Coroutine[Any, Any, OuterOutcome]:
    """engine/outer.py's `outer_step`, imported at the first outer round: the audits, their pairs and the
    generator's verification load after the run's first calls (a method without audits never loads them)."""
    from .outer import outer_step as step

    return step(*args, **kwargs)


@dataclass(frozen=True)
class RunResult:
    run_dir: Path
    state: LoopState
    ledger: UsageLedger

    @property
    def solver(self) -> Skill:
        return self.state.solver


def call_line(record: CallRecord, phase: str | None = None) -> CallLine:
    return CallLine(role=record.role, model=record.model, key=record.key, cached=record.cached,
                    prompt_tokens=record.prompt_tokens, completion_tokens=record.completion_tokens,
                    truncated=record.truncated, reasoning_tokens=record.reasoning_tokens, phase=phase,
                    request=record.request_id, estimated=record.estimated)


def transcript_entry(record: CallRecord, phase: str | None) -> dict[str, Any] | None:
    """The transcript entry of a paid call: the fields of a `TranscriptEntry`, in its order, built as the
    mapping the file holds (a model built and dumped back per paid call cost more than the JSON line)."""
    request = record.request
    if request is None or record.reply is None:
        return None
    p = request.params
    return {"key": record.key, "role": record.role, "model": record.model, "phase": phase,
            "messages": [m.as_dict() for m in request.messages],
            "params": {"temperature": p.temperature, "max_tokens": p.max_tokens, "sample_index": p.sample_index},
            "structured": request.json_schema is not None, "reply": record.reply}


def checked_checkpoint(run_dir: Path) -> tuple[LoopState, UsageLedger] | None:
    """The loop state and ledger a resume starts from (None: no step completed), read without writing:
    a checkpoint that is not a file, does not parse, or holds a wrong field is a RunReadError naming
    the file and the field, before the resume calls a model or writes a byte."""
    from ..rundir.reader import validate_record
    from ..rundir.resume import checkpoint_to_resume

    checkpoint = checkpoint_to_resume(run_dir)
    if checkpoint is None:
        return None
    where = run_dir / CHECKPOINT
    state = validate_record(LoopState, checkpoint.state, where, prefix="state")
    try:
        ledger = UsageLedger.from_dict(checkpoint.ledger)
    except ValueError as exc:
        field, _, problem = str(exc).partition(": ")
        raise RunReadError(f"{where}: field 'ledger.{field}': {problem}") from None
    return state, ledger


def resolve_budget(config: RunConfig, method: MethodSpec) -> Budget:
    """The run's budget; `match_run` takes it from another run's ledger (Budget-Matched control).

    The cap is the paired run's *effective* usage (paid + inherited from a shared cache), the same quantity
    `Budget.check` stops on: capping on paid usage alone would leave the control short by whatever the paired
    run inherited (in a sweep, DecoEvo's first steps replay SkillOpt's answers)."""
    calls, tokens, cost = config.budget.max_calls, config.budget.max_tokens, config.budget.max_cost
    if config.budget.match_run:
        ledger_path = Path(config.budget.match_run) / "ledger.json"
        if not ledger_path.is_file():
            raise ConfigError(f"budget.match_run: {ledger_path} not found; point it at a finished run directory")
        total = UsageLedger.from_dict(json.loads(ledger_path.read_text(encoding="utf-8"))).total()
        tokens = tokens or total.effective_tokens
        # Matched on tokens, a run with cheaper calls than the paired one is not stopped on its call count
        # (or dollars) first and so lands at the paired run's tokens: parity in the paper's unit.
        if config.budget.match_on == "usage":
            calls = calls or total.effective_calls
            if cost is None and total.effective_cost_usd > 0 and not total.unpriced_calls:  # priced: dollars too
                cost = total.effective_cost_usd
    if config.budget.top_up and calls is None and tokens is None and cost is None:
        raise ConfigError("budget.top_up needs a budget to top up to: set budget.match_run to the paired DecoEvo "
                          "run directory, or budget.max_calls / budget.max_tokens / budget.max_cost")
    if method.budget_matched and calls is None and tokens is None and cost is None:
        raise ConfigError("method budget_matched needs a budget: set budget.match_run to the paired DecoEvo run "
                          "directory, or budget.max_calls / budget.max_tokens / budget.max_cost")
    # Matched to the paired run's tokens, a control lands on them (nearest call) rather than stopping a
    # call past them: one large call is several percent of a small run.
    return Budget(calls, tokens, cost, land_on_tokens=bool(config.budget.match_run) and not config.budget.max_tokens)


def paired_calls(config: RunConfig, method: MethodSpec) -> int | None:
    """The effective calls of the run a matched control stops at (`budget.match_run`, Budget-Matched or
    `budget.top_up`): what the run is expected to cost, where its own schedule (up to budget_step_cap × T
    steps) would say far more. None: not a matched run, or the paired run has no ledger yet."""
    if not config.budget.match_run or not (method.budget_matched or config.budget.top_up):
        return None
    ledger_path = Path(config.budget.match_run) / "ledger.json"
    try:
        total = UsageLedger.from_dict(json.loads(ledger_path.read_text(encoding="utf-8"))).total()
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if config.budget.match_on != "tokens" or not total.effective_tokens:
        return total.effective_calls
    # Matched on tokens, the run makes as many calls as the paired run's tokens buy at its own tokens per
    # call: its role mix (the estimate) at the sizes the paired run measured for each role (its ledger).
    own = estimate_calls(method, config.hyper, config.splits, seed=config.seed, top_up=config.budget.top_up)
    mix = own.calls_by_role()
    sizes = {**role_tokens(config.hyper), **measured_tokens([ledger_path])}
    calls = sum(mix.values())
    spent = sum(n * (sizes[r].prompt + sizes[r].completion) for r, n in mix.items() if r in sizes)
    per_call = spent / calls if calls else 0.0
    bought = round(total.effective_tokens / per_call) if per_call > 0 else total.effective_calls
    return min(bought, own.upper_bound)  # its step cap ends a run whose tokens run out late


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
        if method.evolve_generator and method.acceptance.needs_generator_gate:
            required.append("generator_gate")
    return make_splits(questions, config.splits, config.seed, required=required)


def final_solver_note(state: LoopState, optimized: bool = True) -> str:
    """What ships, in one sentence: the improved skill or the initial one, and why."""
    if not optimized:
        return "initial: this method does not optimize the solver skill"
    if state.solver.version > 0:
        return (f"improved: solver v{state.solver.version:03d} passed the solver gate "
                f"({state.solver_accepts} accepted rewrite(s))")
    return ("initial: no rewrite passed the solver gate (rejected, invalid or voided candidates are in "
            "candidates/ and events.jsonl)")


class Engine:
    def __init__(self, config: RunConfig, run_dir: Path | str, *, lm: LM | None = None,
                 observer: Observer | None = None, questions: list[Question] | None = None,
                 on_call: Callable[[CallRecord], None] | None = None, accept_changed_data: bool = False,
                 accept_changed_config: bool = False) -> None:
        config = self.config = with_backend_token_limits(config)  # recorded in config.yaml as resolved
        self.accept_changed_data = accept_changed_data  # resume: continue on changed data / splits
        self.accept_changed_config = accept_changed_config  # resume: continue on result-changing settings
        self._config_changes: list[str] = []
        self.run_id: str | None = None  # the start event's; every checkpoint carries it
        self.method = get_method(config.method)
        self.run = RunWriter(run_dir)
        self._owns_lm = lm is None  # then run_async closes it: its HTTP connections end with the run
        if lm is None:
            check_lm_files(config.lm)
        self.lm = lm or LM(config.lm)
        self.lm.budget = resolve_budget(config, self.method)
        self.on_call = on_call
        self.lm.on_call = self._record_call
        self.lm.journal = RequestLog(self.run.path)  # each paid request on disk before it is sent
        self.phase = "start"  # what the calls being made belong to: "step N" / "outer R" (transcripts)
        self._transcribed: set[str] = set()
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
        self.run.record_call(call_line(record, self.phase))
        if record.key not in self._transcribed:
            entry = transcript_entry(record, self.phase)
            if entry is not None:
                self.run.record_transcript(entry)
                self._transcribed.add(record.key)
        if self.on_call is not None:
            self.on_call(record)

    def _emit(self, kind: str, state: LoopState, **data: Any) -> None:
        event = self.run.event(kind, **data)
        if self.observer is not None:
            self.observer(event, state)

    def _check_inputs(self) -> None:
        """A resume continues the recorded run: an edited method or seed is refused; changed data or
        splits too, unless accepted explicitly (then the record is updated to what is used now)."""
        from ..rundir.reader import RunReader

        reader = RunReader(self.run.path)
        checkpoint = reader.checkpoint()
        if checkpoint is None:
            return  # no step completed: the run starts over from the configuration as it is now
        start = next((e for e in reader.events(problems=[]) if isinstance(e, StartEvent)), None)
        self.run_id = start.run_id if start else None
        copied = checkpoint_mismatch(checkpoint.model_dump(), start.model_dump() if start else {})
        if copied:
            raise ConfigError(f"cannot resume {self.run.path}: its {CHECKPOINT} belongs to another run ("
                              + ", ".join(copied) + "); put this run's own checkpoint back (continuing another "
                              "run's state here would mix two runs)")
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
        self._check_config(reader, where)

    def _check_config(self, reader: RunReader, where: str) -> None:
        """config.yaml edited since the start (or the last accepted change): only result-neutral keys may
        differ, unless --accept-changed-config (then recorded on the resume event)."""
        recorded = reader.recorded_config()
        if recorded is None:  # a run from before the configuration was recorded in its log
            return
        changes = result_changes(recorded, self.config.model_dump(mode="json"))
        if changes and not self.accept_changed_config:
            raise ConfigError(where + "config.yaml changed " + ", ".join(changes) + " since the run started; "
                              f"a resumed run may change only {NEUTRAL_IN_WORDS}; restore them, or pass "
                              "--accept-changed-config to continue under the new values (recorded in events.jsonl)")
        self._config_changes = changes

    def _record_inputs(self, sha: str | None) -> None:
        self.run.write_model(INPUTS, Inputs(data_path=self.config.data.path, data_sha256=sha))

    def _start(self, resume: bool) -> LoopState:
        point = None
        if resume:  # the reader and the resume loader load for a resume only
            from ..rundir.reader import RunReader
            from ..rundir.resume import prepare_resume

            checked_checkpoint(self.run.path)  # before any model call or write
            self._check_inputs()
            point = prepare_resume(self.run.path)
        if point is not None:
            # Calls paid after the last checkpoint (before a kill or an error stop) are not in its ledger:
            # add them back, so spend and budgets count every paid call exactly once across resumes.
            ledger = UsageLedger.from_dict(point.checkpoint.ledger) if point.checkpoint else UsageLedger()
            for call in point.paid_after:
                ledger.record_call(call.role, call.model, call.prompt_tokens, call.completion_tokens, 0.0,
                                   truncated=call.truncated, reasoning_tokens=call.reasoning_tokens,
                                   cost_usd=self.lm.cost_of(call.model, call.prompt_tokens, call.completion_tokens),
                                   estimated=call.estimated)
            self.lm.ledger = ledger
            self.lm.own_keys |= point.own_keys
            self._transcribed |= {t.key for t in RunReader(self.run.path).transcripts()}
        if point is not None and point.checkpoint is not None:
            state = LoopState.model_validate(point.checkpoint.state)
            accepted = {"accepted_config_changes": self._config_changes,
                        "config": self.config.model_dump(mode="json")} if self._config_changes else {}
            self.run.write_text("config.yaml", self.config.to_yaml())  # the settings in force from here on
            self._emit("resume", state, next_step=state.next_step, **accepted)
            return state
        state = initial_state(self.config, self.method, self.main_spec)
        self.run.write_text("config.yaml", self.config.to_yaml())
        self.run.write_json(SPLITS, self.splits.ids())
        self._record_inputs(data_sha256(self.config.data.path))
        self.run.write_model(PROVENANCE, gather_provenance(self.config.lm, self.config.data.path,
                                                           self.config.data.task_spec))
        self.run.save_skill(state.solver, None)
        self.run.save_skill(state.generator, None)
        self.run_id = uuid.uuid4().hex[:12]
        self._emit("start", state, method=self.method.name, seed=self.config.seed, format_version=FORMAT_VERSION,
                   config=self.config.model_dump(mode="json"), run_id=self.run_id)
        return state

    def total_steps(self) -> int:
        return planned_steps(self.method, self.config.hyper, top_up=self.config.budget.top_up)

    @property
    def topped_up(self) -> bool:
        return self.method.budget_matched or self.config.budget.top_up

    async def run_async(self, resume: bool = False) -> RunResult:
        try:
            with RunLock(self.run.path):  # one writer per run directory, released even on a kill
                if not resume and (self.run.path / "config.yaml").exists():  # another process got here first
                    raise ConfigError(f"{self.run.path} already holds a run; continue it with "
                                      f"`decoevo resume {self.run.path}`")
                for name in self.config.lm.models:  # a missing model file or key file fails before any write
                    self.lm.backend(name)
                return await self._run_steps(resume)
        finally:
            if isinstance(self.lm.journal, RequestLog):
                self.lm.journal.close()  # its requests all ended: nothing of this session left to settle
            self.run.close()  # the logs it kept open
            if self._owns_lm:
                await self.lm.aclose()

    async def _run_steps(self, resume: bool) -> RunResult:
        state = self._start(resume)
        train, gate_s = self.views("train"), self.views("solver_gate")
        probe, gate_g = self.views("probe"), self.views("generator_gate")
        h = self.config.hyper
        committed = state.model_copy(deep=True)  # the state of the last checkpoint (or the start)
        try:
            while more_steps(state.next_step, state.idle_steps, self.total_steps(), topped_up=self.topped_up):
                step = state.next_step
                notes = state.audit_notes if self.method.audit_to_solver else None
                self.phase = f"step {step}"
                spent_before = self.lm.ledger.total().effective_calls
                try:
                    inner = await inner_step(self.ctx, step, state.solver, state.generator, train, gate_s, notes,
                                             rewrite_index=rewrite_sample_index(step, h.steps))
                    if inner.candidate is not None:  # Direct Audit: the records reach this one rewrite only
                        state.audit_notes = []
                    self._after_inner(state, inner)
                except (ParseError, RefusalError) as exc:
                    self._step_failed(state, "inner_step_failed", exc, step=step)
                    state.consecutive_rejections += 1
                last_round = state.last_round_step if h.audit_schedule == "since_last_round" else None
                # `quiet_final_steps` (the `lean` preset): a round this late would leave the solver too few
                # steps to learn under its generator; the paper rounds to the end (0).
                late = step >= self.total_steps() - h.quiet_final_steps
                budget = CoevolutionBudget(h.generator_share, self.total_steps())
                if self.method.runs_audits and not late and should_audit(
                        step, h.audit_every, state.consecutive_rejections, h.max_stalls, last_round=last_round
                ) and budget.may_start_round(self._spend(state, step + 1)):
                    state.last_round_step = step
                    self.phase = f"outer {state.outer_rounds}"
                    before = self.lm.ledger.total().effective_tokens
                    more = self._allowance_left(budget, state, step + 1, before) if budget.on else None
                    try:
                        outer = await outer_step(self.ctx, state.outer_rounds, state.solver, state.generator,
                                                 probe, gate_g, more)
                        state.generator_tokens += self.lm.ledger.total().effective_tokens - before
                        held = ({"allowance": round(budget.allowance(self._spend(state, step + 1))),
                                 "spent": state.generator_tokens} if budget.on else None)
                        self._after_outer(state, outer, held)
                    except (ParseError, RefusalError) as exc:
                        state.generator_tokens += self.lm.ledger.total().effective_tokens - before
                        self._step_failed(state, "outer_round_failed", exc, round=state.outer_rounds)
                        state.outer_rounds += 1
                        state.consecutive_rejections = 0
                if self.topped_up and self.lm.ledger.total().effective_calls == spent_before:
                    state.idle_steps += 1  # all answers its own cache hits: not a step of its budget
                state.next_step += 1
                self.run.checkpoint(state.model_dump(mode="json"), self.lm.ledger.to_dict(),
                                    {"method": self.method.name, "seed": self.config.seed, "run_id": self.run_id})
                committed = state.model_copy(deep=True)
        except SpendLogCorrupt as exc:
            # The experiment's spend log failed (deleted, replaced, edited): not a budget the run reached, and
            # not an end: stopped as on an error, so the run resumes from its last step once the log is
            # restored, its end names the log (never "budget reached" or the cost cap), and no control is
            # matched to a run cut short by it (a budget stop would have counted as finished).
            self._emit("stopped", state, category="error", role="", error=str(exc)[:500], at_step=state.next_step)
            self.run.write_json("ledger.json", self.lm.ledger.to_dict())
            raise
        except BudgetExceeded as exc:
            # A step is the unit of progress: the partial step (say its solver was accepted, then the
            # budget ran out in its outer round) is dropped, so summary, checkpoint, final skill and
            # export all name the solver of the last completed step, the one a resume starts from.
            dropped = state.solver.version if state.solver != committed.solver else None
            state = committed.model_copy(update={"stopped": str(exc)})
            self._emit("budget_stop", state, reason=str(exc), at_step=state.next_step,
                       solver_version=state.solver.version, dropped_solver_version=dropped)
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

    def _allowance_left(self, budget: CoevolutionBudget, state: LoopState, steps_done: int,
                        round_began: int) -> Callable[[], bool]:
        """What a round's blind audits ask between chunks: has the generator's side allowance left?"""
        return lambda: budget.may_continue(self._spend(state, steps_done, round_began))

    def _spend(self, state: LoopState, steps_done: int, round_began: int | None = None) -> Spend:
        """Tokens so far, split into the generator's side and the solver loop (the co-evolution budget). Inside
        a round (`round_began`: the run's tokens when it began) what the round has paid so far is the generator's."""
        total = self.lm.ledger.total().effective_tokens
        in_round = 0 if round_began is None else total - round_began
        return Spend(total=total, generator=state.generator_tokens + in_round, steps_done=steps_done)

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
        elif not inner.validity.valid:
            data.update(accepted=False, invalid=inner.validity.problem, note=inner.validity.reason)
        else:
            data.update(accepted=False, note="no failures under the current rubrics")
        if inner.accepted and inner.candidate is not None:
            self.run.save_skill(inner.candidate, state.solver)
            state.solver, state.consecutive_rejections = inner.candidate, 0
            state.solver_accepts += 1
        else:
            if inner.candidate is not None and not inner.validity.valid:
                self._invalid(state, inner.candidate, f"step{inner.step:03d}_invalid", inner.validity,
                              step=inner.step)
            elif inner.candidate is not None:
                self.run.save_candidate(inner.candidate, f"step{inner.step:03d}_rejected")
            state.consecutive_rejections += 1
        data["solver_version"] = state.solver.version
        data["outcome"] = outcome_of(data["accepted"], invalid=data.get("invalid"), gated=inner.decision is not None)
        self._emit("inner_step", state, **data)

    def _invalid(self, state: LoopState, candidate: Skill, label: str, validity: Validity, **where: Any) -> None:
        """A rewrite that is not a skill (engine/validity.py): kept for inspection, never gated or shipped."""
        self.run.save_candidate(candidate, label)
        self._emit("invalid_candidate", state, skill=candidate.kind, problem=validity.problem,
                   reason=validity.reason, text=candidate.text[:2000], **where)

    def _after_outer(self, state: LoopState, outer: OuterOutcome, budget: dict[str, int] | None = None) -> None:
        data: dict[str, Any] = {"round": outer.round, "structural_records": len(outer.structural),
                                "contrastive_records": len(outer.contrastive)}
        if budget is not None:  # the co-evolution budget: the generator side's allowance and spend after the round
            data["generator_budget"] = budget
        if outer.coverage():  # a stop rule cut an audit short (the `lean` preset): what it covered
            data["audits_stopped"] = outer.coverage()
        if outer.decision is not None:
            data.update(accepted=outer.decision.accepted, policy=outer.decision.policy,
                        reason=outer.decision.reason, deltas=outer.decision.deltas)
        if outer.accepted and outer.candidate is not None:
            self.run.save_skill(outer.candidate, state.generator)
            state.generator = outer.candidate
            state.generator_accepts += 1
        elif outer.candidate is not None and not outer.validity.valid:
            self._invalid(state, outer.candidate, f"round{outer.round:03d}_invalid", outer.validity,
                          round=outer.round)
            data.update(accepted=False, invalid=outer.validity.problem, reason=outer.validity.reason)
        elif outer.candidate is not None:
            self.run.save_candidate(outer.candidate, f"round{outer.round:03d}_rejected")
        if outer.notes_for_solver:
            state.audit_notes = outer.notes_for_solver
        state.outer_rounds += 1
        state.consecutive_rejections = 0  # the audit answered the stall; count afresh
        data["generator_version"] = state.generator.version
        data["outcome"] = outcome_of(data.get("accepted"), invalid=data.get("invalid"))
        self._emit("outer_round", state, **data)

    def _finish(self, state: LoopState) -> None:
        from ..analysis.criterion_drift import run_drift  # read from the finished run (not needed before)

        self.run.write_text("final_solver_skill.md", state.solver.text.strip() + "\n")
        self.run.write_json("ledger.json", self.lm.ledger.to_dict())
        summary = Summary(
            method=self.method.name, seed=self.config.seed, steps_done=state.next_step,
            solver_version=state.solver.version, generator_version=state.generator.version,
            solver_accepts=state.solver_accepts, generator_accepts=state.generator_accepts,
            outer_rounds=state.outer_rounds, failed_steps=state.failed_steps, stopped=state.stopped,
            final_solver=final_solver_note(state, self.method.optimize_solver),
            usage=dict(self.lm.ledger.to_dict()["total"]),  # type: ignore[call-overload]
            criterion_drift=run_drift(self.run.path).to_json(),
            status="budget_stop" if state.stopped else "finished", format_version=FORMAT_VERSION,
        )
        self.run.summary(summary)
        self._emit("finish", state, **summary.model_dump(mode="json", exclude={"usage", "format_version"}))
