"""Text written into a promptfoo project so that promptfoo treats it as data, never as code.

promptfoo does three things to the strings of a config that a text from a model, a question file or a path
must never trigger:
- it renders prompts, assertion values and the grading prompt as nunjucks templates, and nunjucks reaches
  JavaScript (`range.constructor(...)`); a `{% raw %}` wrapper does not hold (the text may close it);
- a test variable or an assertion value that starts with `file://` (or `package:`) is loaded from that file,
  and a `.js`/`.py` file is run;
- a variable holding `{{ name }}` takes another variable's value, and one trailing newline is cut.

So a text goes in one of two forms (a text promptfoo only shows, such as a test's description, in a third,
`display_text`), each undone by promptfoo itself to the exact text:
- `template_text`: inside a template promptfoo renders (a prompt file's message, an assertion value). Every
  brace is written as an expression that renders to it (`{{ "{" }}`, `{{ "}" }}`), so no tag, comment or
  expression can start (nor a stray `#}` end one: nunjucks refuses that); a leading `file://` or `package:`
  starts with such an expression too, so no loader sees it.
- `var_value` + `var_ref`: a test variable. The value holds no `{`, `}`, leading loader prefix or trailing
  newline (each is written as an escape of `ESC` and a digit), and the template that uses it decodes it
  with nunjucks' own `replace` filter, which is in every environment promptfoo renders with.
"""

from __future__ import annotations

import re

ESC = "\u00a4"  # ¤: rare in prose, one character (the decoding below relies on that), visible when it occurs
_CODES = {"{": "1", "}": "2", "\n": "3", ":": "4"}
_LOADER_PREFIXES = ("file:", "package:")  # promptfoo loads `file://...` and `package:name:fn`
# `a | replace(...)`: every escape but ESC's own first, ESC's own last, so `¤0` + a digit reads back right
DECODE = "".join(f' | replace("{ESC}{code}", "{char.encode("unicode_escape").decode()}")'
                 for char, code in _CODES.items()) + f' | replace("{ESC}0", "{ESC}")'
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_BRACE = re.compile(r"[{}]")


def var_value(text: str) -> str:
    """`text` as a promptfoo test variable's value: inert to promptfoo, read back by `var_ref`'s filter."""
    out = text.replace(ESC, ESC + "0").replace("{", ESC + _CODES["{"]).replace("}", ESC + _CODES["}"])
    if out.endswith("\n"):
        out = out[:-1] + ESC + _CODES["\n"]
    if out.startswith(_LOADER_PREFIXES):
        colon = out.index(":")
        out = out[:colon] + ESC + _CODES[":"] + out[colon + 1:]
    return out


def var_ref(name: str, *filters: str) -> str:
    """The template expression that renders variable `name` (written by `var_value`) as its text, then
    through `filters` (nunjucks filter calls such as `replace("a", "b")`)."""
    if not _IDENTIFIER.match(name):
        raise ValueError(f"not a variable name: {name!r}")
    return "{{ " + name + DECODE + "".join(f" | {f}" for f in filters) + " }}"


def template_text(text: str) -> str:
    """`text` inside a template promptfoo renders, so that it renders to exactly `text`."""
    out = _BRACE.sub(lambda m: '{{ "' + m.group() + '" }}', text)
    if out.startswith(_LOADER_PREFIXES):
        out = '{{ "' + out[0] + '" }}' + out[1:]
    return out


def display_text(text: str) -> str:
    """A text promptfoo shows but never renders (a test's description, a metadata value): as it is, but for one
    space before a leading `file://` or `package:`, which promptfoo would load in its place."""
    return " " + text if text.startswith(_LOADER_PREFIXES) else text


def is_identifier(name: str) -> bool:
    """An environment variable's name as promptfoo's templates may hold it (`{{ env.NAME }}`)."""
    return bool(_IDENTIFIER.match(name))
