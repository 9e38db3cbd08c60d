"""`decoevo --help` drawn with rich's panels and tables alone, as Typer draws it.

Typer draws help with `typer.rich_utils`, whose import brings rich's Markdown (markdown-it), its traceback
renderer (pygments, attrs) and more: about 0.15 s of CPU, more than half of what `decoevo --help` costs in all
(bench/client/startup.py). The root help needs none of that: a usage line, one paragraph, two options and the
command table. This draws exactly those, in Typer's layout and styles; anything else (arguments, custom panels,
an epilog, a deprecated or required parameter) goes to Typer. tests/test_startup.py compares the two outputs,
plain and in colour, so a Typer upgrade that changes its look fails there rather than drifting.

`draw_root` draws the same help from cli/commands.py's data without Typer at all, for `decoevo` and
`decoevo --help` (cli/entry.py); the same tests compare it with Typer's output in a fresh process."""

from __future__ import annotations

import inspect
import os
import sys
import textwrap
from typing import Any, ClassVar, NamedTuple

from rich.align import Align
from rich.columns import Columns
from rich.console import Console, Group
from rich.highlighter import RegexHighlighter
from rich.padding import Padding
from rich.panel import Panel
from rich.table import Table
from rich.text import Text
from rich.theme import Theme

from .commands import COMMANDS, ROOT_HELP, VERSION_HELP

# Typer's own styles and highlights (typer/rich_utils.py), the ones the root help uses.
THEME = {"option": "bold cyan", "switch": "bold green", "negative_option": "bold magenta",
         "negative_switch": "bold red", "types": "bold yellow", "types_sep": "dim", "usage": "yellow"}


class _Options(RegexHighlighter):
    highlights: ClassVar[list[str]] = [
        r"(^|\W)(?P<switch>\-\w+)(?![a-zA-Z0-9])", r"(^|\W)(?P<option>\-\-[\w\-]+)(?![a-zA-Z0-9])",
        r"(?P<types>\<[^\>]+\>)", r"(?P<usage>Usage: )"]


class _Negative(RegexHighlighter):
    highlights: ClassVar[list[str]] = [
        r"(^|\W)(?P<negative_switch>\-\w+)(?![a-zA-Z0-9])", r"(^|\W)(?P<negative_option>\-\-[\w\-]+)(?![a-zA-Z0-9])"]


class _Types(RegexHighlighter):
    highlights: ClassVar[list[str]] = [
        r"^(?P<types_sep>(\[|<))", r"(?P<types_sep>\|)", r"(?P<types_sep>(\]|>))(\.\.\.)?$"]


_options, _negative, _types = _Options(), _Negative(), _Types()


def _console() -> Console:
    """Typer's console: its colour and terminal switches from the environment, read as it reads them."""
    force = True if os.getenv("GITHUB_ACTIONS") or os.getenv("FORCE_COLOR") or os.getenv("PY_COLORS") else None
    if os.getenv("_TYPER_FORCE_DISABLE_TERMINAL"):
        force = False
    width = os.getenv("TERMINAL_WIDTH")
    return Console(theme=Theme(THEME), highlighter=_options, color_system="auto", force_terminal=force,
                   width=int(width) if width else None)


def _markup(text: str, style: str = "") -> Text:
    return _options(Text.from_markup(inspect.cleandoc(text), style=style))


class OptionRow(NamedTuple):
    longs: str  # e.g. "--version"
    shorts: str
    types: str  # e.g. "<bool>", with a number range after it
    help: str | None  # its paragraphs, joined as Typer joins them
    default: str | None  # "[default: …]" text, when shown


# The root's options, as Typer lists them (checked against Typer's own help by tests/test_startup.py)
ROOT_OPTIONS = [OptionRow("--version", "", "<bool>", VERSION_HELP, None),
                OptionRow("--help", "", "<bool>", "Show this message and exit.", None)]


def drawable(group: Any, ctx: Any) -> bool:
    """Whether this help is one `draw` renders as Typer would: only plain options, no panels of its own."""
    from typer.core import TyperOption

    if group.deprecated or group.epilog or getattr(group, "rich_markup_mode", None) != "rich":
        return False
    for param in group.get_params(ctx):
        if getattr(param, "hidden", False):
            continue
        if not isinstance(param, TyperOption) or param.required or getattr(param, "rich_help_panel", None) \
                or (param.envvar and param.show_envvar) or param.secondary_opts:
            return False
    return True


