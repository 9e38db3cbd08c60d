"""The decoevo command line: one module per command, listed here in one line each (the order of
`decoevo --help`). Commands parse flags, call the library and print; the library never imports this package.

A command's module is imported only when that command runs (or its own `--help` is asked for): importing all of
them pulls in pydantic models, the LM client and the engine's configuration, about half a second of CPU that
`decoevo --version`, `decoevo --help` and every other command would pay (bench/client/startup.py,
tests/test_startup.py)."""

from __future__ import annotations

import importlib
import logging
import sys
from typing import Any, NamedTuple

import typer
from typer.core import TyperGroup


class Command(NamedTuple):
    module: str  # relative to this package
    attr: str  # the command function, or a Typer app for a group of commands
    summary: str  # the first paragraph of its help, as `decoevo --help` lists it (tests/test_startup.py checks it)


# One line per command (the order of `decoevo --help`, which lists a group of commands, `data`, last).
COMMANDS: dict[str, Command] = {
    "doctor": Command(".doctor", "doctor",
                      "Show the available backends, load the default model and make one structured call."),
    "config": Command(".config", "config_cmd", "Show every configuration key: its default, allowed values and "
                      "meaning (what --set and --config take)."),
    "methods": Command(".methods", "list_methods", "List the methods (a method is a configuration of the one engine)."),
    "run": Command(".run", "run", "Run a method (default: DecoEvo) and write a run directory per seed."),
    "pilot": Command(".pilot", "pilot_cmd", "Choose ε, τ_tie and K on the pilot split; a run takes them with --pilot.\n"
                     "Keys hyper.epsilon, hyper.tau_tie, hyper.audit_every (`decoevo config hyper`); calls logged "
                     "apart."),
    "resume": Command(".run", "resume", "Continue a stopped or killed run from its last completed step; paid calls "
                      "come from the cache.\nA changed method or seed is refused; a changed data file or splits too, "
                      "unless --accept-changed-data;\nan edited config.yaml that changes results too, unless "
                      "--accept-changed-config."),
    "sweep": Command(".sweep", "sweep",
                     "Run a grid of methods × seeds × benchmarks (matched splits); finished cells are not rerun."),
    "export": Command(".export", "export", "Print the final solver skill (what ships), or write it for promptfoo / "
                      "Inspect AI with --to."),
    "rubric": Command(".rubric", "rubric",
                      "Write the co-evolved generator's rubric for each question (JSONL: id, question, rubric)."),
    "eval": Command(".eval", "eval_", "Grade a run's solver skill with the benchmark's official rule; writes "
                    "RUN/eval/<name>-v<N>-<grader>.json."),
    "compare": Command(".compare", "compare", "Your initial solver skill vs the shipped one, per question: both "
                       "scores, Δ with a paired 95% CI."),
    "dynamics": Command(".eval", "dynamics", "Score every checkpoint on the diagnostic split: generated-rubric proxy "
                        "and gold grade (Figure 3)."),
    "align": Command(".eval", "align",
                     "Criterion-level P/R/F1 of the final generated rubrics against the gold rubrics (Table 5)."),
    "report": Command(".report", "report", "Write one self-contained HTML report: results, comparisons, dynamics, "
                      "alignment, cost and every run."),
    "reproduce": Command(".reproduce", "reproduce_command", "The paper's whole experiment: Tables 1-5 and Figure 3, "
                         "graded independently, with the report."),
    "docs": Command(".docs", "docs",
                    "List the user documentation shipped with decoevo, or print one page (Markdown) to stdout."),
    "data": Command(".data", "data_app", "Download and check the public benchmark files."),
}


def load(name: str) -> typer.core.TyperCommand | TyperGroup:
    """The click command `decoevo NAME` runs, built by Typer from its module (imported now)."""
    entry = COMMANDS[name]
    target = getattr(importlib.import_module(entry.module, __package__), entry.attr)
    if isinstance(target, typer.Typer):
        command: Any = typer.main.get_command(target)
    else:
        one = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
        one.command(name)(target)
        command = typer.main.get_command(one)
    command.name = name
    return command


class LazyCommands(TyperGroup):
    """The root group: a command's module is imported when the command is resolved, not when the group is built.
    Listing the commands in `decoevo --help` uses each one's summary instead of importing it."""

    list_with_summaries = True  # False: `--help` loads every command for its listing (the test compares the two)

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        self._loaded: dict[str, typer.core.TyperCommand | TyperGroup] = {}
        self._listing = False

    def list_commands(self, ctx: Any) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        if cmd_name not in COMMANDS:
            return None
        if cmd_name not in self._loaded:
            if self._listing and self.list_with_summaries:
                return typer.core.TyperCommand(name=cmd_name, help=COMMANDS[cmd_name].summary)
            self._loaded[cmd_name] = load(cmd_name)
        return self._loaded[cmd_name]

    def format_help(self, ctx: Any, formatter: Any) -> None:
        if self.list_with_summaries:
            from . import roothelp  # rich's panels without Typer's help module (roothelp's docstring says why)

            if roothelp.drawable(self, ctx):
                roothelp.draw(self, ctx, [(name, entry.summary) for name, entry in COMMANDS.items()])
                return
        self._listing = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self._listing = False


app = typer.Typer(cls=LazyCommands, add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False)


def _show_version(value: bool) -> None:
    if value:
        from .. import __version__

        typer.echo(f"decoevo {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", is_eager=True, callback=_show_version,
                                 help="Print the version and exit."),
) -> None:
    """decoevo: evolve an LLM feature's system prompt against rubric judges, and the rubric generator safely."""
    # matplotlib's notes about its own files (its cache folder not writable under a read-only HOME, its font
    # cache being built) would lead a report's stderr; its errors still show, and a logger the user set up
    # (a level of its own) is left alone
    plots_log = logging.getLogger("matplotlib")
    if plots_log.level == logging.NOTSET:
        plots_log.setLevel(logging.ERROR)


def main() -> None:  # pragma: no cover
    sys.exit(app())
