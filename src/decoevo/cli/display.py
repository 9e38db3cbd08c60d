"""Tables that fit where they are printed, and JSON for scripts (the command line's output helpers).

A table is shown whole when it fits the console's width (a terminal, or `COLUMNS`). Printed to a file or
a pipe with no width given, it is shown whole at its natural width: a log keeps every value. When it does
not fit, the columns that read zero or nothing in every row are left out (named under the table); when it
still does not fit, each row becomes a block of `column value` pairs wrapped to the width. No cell is ever
cut to "…".
"""

from __future__ import annotations

import io
import json
import re
import sys
import textwrap
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from .common import columns_now

_EMPTY = {"", "0", "0.0", "-", "$0.0000"}


def _plain(cell: Any) -> str:
    return cell.plain if isinstance(cell, Text) else str(cell)


def table_data(table: Table) -> tuple[list[str], list[list[str]]]:
    """A rich table's headers and rows as plain text."""
    headers = [_plain(c.header) for c in table.columns]
    columns = [[_plain(cell) for cell in c.cells] for c in table.columns]
    return headers, [list(row) for row in zip(*columns, strict=True)] if columns else []


def _render(table: Table, width: int) -> str:
    out = Console(file=io.StringIO(), width=width, color_system=None, legacy_windows=False)
    out.print(table)
    return out.file.getvalue()  # type: ignore[attr-defined]


def natural_width(table: Table) -> int:
    return max((len(line) for line in _render(table, 10_000).splitlines()), default=0)


_BOX = re.compile(r"[\s\u2500-\u257f]+")  # whitespace and the box-drawing characters rich draws with


def _fits(table: Table, width: int) -> bool:
    """Whole at `width`: nothing cut to "…" and no word folded across lines (rich folds a word longer
    than its column, so `licence` would read `licenc` / `e`)."""
    if natural_width(table) <= width:
        return True
    shown = _render(table, width)
    if "…" in shown:
        return False
    tokens = set(_BOX.split(shown))
    headers, rows = table_data(table)
    return all(word in tokens for cell in [*headers, *(c for row in rows for c in row)] for word in cell.split())


def _subset(table: Table, keep: list[int], caption: str | None) -> Table:
    headers, rows = table_data(table)
    out = Table(title=table.title, caption=caption)
    for i in keep:
        col = table.columns[i]
        out.add_column(headers[i], justify=col.justify, no_wrap=col.no_wrap)
    for row in rows:
        out.add_row(*(row[i] for i in keep))
    return out


def vertical(table: Table, width: int, keys: int = 1) -> str:
    """Each row as its first `keys` cells on a line, then `column value` pairs wrapped to `width`."""
    headers, rows = table_data(table)
    lines = [str(table.title)] if table.title else []
    for row in rows:
        lines.append("  ".join(c for c in row[:keys] if c))
        line = " "
        for header, cell in zip(headers[keys:], row[keys:], strict=True):
            if not cell:
                continue
            pair = f"  {header} {cell}"
            if len(line) + len(pair) > width and line.strip():
                lines.append(line)
                line = " "
            line += pair
            if len(line) > width:  # one pair longer than the line: wrap it at spaces (a URL stays whole)
                *full, line = textwrap.wrap(line, width, initial_indent="   ", subsequent_indent="    ",
                                            break_long_words=False, break_on_hyphens=False)
                lines.extend(full)
        if line.strip():
            lines.append(line)
    return "\n".join(lines)


def width_of(console: Console) -> int | None:
    """The width a table must fit: COLUMNS, a terminal's, or the console's own; None for a file or pipe
    given no width (rich would assume 80 there)."""
    given = getattr(console, "_width", None) is not None  # Console(width=...), or COLUMNS when it was made
    if console.is_terminal or given or columns_now():
        return console.width  # a console's own width wins: the table is drawn on it
    return None


def show_table(console: Console, table: Table, keys: int = 1) -> None:
    """Print `table` so that no cell is cut (see the module's docstring); `keys`: the columns that name a
    row in the vertical layout."""
    width = width_of(console)
    if width is None:
        whole = _render(table, max(natural_width(table), 20)).rstrip("\n")
        console.print(Text(whole), soft_wrap=True, crop=False)  # rich would clamp a table to 80
        return
    if _fits(table, width):
        console.print(table)
        return
    headers, rows = table_data(table)
    empty = [i for i in range(keys, len(headers)) if all(row[i].strip() in _EMPTY for row in rows)]
    if empty:
        keep = [i for i in range(len(headers)) if i not in empty]
        caption = "not shown, 0 in every row: " + ", ".join(headers[i] for i in empty)
        slim = _subset(table, keep, caption)
        if _fits(slim, width):
            console.print(slim)
            return
        table = _subset(table, keep, None)
        console.print(escape(vertical(table, width, keys)), highlight=False, soft_wrap=True)
        console.print(escape(caption), highlight=False)
        return
    console.print(escape(vertical(table, width, keys)), highlight=False, soft_wrap=True)


def print_json(value: Any) -> None:
    """One JSON document on stdout (what `--json` prints), whatever the console's width."""
    sys.stdout.write(json.dumps(value, ensure_ascii=False, default=str) + "\n")
    sys.stdout.flush()
