"""`decoevo config [KEY]`: every configuration key from the command line (the wheel ships no docs), read
from the models by `engine.config_reference`, the same source as docs/configuration.md."""

from __future__ import annotations

import textwrap

import typer
from rich.markup import escape

from ..engine.config_reference import Row, lookup, nearest_key, sections
from ..presets import PRESETS
from .common import JsonOption, console, current_width, fail, guarded
from .display import print_json


def _plain(text: str) -> str:
    return text.replace("`", "")


def _say(line: str = "") -> None:
    console.print(escape(line), highlight=False, soft_wrap=True)


def _wrapped(text: str, indent: str = "    ") -> list[str]:
    width = max(40, min(current_width(console), 100))
    return textwrap.wrap(_plain(text), width=width, initial_indent=indent, subsequent_indent=indent,
                         break_on_hyphens=False, break_long_words=False) or [indent.rstrip()]


def _block(row: Row) -> list[str]:
    allowed = _plain(row.allowed)
    head = f"{row.key} = {_plain(row.default)}"
    kind = f"{row.type}" + (f"; {allowed}" if allowed else "")
    return [head, *_wrapped(f"{kind}. {row.description}")]


def _json_row(row: Row) -> dict[str, str]:
    return {"key": row.key, "type": row.type, "default": _plain(row.default), "allowed": _plain(row.allowed),
            "description": row.description}


@guarded
def config_cmd(
    key: str = typer.Argument(None, help="A key (hyper.steps), a section (hyper, lm.models.NAME) or nothing: "
                              "every key."),
    as_json: bool = JsonOption,
) -> None:
    """Show every configuration key: its default, allowed values and meaning (what --set and --config take).

    NAME in lm.models.NAME stands for a model's own name, e.g. default."""
    if key is None:
        parts = sections()
        if as_json:
            print_json({"keys": [_json_row(r) for s in parts for r in s.rows], "presets": PRESETS})
            return
        for section in parts:
            _say(f"{section.key or 'top level'}:")
            for row in section.rows:
                _say(f"  {row.key} = {_plain(row.default)}")
        _say()
        for line in _wrapped(f"presets (--preset): {', '.join(PRESETS)}. `decoevo config KEY`, or a section "
                             "(e.g. hyper), gives each key's type, allowed values and meaning.", ""):
            _say(line)
        return
    if not key.strip().strip("."):  # an unset shell variable: not a request for the top-level section
        fail(f"no configuration key {key!r}: name a key (hyper.steps) or a section (hyper), or give none to "
             "list every key")
    found = lookup(key)
    if found is None:
        near = nearest_key(key)
        fail(f"no configuration key '{key}'" + (f"; did you mean {near}?" if near else "")
             + " (`decoevo config` lists every key)")
    if found.section is not None:
        section = found.section
        if as_json:
            print_json({"section": section.key, "keys": [_json_row(r) for r in section.rows]})
            return
        doc = " ".join((section.model.__doc__ or "").split())
        _say(f"{section.key or 'top level'} ({section.model.__name__})")
        for line in _wrapped(doc, "") if doc else []:
            _say(line)
        for row in section.rows:
            _say()
            for line in _block(row):
                _say(line)
        return
    assert found.row is not None
    if as_json:
        print_json({**_json_row(found.row), "presets": dict(found.presets)})
        return
    for line in _block(found.row):
        _say(line)
    if found.presets:
        for line in _wrapped("presets: " + ", ".join(f"{name} {value}" for name, value in found.presets)
                             + "; the others keep the default"):
            _say(line)
