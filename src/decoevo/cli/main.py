"""The decoevo command line: one module per command, registered here in one line each (the order of
`decoevo --help`). Commands parse flags, call the library and print; the library never imports this package."""

from __future__ import annotations

import logging
import sys

import typer

from . import eval as eval_cmd
from .compare import compare as compare_cmd
from .config import config_cmd
from .data import data_app
from .docs import docs
from .doctor import doctor
from .export import export
from .methods import list_methods
from .pilot import pilot_cmd
from .report import report
from .reproduce import reproduce_command
from .rubric import rubric
from .run import resume, run
from .sweep import sweep

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False)


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


# One line per command (the order of `decoevo --help`).
app.add_typer(data_app, name="data")
app.command()(doctor)
app.command("config")(config_cmd)
app.command("methods")(list_methods)
app.command()(run)
app.command("pilot")(pilot_cmd)
app.command()(resume)
app.command()(sweep)
app.command()(export)
app.command()(rubric)
app.command("eval")(eval_cmd.eval_)
app.command("compare")(compare_cmd)
app.command()(eval_cmd.dynamics)
app.command()(eval_cmd.align)
app.command()(report)
app.command("reproduce")(reproduce_command)
app.command()(docs)


def main() -> None:  # pragma: no cover
    sys.exit(app())
