"""The pieces of `decoevo --help` drawn without Typer (cli/entry.py, cli/roothelp.py) against Click's own, at every
width and for every way the program is started, and a group's help drawn as Typer draws it (issue 47.2; the
fresh-process comparisons of whole outputs are in tests/test_startup.py)."""

from __future__ import annotations

import os
from types import SimpleNamespace
from typing import Any

import pytest
import typer
from typer._click.utils import _detect_program_name
from typer.main import get_command
from typer.rich_utils import rich_format_help

from decoevo.cli import app, entry, roothelp

ANSI_FREE = {"NO_COLOR": "1", "TERM": "dumb"}


def _terminal(columns: int | None):
    def get_terminal_size(fd: int = 1) -> os.terminal_size:
        if columns is None:
            raise OSError("not a terminal")
        return os.terminal_size((columns, 40))
    return get_terminal_size


@pytest.mark.parametrize("terminal", [None, 120, 60, 0], ids=["no-terminal", "terminal-120", "terminal-60",
                                                               "terminal-0"])
@pytest.mark.parametrize("columns", [None, "0", "-3", "wide", "30", "50", "51", "77", "78", "79", "80", "81", "200"])
def test_the_usage_line_wraps_as_click_wraps_it(monkeypatch, columns, terminal):
    """Click sizes its formatter from $COLUMNS, else the terminal, else 80 (then at most 78, at least 50), and
    wraps the usage under the program's name or below it; the root usage drawn without Click is the same for
    every program-name length around each wrapping point."""
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.delenv("LINES", raising=False)
    if columns is not None:
        monkeypatch.setenv("COLUMNS", columns)
    monkeypatch.setattr(os, "get_terminal_size", _terminal(terminal))
    group = get_command(app)
    wrapped = set()
    for length in range(1, 70):
        prog = "p" * length
        clicks = group.get_usage(group.context_class(group, info_name=prog))
        assert roothelp.root_usage(prog) == clicks, (columns, terminal, length)
        wrapped.add(clicks.count("\n"))
    assert wrapped >= {0, 1}  # not vacuous: some names fit on one line and some wrap


@pytest.mark.parametrize(("path", "package"), [
    ("/usr/local/bin/decoevo", None), ("/usr/local/bin/decoevo", ""), ("decoevo", None),
    ("/src/decoevo/__main__.py", "decoevo"), ("/src/decoevo/cli/entry.py", "decoevo.cli"),
    ("/src/pkg/tool.py", "pkg"), ("/src/a/b/__main__.py", "a.b"), ("/src/x/__main__.py", ".x")])
def test_the_program_name_is_the_one_click_shows(path, package):
    """A console script shows its file's name; `python -m decoevo` shows `python -m decoevo`, and a submodule
    run with -m its dotted name, as Click names them in the usage line."""
    main = SimpleNamespace() if package is None else SimpleNamespace(__package__=package)
    assert entry.program_name(path, main) == _detect_program_name(path, main)


def _group_with(default: Any = 3, **option: Any) -> typer.Typer:
    """A Typer app whose root has one option besides --help (shown the way `option` says; `...`: required) and one
    command."""
    group = typer.Typer(rich_markup_mode="rich", add_completion=False)

    def root(level: int = typer.Option(default, "--level", "-l", help="How **loud**.\n\nSecond paragraph.",
                                       **option)) -> None:
        """A root that says what it does.

        With a second paragraph."""

    group.callback()(root)

    @group.command()
    def go() -> None:
        """Go somewhere."""

    return group


@pytest.mark.parametrize("option", [{"show_default": True}, {"show_default": "three"}, {"show_default": False},
                                    {"min": 0, "max": 9}], ids=["default", "default-text", "no-default", "range"])
def test_a_drawable_groups_help_is_typers_own(monkeypatch, capsys, option):
    """`roothelp.draw` draws a group's options as Typer's help module does: help paragraphs, a shown default (or
    its text), a hidden one, a number range, short and long names."""
    for name, value in {**ANSI_FREE, "COLUMNS": "100"}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    group = get_command(_group_with(**option))
    ctx = group.context_class(group, info_name="prog")
    assert roothelp.drawable(group, ctx)
    rich_format_help(obj=group, ctx=ctx, markup_mode="rich")
    typers = capsys.readouterr().out
    roothelp.draw(group, ctx, [("go", "Go somewhere.")])
    ours = capsys.readouterr().out
    assert "--level" in typers and "Go somewhere" in typers  # not vacuous
    assert ours == typers


@pytest.mark.parametrize("option", [{"default": ...}, {"rich_help_panel": "Tuning"}, {"envvar": "LEVEL",
                                                                                           "show_envvar": True}],
                         ids=["required", "panel", "envvar"])
def test_a_group_roothelp_cannot_draw_goes_to_typer(option):
    """A required option, a panel of its own or a shown environment variable is Typer's to draw."""
    plain, group = get_command(_group_with()), get_command(_group_with(**option))
    assert roothelp.drawable(plain, plain.context_class(plain, info_name="prog"))  # the same group without it
    assert not roothelp.drawable(group, group.context_class(group, info_name="prog"))
