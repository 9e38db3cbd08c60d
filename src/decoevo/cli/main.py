"""The decoevo command line's Typer app: one module per command, listed in one line each in cli/commands.py
(the order of `decoevo --help`). Commands parse flags, call the library and print; the library never imports
this package.

A command's module is imported only when that command runs (or its own `--help` is asked for): importing all of
them pulls in pydantic models, the LM client and the engine's configuration, about half a second of CPU that
`decoevo --version`, `decoevo --help` and every other command would pay (bench/client/startup.py,
tests/test_startup.py); `decoevo`, `decoevo --help` and `--version` do not import this module (cli/entry.py)."""

from __future__ import annotations

import importlib
import logging
from typing import Any

import typer
from typer.core import TyperGroup

from .commands import COMMANDS, ROOT_HELP, VERSION_HELP


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


@app.callback(help=ROOT_HELP)
def _root(
    version: bool = typer.Option(False, "--version", is_eager=True, callback=_show_version,
                                 help=VERSION_HELP),
) -> None:
    """The root's help is ROOT_HELP (cli/commands.py), which `decoevo --help` shows without Typer too."""
    # matplotlib's notes about its own files (its cache folder not writable under a read-only HOME, its font
    # cache being built) would lead a report's stderr; its errors still show, and a logger the user set up
    # (a level of its own) is left alone
    plots_log = logging.getLogger("matplotlib")
    if plots_log.level == logging.NOTSET:
        plots_log.setLevel(logging.ERROR)
