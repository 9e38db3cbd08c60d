"""Rich progress for long runs (a callback of the library API): a bar over every phase (inner steps and
outer rounds), the phase in progress, a timer that runs until the run ends, an ETA from the call estimate
and the measured rate, acceptances, calls, tokens and cache hits; and `run_with_progress`, what `decoevo
run`/`resume` and sweep cells show."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, ProgressColumn, Task, TextColumn, TimeElapsedColumn
from rich.text import Text

from ..engine.reestimate import Position, Seen
from ..engine.state import LoopState
from ..lm import CallRecord
from ..rundir import (
    BudgetStopEvent,
    InnerStepEvent,
    InnerStepFailedEvent,
    OuterRoundEvent,
    OuterRoundFailedEvent,
    ResumeEvent,
    RunEvent,
    StartEvent,
)
from ..rundir.outcomes import STYLE, Outcome, label
from .display import show_table


def eta_seconds(elapsed: float, calls_done: int, calls_expected: float, units_done: int, units_total: int
                ) -> float | None:
    """Seconds left. From the first paid call on: the expected paid calls not yet made at the measured call
    rate; once a phase (an inner step or an outer round) has ended, the larger of that and the phases left
    at the measured time per phase, since late calls (rewrites, audits) take longer than early ones and
    a call estimate may be short; past the expected calls, the phases alone. None before any call."""
    if elapsed <= 0:
        return None
    by_calls = (calls_expected - calls_done) * elapsed / calls_done if 0 < calls_done < calls_expected else None
    by_units = max(units_total - units_done, 0) * elapsed / units_done if units_done > 0 else None
    known = [x for x in (by_calls, by_units) if x is not None]
    return max(known) if known else None


BAR_WIDTH = 20  # the bar's columns on a wide console (rich's default, 40, pushed the line past 120)
STATUS_MARGIN = 3  # columns kept free for a longer ETA or timer than when the status was fitted
# A paid call updates the counts; the status text is remade from them at most this often (rich draws the
# line 10 times a second anyway): remade on every call it cost more CPU than many a call's HTTP. Events,
# which are few, and the end of the run always remake it, so the last state shown is the final one.
REDRAW_S = 0.1
# rich's redraw of the line (its own thread): ~1 ms of CPU each, rich's default 10 a second cost more than the
# run's calls did over a long run (4 a second still cost ~4 ms of CPU a second of waiting); the timer and the
# ETA count seconds, which 2 a second show on time
REDRAWS_PER_S = 2


def fit(parts: Sequence[str], width: int, sep: str) -> str:
    """The leading `parts` that fit in `width` columns (always the first)."""
    out = parts[:1]
    for part in parts[1:]:
        if len(sep.join([*out, part])) > width:
            break
        out = [*out, part]
    return sep.join(out)


def clock(seconds: float) -> str:
    s = max(round(seconds), 0)
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"


# paid calls still to come, given what the run has shown, after the step of (step, consecutive rejections,
# step of the last round) or, with True, after that step's outer round
Ahead = Callable[[Seen, int, int, int, bool], float]


@dataclass(frozen=True)
class Plan:
    """What the bar counts: the run's inner steps, the step this process starts from (a resume), and the
    outer rounds and paid calls expected from there (engine/estimate.py); `ahead`, when given, re-estimates
    the calls still to come after each step and round (engine/reestimate.py)."""

    steps: int
    first_step: int = 0
    expected_rounds: float = 0.0
    expected_calls: float = 0.0
    ahead: Ahead | None = None

    @classmethod
    def of(cls, config: Any, total_steps: int) -> Plan:
        from ..engine.estimate import estimate_calls
        from ..engine.reestimate import calls_ahead, prior_for
        from ..engine.run import paired_calls
        from ..methods import get_method

        method = get_method(config.method)
        prior = prior_for(method, config.lm)
        est = estimate_calls(method, config.hyper, config.splits, seed=config.seed, rates=prior)
        matched = paired_calls(config, method) is not None  # it stops at its paired run's usage instead

        def ahead(seen: Seen, step: int, stalls: int, last_round: int, after_round: bool) -> float:
            at = Position(step + 1, 0, step) if after_round else \
                Position.after_step(step, stalls, last_round, method, config.hyper)
            return calls_ahead(method, config.hyper, config.splits, config.seed, seen, at, prior)

        return cls(total_steps, 0, est.expected_rounds, expected_calls(config), None if matched else ahead)

    def from_step(self, first_step: int) -> Plan:
        """What is left when a resume starts at `first_step` (the share of steps left, of rounds and calls)."""
        share = (self.steps - first_step) / self.steps if self.steps else 0.0
        return Plan(self.steps, first_step, self.expected_rounds * share, self.expected_calls * share, self.ahead)


class _Live(ProgressColumn):
    """A column computed at every refresh (not only on events), so the phase and ETA move while a
    long outer round runs."""

    def __init__(self, text: Callable[[], str]) -> None:
        super().__init__()
        self.text = text

    def render(self, task: Task) -> Text:
        return Text(self.text())


class RunProgress:
    """The bar of one run. Its units are phases, inner steps and outer rounds alike: the total is the steps
    plus the rounds the estimate expects, and grows when more rounds run, so the bar is never full (and
    its timer never stops) before the run ends."""

    def __init__(self, console: Console, total_steps: int, label: str, plan: Plan | None = None,
                 phase: Callable[[], str] = lambda: "", now: Callable[[], float] = time.monotonic) -> None:
        self.console = console
        self.narrow = console.width < 120  # 80 columns: no bar, shorter words, nothing cut to "…"
        self.plan = plan or Plan(total_steps)
        self.phase, self.now = phase, now
        self.started = now()
        self.steps_done, self.rounds_done = self.plan.first_step, 0
        self.ended = False
        bar = [] if self.narrow else [BarColumn(bar_width=BAR_WIDTH)]
        self.label = label
        self.progress = Progress(
            TextColumn("[bold]{task.description}"), *bar, _Live(self.where), TimeElapsedColumn(), _Live(self.eta),
            TextColumn("{task.fields[status]}"), console=console, transient=False,
            refresh_per_second=REDRAWS_PER_S,
        )
        self.task = self.progress.add_task(label, total=self._total(), completed=self._done(), status="starting")
        self.calls = self.hits = self.tokens = 0
        self.cost: float | None = None  # dollars, once a priced model answers
        self.solver_accepts = self.generator_accepts = self.outer_rounds = 0
        self.seen = Seen()  # what this process's part of the run has shown (the re-estimate's input)
        self.round_calls = 0  # paid calls in outer rounds
        self._drawn = -math.inf  # when the status was last remade (self.now())

    def __enter__(self) -> RunProgress:
        self.progress.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._refresh()  # the counts of the last calls, when a run stops without `finish` (a failure)
        self.progress.stop()

    def _rounds_total(self) -> int:
        return max(math.ceil(self.plan.expected_rounds - 1e-9), self.rounds_done)

    def _done(self) -> int:
        return self.steps_done - self.plan.first_step + self.rounds_done

    def _total(self) -> int:
        planned = self.plan.steps - self.plan.first_step + self._rounds_total()
        return max(planned, self._done() + (0 if self.ended else 1), 1)  # full only once the run has ended

    def where(self) -> str:
        """The phase being worked on: `step 3/8`, then `outer 1` while a round runs (wide: rounds done of
        those expected), `done` at the end. Narrow consoles get the short words."""
        rounds = f"{self.rounds_done}/~{self._rounds_total()}" if self.plan.expected_rounds else str(self.rounds_done)
        steps = f"{min(self.steps_done + (not self.ended), self.plan.steps)}/{self.plan.steps}"
        if self.ended:
            return f"{steps} done" if self.narrow else f"step {steps} done, {self.rounds_done} outer rounds"
        if self.phase().startswith("outer"):  # the round after the step that just ended
            steps = f"{self.steps_done}/{self.plan.steps}"
            return f"{steps} outer {self.rounds_done}" if self.narrow else \
                f"step {steps}  outer {self.rounds_done} ({rounds} rounds)"
        return f"step {steps}" if self.narrow else f"step {steps}  rounds {rounds}"

    def eta(self) -> str:
        if self.ended:
            return ""
        planned = self.plan.steps - self.plan.first_step + self._rounds_total()
        left = eta_seconds(self.now() - self.started, self.calls, self.plan.expected_calls, self._done(), planned)
        if left is not None:
            return f"ETA ~{clock(left)}"
        # before the first answer: what the estimate says is ahead, in calls (no rate to turn it into time)
        return f"ETA: ~{self.plan.expected_calls:,.0f} calls" if self.plan.expected_calls else "ETA ?"

    def finish(self) -> None:
        self.ended = True
        self.progress.update(self.task, total=self._total(), completed=self._done())
        self._refresh()

    def _advance(self) -> None:
        self.progress.update(self.task, total=self._total(), completed=self._done())

    def _status_width(self) -> int:
        """Columns left for the status beside the label, bar, phase, timer and ETA (one space between
        columns, and room for the ETA and timer to grow), so the line never wraps."""
        used = len(self.label) + len(self.where()) + len("0:00:00") + len(self.eta()) + 4 + STATUS_MARGIN
        return self.console.width - used - (0 if self.narrow else BAR_WIDTH + 1)

    def _refresh(self) -> None:
        self._drawn = self.now()
        # Most telling first; what does not fit is left out whole (tokens are in the closing table).
        money = [f"${self.cost:,.4f}"] if self.cost is not None else []
        status = ""
        for calls in dict.fromkeys((self._calls(), f"calls {self.calls}")):  # the paid count alone if need be
            if self.narrow:
                parts = [f"solver ✓{self.solver_accepts}", calls,
                         f"gen ✓{self.generator_accepts}/{self.outer_rounds}", *money]
            else:
                parts = [f"solver ✓{self.solver_accepts}", calls,
                         f"generator ✓{self.generator_accepts}/{self.outer_rounds}", *money, f"hits {self.hits}",
                         f"tokens {self.tokens:,}"]
            status = fit(parts, self._status_width(), " " if self.narrow else "  ")
            if calls in status:
                break
        self.progress.update(self.task, status=status)

    def _calls(self) -> str:
        """Paid calls, and of the expected (re-estimated after each step and round) while the run goes; past
        the estimate, the paid count alone."""
        expected = self.plan.expected_calls
        return f"calls {self.calls}/~{expected:.0f}" if expected > self.calls and not self.ended else \
            f"calls {self.calls}"

    def _reestimate(self, event: RunEvent, state: LoopState) -> None:
        """After a step or a round: the calls paid so far plus those the run's own outcomes now predict."""
        s = self.seen
        if isinstance(event, InnerStepEvent | InnerStepFailedEvent):
            failed = not isinstance(event, InnerStepEvent)
            outcome = event.candidate_outcome if isinstance(event, InnerStepEvent) else None
            s = replace(s, steps=s.steps + 1, kept=s.kept + (failed or outcome is not Outcome.ACCEPTED),
                        ungated=s.ungated + (failed or outcome in (Outcome.INVALID, Outcome.NO_CANDIDATE)))
            after_round = False
        elif isinstance(event, OuterRoundEvent | OuterRoundFailedEvent):
            outcome = event.candidate_outcome if isinstance(event, OuterRoundEvent) else None
            s = replace(s, rounds=s.rounds + 1, invalid_generators=s.invalid_generators + (outcome is Outcome.INVALID),
                        generator_accepts=s.generator_accepts + (outcome is Outcome.ACCEPTED),
                        round_calls=self.round_calls)
            after_round = True
        else:
            return
        self.seen = s
        if self.plan.ahead is not None:  # a failed step's stall is counted after its event (engine/run.py)
            stalls = state.consecutive_rejections + isinstance(event, InnerStepFailedEvent)
            left = self.plan.ahead(s, state.next_step, stalls, state.last_round_step, after_round)
            self.plan = replace(self.plan, expected_calls=self.calls + left)

    def on_call(self, record: CallRecord) -> None:
        if record.cached:
            self.hits += 1
        else:
            self.calls += 1
            self.round_calls += self.phase().startswith("outer")
            self.tokens += record.prompt_tokens + record.completion_tokens
            if record.cost_usd:
                self.cost = (self.cost or 0.0) + record.cost_usd
        if self.now() - self._drawn >= REDRAW_S:
            self._refresh()

    def on_event(self, event: RunEvent, state: LoopState) -> None:
        self.solver_accepts, self.generator_accepts = state.solver_accepts, state.generator_accepts
        self.outer_rounds = state.outer_rounds
        if isinstance(event, ResumeEvent) and state.next_step != self.plan.first_step:
            self.plan = self.plan.from_step(state.next_step)
            self.steps_done, self.started = state.next_step, self.now()  # the rate of this process's work
        elif isinstance(event, StartEvent | ResumeEvent):
            self.steps_done = state.next_step
        elif isinstance(event, InnerStepEvent | InnerStepFailedEvent):
            self.steps_done = max(self.steps_done, state.next_step + 1)
        elif isinstance(event, OuterRoundEvent | OuterRoundFailedEvent):
            self.rounds_done += 1
        self._reestimate(event, state)
        self._advance()
        if isinstance(event, InnerStepEvent):
            j = (f", J {event.J_incumbent:.3f} → {event.J_candidate:.3f}"
                 if event.J_incumbent is not None and event.J_candidate is not None else "")
            detail = "" if event.candidate_outcome in (Outcome.ACCEPTED, Outcome.REJECTED) else event.note or ""
            self.console.log(outcome_line(f"step {event.step}", "solver", event.candidate_outcome, detail) + j)
        elif isinstance(event, OuterRoundEvent):
            self.console.log(outcome_line(f"outer round {event.round}", "generator", event.candidate_outcome,
                                          event.reason or ""))
        elif isinstance(event, InnerStepFailedEvent | OuterRoundFailedEvent):
            self.console.log(f"[red]{event.event.replace('_', ' ')}[/] ({event.category}, {event.role}): "
                             "nothing accepted from it")
        elif isinstance(event, BudgetStopEvent):
            self.console.log(f"[red]budget reached[/]: {event.reason}")
        self._refresh()


