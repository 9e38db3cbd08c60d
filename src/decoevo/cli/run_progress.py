"""Rich progress for long runs (a callback of the library API): step bar with acceptances, calls,
tokens and cache hits; and `run_with_progress`, what `decoevo run`/`resume` and sweep cells show."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from ..engine.state import LoopState
from ..lm import CallRecord
from ..rundir import (
    BudgetStopEvent,
    InnerStepEvent,
    InnerStepFailedEvent,
    InvalidCandidateEvent,
    OuterRoundEvent,
    OuterRoundFailedEvent,
    ResumeEvent,
    RunEvent,
    StartEvent,
)
from .display import show_table
from .shipped import closing_lines


class RunProgress:
    def __init__(self, console: Console, total_steps: int, label: str) -> None:
        self.console = console
        self.narrow = console.width < 120  # 80 columns: no bar, shorter words, nothing cut to "…"
        bar = [] if self.narrow else [BarColumn()]
        self.progress = Progress(
            TextColumn("[bold]{task.description}"), *bar, MofNCompleteColumn(), TimeElapsedColumn(),
            TextColumn("{task.fields[status]}"), console=console, transient=False,
        )
        self.task = self.progress.add_task(label, total=max(total_steps, 1), status="starting")
        self.calls = self.hits = self.tokens = 0
        self.cost: float | None = None  # dollars, once a priced model answers
        self.solver_accepts = self.generator_accepts = self.outer_rounds = 0

    def __enter__(self) -> RunProgress:
        self.progress.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.progress.stop()

    def _refresh(self) -> None:
        gap, generator, tokens = (" ", "gen", "tok") if self.narrow else ("  ", "generator", "tokens")
        status = (f"solver ✓{self.solver_accepts}{gap}{generator} ✓{self.generator_accepts}/{self.outer_rounds}{gap}"
                  f"calls {self.calls}{gap}hits {self.hits}{gap}{tokens} {self.tokens:,}"
                  + (f"{gap}${self.cost:,.4f}" if self.cost is not None else ""))
        self.progress.update(self.task, status=status)

    def on_call(self, record: CallRecord) -> None:
        if record.cached:
            self.hits += 1
        else:
            self.calls += 1
            self.tokens += record.prompt_tokens + record.completion_tokens
            if record.cost_usd:
                self.cost = (self.cost or 0.0) + record.cost_usd
        self._refresh()

    def on_event(self, event: RunEvent, state: LoopState) -> None:
        self.solver_accepts, self.generator_accepts = state.solver_accepts, state.generator_accepts
        self.outer_rounds = state.outer_rounds
        if isinstance(event, StartEvent | ResumeEvent):
            self.progress.update(self.task, completed=state.next_step)
        elif isinstance(event, InnerStepEvent):
            self.progress.update(self.task, completed=event.step + 1)
            mark = "[green]accepted[/]" if event.accepted else "[yellow]kept[/]"
            j = (f" J {event.J_incumbent:.3f} → {event.J_candidate:.3f}"
                 if event.J_incumbent is not None and event.J_candidate is not None else "")
            self.console.log(f"step {event.step}: solver candidate {mark}{j}")
        elif isinstance(event, OuterRoundEvent):
            mark = "[green]accepted[/]" if event.accepted else "[yellow]kept[/]"
            self.console.log(f"outer round {event.round}: generator candidate {mark} "
                             f"({event.reason or 'no candidate'})")
        elif isinstance(event, InnerStepFailedEvent | OuterRoundFailedEvent):
            self.console.log(f"[red]{event.event.replace('_', ' ')}[/] ({event.category}, {event.role}): "
                             "nothing accepted from it")
        elif isinstance(event, InvalidCandidateEvent):
            self.console.log(f"[yellow]invalid {event.skill} candidate[/] ({event.problem}): {event.reason}")
        elif isinstance(event, BudgetStopEvent):
            self.console.log(f"[red]budget reached[/]: {event.reason}")
        self._refresh()


def describe_estimate(config: Any) -> str:
    """The line printed before a run: expected paid calls, cached answers and, when every model that
    serves a role is priced, dollars (an order of magnitude: typical tokens per call, see estimate.py)."""
    from ..engine.estimate import estimate_calls
    from ..engine.run import paired_calls
    from ..lm.pricing import price_for
    from ..methods import get_method

    est = estimate_calls(get_method(config.method), config.hyper, config.splits)
    matched = paired_calls(config, get_method(config.method))
    if matched is not None:  # it stops at the paired run's usage, not at budget_step_cap × T steps
        return (f"expected: ~{matched:,} model calls, paid or inherited from the cache: those of the paired run "
                f"{config.budget.match_run}, whose {config.budget.match_on} it is matched to")

    def price_of(role: str, prompt: int, completion: int) -> float | None:
        price = price_for(config.lm.models[config.lm.model_for(role)])
        return None if price is None else price.cost(prompt, completion)

    usd = est.dollars(price_of)
    money = f", about ${usd:,.2f}" if usd else ""  # free (embedded) models print no dollars
    return (f"expected: ~{est.expected:,} paid model calls and ~{est.cached:,} answered by the cache{money} "
            f"(up to ~{est.upper_bound:,} paid if every solver rewrite is rejected and stalls trigger extra audits)")


def run_with_progress(config: Any, run_dir: Path, *, resume: bool, console: Console,
                      callbacks: Sequence[object] = (), accept_changed_data: bool = False,
                      accept_changed_config: bool = False) -> Any:
    """Run or resume `config` in `run_dir` with the expected-call estimate, the progress bar and the
    closing usage table on `console`. Returns the api's RunResult."""
    from ..api import run_config_async
    from ..methods import get_method

    method = get_method(config.method)
    if not resume:
        console.print(f"[bold]{method.name}[/] seed {config.seed} -> {run_dir}\n{describe_estimate(config)}")
    holder: dict[str, RunProgress] = {}

    def attach(engine: Any) -> None:
        holder["bar"] = RunProgress(console, engine.total_steps(), f"{method.name} s{config.seed}")
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
    finally:
        if "bar" in holder:
            holder["bar"].__exit__(None, None, None)
    show_table(console, result.ledger.table(title=f"usage: {run_dir.name}"), keys=2)
    state = result.state
    console.print(f"solver v{state.solver.version} ({state.solver_accepts} accepted), generator "
                  f"v{state.generator.version} ({state.generator_accepts}/{state.outer_rounds} rounds accepted)"
                  + (f"; stopped: {state.stopped}" if state.stopped else ""), highlight=False)
    for line in closing_lines(run_dir):
        console.print(line, highlight=False, markup=False)
    return result
