"""Rich progress for long runs: step bar with acceptances, calls, tokens and cache hits."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from .engine.state import LoopState
from .lm.client import CallRecord


class RunProgress:
    def __init__(self, console: Console, total_steps: int, label: str) -> None:
        self.console = console
        self.progress = Progress(
            TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
            TextColumn("{task.fields[status]}"), console=console, transient=False,
        )
        self.task = self.progress.add_task(label, total=max(total_steps, 1), status="starting")
        self.calls = self.hits = self.tokens = 0
        self.solver_accepts = self.generator_accepts = self.outer_rounds = 0

    def __enter__(self) -> RunProgress:
        self.progress.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.progress.stop()

    def _refresh(self) -> None:
        status = (f"solver ✓{self.solver_accepts}  generator ✓{self.generator_accepts}/{self.outer_rounds}  "
                  f"calls {self.calls}  hits {self.hits}  tokens {self.tokens:,}")
        self.progress.update(self.task, status=status)

    def on_call(self, record: CallRecord) -> None:
        if record.cached:
            self.hits += 1
        else:
            self.calls += 1
            self.tokens += record.prompt_tokens + record.completion_tokens
        self._refresh()

    def on_event(self, kind: str, data: dict[str, Any], state: LoopState) -> None:
        self.solver_accepts, self.generator_accepts = state.solver_accepts, state.generator_accepts
        self.outer_rounds = state.outer_rounds
        if kind in ("start", "resume"):
            self.progress.update(self.task, completed=state.next_step)
        elif kind == "inner_step":
            self.progress.update(self.task, completed=data["step"] + 1)
            mark = "[green]accepted[/]" if data.get("accepted") else "[yellow]kept[/]"
            j = f" J {data['J_incumbent']:.3f} → {data['J_candidate']:.3f}" if "J_candidate" in data else ""
            self.console.log(f"step {data['step']}: solver candidate {mark}{j}")
        elif kind == "outer_round":
            mark = "[green]accepted[/]" if data.get("accepted") else "[yellow]kept[/]"
            self.console.log(f"outer round {data['round']}: generator candidate {mark} "
                             f"({data.get('reason', 'no candidate')})")
        elif kind.endswith("_failed"):
            self.console.log(f"[red]{kind.replace('_', ' ')}[/] ({data['category']}, {data['role']}): "
                             "nothing accepted from it")
        elif kind == "budget_stop":
            self.console.log(f"[red]budget reached[/]: {data['reason']}")
        self._refresh()
