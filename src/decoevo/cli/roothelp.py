"""`decoevo --help` drawn with rich's panels and tables alone, as Typer draws it.

Typer draws help with `typer.rich_utils`, whose import brings rich's Markdown (markdown-it), its traceback
renderer (pygments, attrs) and more: about 0.15 s of CPU, more than half of what `decoevo --help` costs in all
(bench/client/startup.py). The root help needs none of that: a usage line, one paragraph, two options and the
command table. This draws exactly those, in Typer's layout and styles; anything else (arguments, custom panels,
an epilog, a deprecated or required parameter) goes to Typer. tests/test_startup.py compares the two outputs,
plain and in colour, so a Typer upgrade that changes its look fails there rather than drifting."""

from __future__ import annotations

import inspect
import os
from typing import Any, ClassVar

from rich.align import Align
from rich.columns import Columns
from rich.console import Console, Group
from rich.highlighter import RegexHighlighter
from rich.padding import Padding
from rich.panel import Panel
from rich.table import Table
from rich.text import Text
from rich.theme import Theme
from typer.core import TyperOption

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


def drawable(group: Any, ctx: Any) -> bool:
    """Whether this help is one `draw` renders as Typer would: only plain options, no panels of its own."""
    if group.deprecated or group.epilog or getattr(group, "rich_markup_mode", None) != "rich":
        return False
    for param in group.get_params(ctx):
        if getattr(param, "hidden", False):
            continue
        if not isinstance(param, TyperOption) or param.required or getattr(param, "rich_help_panel", None) \
                or (param.envvar and param.show_envvar) or param.secondary_opts:
            return False
    return True


def _option_help(param: TyperOption, ctx: Any) -> Columns:
    items: list[Text] = []
    if param.help:
        paragraphs = [p.replace("\n", " ").strip() if not p.startswith("\b") else "{}\n".format(p.strip("\b\n"))
                      for p in param.help.split("\n\n")]
        items.append(_markup("\n".join(paragraphs).strip()))
    default = param._extract_default_help_str(ctx=ctx)
    shown_as_str = isinstance(param.show_default, str)
    if shown_as_str or (default is not None and (param.show_default or ctx.show_default)):
        text = param._get_default_string(ctx=ctx, show_default_is_str=shown_as_str, default_value=default)
        if text:
            items.append(Text(f"[default: {text}]", style="dim"))
    return Columns(items)


def draw(group: Any, ctx: Any, commands: list[tuple[str, str]]) -> None:
    """Print the help of `group` (see `drawable`) with `commands`: (name, summary) in listing order."""
    console = _console()
    console.print(Padding(_options(group.get_usage(ctx)), 1), style="bold")
    if group.help:
        first, *rest = inspect.cleandoc(group.help).partition("\f")[0].split("\n\n")
        lines: list[Text] = [_markup(first.strip() if first.startswith("\b") else first.replace("\n", " ").strip())]
        if rest:
            lines += [Text(""), _markup("\n\n".join(rest), style="dim")]
        console.print(Padding(Align(Group(*lines), pad=False), (0, 1, 1, 1)))
    options = Table(highlight=True, show_header=False, expand=True, box=None, show_lines=False, leading=0,
                    border_style=None, row_styles=None, pad_edge=False, padding=(0, 1))
    for param in group.get_params(ctx):
        if getattr(param, "hidden", False):
            continue
        longs = [o for o in param.opts if "--" in o]
        shorts = [o for o in param.opts if "--" not in o]
        types = Text(style="bold yellow", overflow="fold")
        shown = param.display_type_rich(ctx=ctx)
        if shown is not None:
            types.append(shown)
        number_range = param._get_number_range_help_str()
        if number_range:
            types.append(f" [{number_range}]")
        options.add_row(_options(",".join(longs)), _options(",".join(shorts)), _negative(""), _negative(""),
                        _types(types), _option_help(param, ctx))
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
