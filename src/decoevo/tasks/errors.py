"""Input errors that name the file, the line and the field, so the user knows what to fix."""

from __future__ import annotations

from pathlib import Path

from ..lm.errors import ConfigError


class DatasetError(ConfigError):
    def __init__(self, path: Path | str, line: int | None, field: str | None, problem: str) -> None:
        where = f"{path}" + (f", line {line}" if line is not None else "") + (f", field '{field}'" if field else "")
        # one line whatever the data holds (a key or a quoted value may contain line breaks)
        super().__init__(f"{where}: {problem}".replace("\r", "\\r").replace("\n", "\\n"))
        self.path, self.line, self.field, self.problem = str(path), line, field, problem