def outcome_line(where: str, kind: str, outcome: Outcome, detail: str = "") -> str:
    """`step 3: solver candidate rejected (incumbent kept)`: a candidate's outcome in the words the report
    and the event log use (rundir/outcomes.py), with its reason when there is one."""
    words = f"[{STYLE[outcome]}]{label(outcome)}[/]"
    head = f"{where}: {kind}: {words}" if outcome is Outcome.NO_CANDIDATE else f"{where}: {kind} candidate {words}"
    return head + (f" — {escape(detail)}" if detail else "")


def expected_calls(config: Any) -> int:
    """The calls a run's "expected" line names: its paired run's effective calls when it is matched to one
    that has run, else the estimate's expected paid calls."""
    from ..engine.estimate import estimate_calls
    from ..engine.reestimate import prior_for
    from ..engine.run import paired_calls
    from ..methods import get_method

    method = get_method(config.method)
    matched = paired_calls(config, method)
    return matched if matched is not None else estimate_calls(method, config.hyper, config.splits, seed=config.seed,
                                                              rates=prior_for(method, config.lm)).expected


def describe_estimate(config: Any) -> str:
    """The line printed before a run: expected paid calls, cached answers and, when every model that
    serves a role is priced, dollars (tokens per call at the run's sizes, engine/tokens.py)."""
    from ..engine.estimate import Rates, estimate_calls
    from ..engine.model_prior import model_prior
    from ..engine.reestimate import prior_for
    from ..engine.run import paired_calls
    from ..engine.tokens import role_tokens
    from ..lm.pricing import price_for
    from ..methods import get_method

    method = get_method(config.method)
    est = estimate_calls(method, config.hyper, config.splits, seed=config.seed, rates=prior_for(method, config.lm),
                         top_up=config.budget.top_up)
    counted = model_prior(Rates(), config.lm)[1]
    matched = paired_calls(config, get_method(config.method))
    if matched is not None:  # it stops at the paired run's usage, not at budget_step_cap × T steps
        if config.budget.match_on == "tokens":
            return (f"expected: ~{matched:,} model calls, paid or inherited from the cache: the paired run "
                    f"{config.budget.match_run}'s tokens at this method's tokens per call")
        return (f"expected: ~{matched:,} model calls, paid or inherited from the cache: those of the paired run "
                f"{config.budget.match_run}, whose usage it is matched to")

    def price_of(role: str, prompt: float, completion: float) -> float | None:
        price = price_for(config.lm.models[config.lm.model_for(role)])
        return None if price is None else price.cost(prompt, completion)

    usd = est.dollars(price_of, role_tokens(config.hyper))
    money = f", about ${usd:,.2f}" if usd else ""  # free (embedded) models print no dollars
    # A rewrite that is not a skill is never scored: how often a model writes one only the run shows
    low = estimate_calls(get_method(config.method), config.hyper, config.splits, seed=config.seed,
                         rates=Rates(ungated=1.0, generator_invalid=1.0)).expected
    fewer = f"; ~{low:,} if no rewrite is a usable skill" if low < est.expected else ""
    steps = est.paying_steps if est.paying_steps is not None else est.steps
    over = f", over up to {steps:,} paying steps (topped up past T = {est.steps:,})" if steps > est.steps else ""
    assumed = f", counting {counted.describe()}" if counted is not None else ""
    return (f"expected: ~{est.expected:,} paid model calls and ~{est.cached:,} answered by the cache{money} "
            f"(up to ~{est.upper_bound:,} paid: every step at its dearest and every audit the schedule allows"
            f"{over}{fewer}){assumed}; the progress line re-estimates after each step")


