"""Errors a user can fix. Every user-facing command turns a `UserError` into one line and exit 2."""

from __future__ import annotations


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