def _option_row(param: Any, ctx: Any) -> OptionRow:
    help_text = None
    if param.help:
        paragraphs = [p.replace("\n", " ").strip() if not p.startswith("\b") else "{}\n".format(p.strip("\b\n"))
                      for p in param.help.split("\n\n")]
        help_text = "\n".join(paragraphs).strip()
    default_text = None
    default = param._extract_default_help_str(ctx=ctx)
    shown_as_str = isinstance(param.show_default, str)
    if shown_as_str or (default is not None and (param.show_default or ctx.show_default)):
        text = param._get_default_string(ctx=ctx, show_default_is_str=shown_as_str, default_value=default)
        if text:
            default_text = f"[default: {text}]"
    shown = param.display_type_rich(ctx=ctx)
    number_range = param._get_number_range_help_str()
    return OptionRow(",".join(o for o in param.opts if "--" in o), ",".join(o for o in param.opts if "--" not in o),
                     (shown or "") + (f" [{number_range}]" if number_range else ""), help_text, default_text)


def _option_help(row: OptionRow) -> Columns:
    items: list[Text] = []
    if row.help:
        items.append(_markup(row.help))
    if row.default:
        items.append(Text(row.default, style="dim"))
    return Columns(items)


def draw(group: Any, ctx: Any, commands: list[tuple[str, str]]) -> None:
    """Print the help of `group` (see `drawable`) with `commands`: (name, summary) in listing order."""
    rows = [_option_row(param, ctx) for param in group.get_params(ctx) if not getattr(param, "hidden", False)]
    render(group.get_usage(ctx), group.help, rows, commands)


def draw_root(prog: str) -> None:
    """`decoevo --help` as `draw` prints it for the Typer app (cli/main.py), from its data alone."""
    render(root_usage(prog), ROOT_HELP, ROOT_OPTIONS, [(name, entry.summary) for name, entry in COMMANDS.items()])


def _columns() -> int:
    """`shutil.get_terminal_size().columns` (what Click reads), without importing shutil (and with it bz2, lzma
    and fnmatch) for it: $COLUMNS, else the terminal's width on stdout, else 80."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns or 80


def root_usage(prog: str) -> str:
    """The root's usage line as Click writes it (`HelpFormatter.write_usage`): wrapped to the terminal's width
    (at most 78, at least 50 columns) under the program's name, or below it when the name leaves under 20."""
    width = max(min(_columns(), 80) - 2, 50)
    prefix, args = f"Usage: {prog} ", "[OPTIONS] COMMAND [ARGS]..."
    if width >= len(prefix) + 20:
        return textwrap.fill(args, width, initial_indent=prefix, subsequent_indent=" " * len(prefix),
                             replace_whitespace=False)
    indent = " " * (len("Usage: ") + 4)
    return prefix + "\n" + textwrap.fill(args, width, initial_indent=indent, subsequent_indent=indent,
                                         replace_whitespace=False)


def render(usage: str, help_text: str | None, rows: list[OptionRow], commands: list[tuple[str, str]]) -> None:
    console = _console()
    console.print(Padding(_options(usage), 1), style="bold")
    if help_text:
        first, *rest = inspect.cleandoc(help_text).partition("\f")[0].split("\n\n")
        lines: list[Text] = [_markup(first.strip() if first.startswith("\b") else first.replace("\n", " ").strip())]
        if rest:
            lines += [Text(""), _markup("\n\n".join(rest), style="dim")]
        console.print(Padding(Align(Group(*lines), pad=False), (0, 1, 1, 1)))
    options = Table(highlight=True, show_header=False, expand=True, box=None, show_lines=False, leading=0,
                    border_style=None, row_styles=None, pad_edge=False, padding=(0, 1))
    for row in rows:
        types = Text(style="bold yellow", overflow="fold")
        types.append(row.types)
        options.add_row(_options(row.longs), _options(row.shorts), _negative(""), _negative(""), _types(types),
                        _option_help(row))
    if options.row_count:
        console.print(Panel(options, border_style="dim", title="Options", title_align="left"))
    table = Table(highlight=False, show_header=False, expand=True, box=None, show_lines=False, leading=0,
                  border_style=None, row_styles=None, pad_edge=False, padding=(0, 1))
    table.add_column(style="bold cyan", no_wrap=True, width=max((len(n) for n, _ in commands), default=0))
    table.add_column("Description", justify="left", no_wrap=False, ratio=10)
    for name, summary in commands:
        first = inspect.cleandoc(summary).split("\n\n")[0]
        if first.startswith("\b"):
            first = first.replace("\b\n", "")
        table.add_row(Text(name), _markup(first.strip()))
    if table.row_count:
        console.print(Panel(table, border_style="dim", title="Commands", title_align="left"))