def resume_line(run_dir: Path, total_steps: int) -> str:
    """Where a resume starts: the steps its last checkpoint completed, of the run's total."""
    from ..rundir import RunReader

    checkpoint = RunReader(run_dir).checkpoint()
    done = checkpoint.state.get("next_step") if checkpoint is not None else None
    if not isinstance(done, int) or done <= 0:
        return (f"resuming {run_dir} from its start: no step was completed before (the calls it paid are "
                "answered by the cache)")
    return (f"resuming {run_dir}: {done} of {total_steps} inner steps done, continuing with the next "
            "(the calls it paid are answered by the cache)")


def run_with_progress(config: Any, run_dir: Path, *, resume: bool, console: Console,
                      callbacks: Sequence[object] = (), accept_changed_data: bool = False,
                      accept_changed_config: bool = False) -> Any:
    """Run or resume `config` in `run_dir` with the expected-call estimate, the progress bar and the
    closing usage table on `console`. Returns the api's RunResult."""
    from ..api import run_config_async
    from ..methods import get_method

    method = get_method(config.method)
    holder: dict[str, RunProgress] = {}

    def attach(engine: Any) -> None:  # the engine exists once the data is loaded: only then the banner
        total = engine.total_steps()
        engine.lm.on_notice = lambda text: console.print(f"note: {text}", highlight=False)  # a lowered concurrency
        if not resume:
            console.print(f"[bold]{method.name}[/] seed {config.seed} -> {run_dir}\n{describe_estimate(config)}")
        else:
            console.print(resume_line(run_dir, total), highlight=False)
        holder["bar"] = RunProgress(console, total, f"{method.name} s{config.seed}", Plan.of(config, total),
                                    phase=lambda: str(engine.phase))
        holder["bar"].__enter__()

    class Relay:  # the bar exists only once the engine knows its step count
        def on_event(self, event: RunEvent, state: LoopState) -> None:
            if "bar" in holder:
                holder["bar"].on_event(event, state)

        def on_call(self, record: CallRecord) -> None:
            if "bar" in holder:
                holder["bar"].on_call(record)

    try:
        result = asyncio.run(run_config_async(config, run_dir, resume=resume, callbacks=[Relay(), *callbacks],
                                              engine_hook=attach, accept_changed_data=accept_changed_data,
                                              accept_changed_config=accept_changed_config))
        if "bar" in holder:
            holder["bar"].finish()
    finally:
        if "bar" in holder:
            holder["bar"].__exit__(None, None, None)
    show_table(console, result.ledger.table(title=f"usage: {run_dir.name}"), keys=2)
    state = result.state
    console.print(f"solver v{state.solver.version} ({state.solver_accepts} accepted), generator "
                  f"v{state.generator.version} ({state.generator_accepts}/{state.outer_rounds} rounds accepted)"
                  + (f"; stopped: {state.stopped}" if state.stopped else ""), highlight=False)
    from .shipped import closing_lines  # read after the run (it loads the run reader and its analyses)

    for line in closing_lines(run_dir):  # a command is never wrapped: copied from the terminal, it works
        console.print(line, highlight=False, markup=False, soft_wrap=line.lstrip().startswith("decoevo "))
    return result
