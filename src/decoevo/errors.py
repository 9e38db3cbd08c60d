"""Errors a user can fix. Every user-facing command turns a `UserError` into one line and exit 2."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

# pydantic's prefixes of a validator's own message ("Value error, unknown method 'x'")
_PYDANTIC_PREFIX = re.compile(r"^(Value error|Assertion failed), ")

# How a run stopped by the experiment's cost cap says so (its summary's `stopped`, its error): written by
# lm/spend.py, read by the sweep (it resumes such a run once the cap allows) and the report (a partial run).
CAP_STOP = "experiment cost cap reached"


class UserError(Exception):
    """Bad input, configuration or state, with a message that names the file, flag or field to fix."""


class ConfigError(UserError, ValueError):
    """Bad configuration (a flag, a config key, a data file)."""


class DatasetError(ConfigError):
    """A question file that cannot be used, naming the file, the line and the field to fix."""

    def __init__(self, path: object, line: int | None, field: str | None, problem: str) -> None:
        where = f"{path}" + (f", line {line}" if line is not None else "") + (f", field '{field}'" if field else "")
        # one line whatever the data holds (a key or a quoted value may contain line breaks)
        super().__init__(f"{where}: {problem}".replace("\r", "\\r").replace("\n", "\\n"))
        self.path, self.line, self.field, self.problem = str(path), line, field, problem


class ArgumentError(ConfigError, TypeError):
    """A Python API argument of the wrong type or value, named with what it should be. Caught as a
    `UserError` (one line), and as the `TypeError` or `ValueError` Python code expects."""


def validation_summary(exc: Exception, *, explain: Callable[[dict[str, Any]], str | None] | None = None,
                       unknown_key: Callable[[str], str] | None = None, prefix: str = "") -> str:
    """A pydantic `ValidationError` as one line of `field: problem` parts. Never its input: pydantic's text
    quotes a cut repr of the input, which can end in the tail of a password (`'mo...7890abc@host/v1'`)
    that no pattern recognises as one. Nor pydantic's own wording ("Value error, ..."): the problem is
    said as the validator said it. `explain(error)` may word an error better (a key's whole range);
    `unknown_key(dotted key)`: what to say of a key the model does not have. `prefix`: where the model
    sits in the user's configuration (`lm.`), so each key is named as the user writes it."""
    errors = getattr(exc, "errors", None)
    if not callable(errors):
        return " ".join(str(exc).split())
    parts = []
    for err in errors()[:5]:
        loc = ".".join(p if isinstance(p, str) and p.isprintable() and p.strip() == p and p else repr(p)
                       for p in err["loc"])
        loc = f"{prefix}{loc}" if loc else prefix.rstrip(".")
        if err["type"] == "extra_forbidden":
            msg = unknown_key(loc) if unknown_key else "unknown key (check the spelling)"
        else:
            msg = (explain(err) if explain else None) or _PYDANTIC_PREFIX.sub("", err["msg"]).rstrip(".")
        parts.append(f"{loc}: {msg}" if loc else msg)
    return " ".join("; ".join(parts).split())
