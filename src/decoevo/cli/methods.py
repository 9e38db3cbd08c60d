"""`decoevo methods`: the methods, each a configuration of the one engine."""

from __future__ import annotations

from rich.table import Table

from .common import JsonOption, console, guarded
from .display import print_json, show_table


@guarded
def list_methods(as_json: bool = JsonOption) -> None:
    """List the methods (a method is a configuration of the one engine)."""
    from ..methods import METHODS

    if as_json:
        print_json([{"name": m.name, "group": m.group, "description": m.description} for m in METHODS.values()])
        return
    table = Table(title="methods")
    table.add_column("name", no_wrap=True)
    table.add_column("group")
    table.add_column("what it does")
    for m in METHODS.values():
        table.add_row(m.name, m.group, m.description)
    show_table(console, table)
