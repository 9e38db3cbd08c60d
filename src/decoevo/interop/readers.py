"""Reading an eval tool's file by its format name (`--format promptfoo|inspect`)."""

from __future__ import annotations

from pathlib import Path

from ..errors import ConfigError
from .formats import IMPORT_FORMATS
from .imported import Imported
from .inspect_in import read_inspect
from .promptfoo_in import read_promptfoo


def read_imported(path: Path | str, fmt: str, *, question_var: str | None = None, strict: bool = False) -> Imported:
    """Read `path` as `fmt` (promptfoo or inspect); a DatasetError naming file, line and field otherwise.
    `strict`: a ConfigError when the file holds anything decoevo does not use (`Imported.summary` says what)."""
    if fmt == "promptfoo":
        got = read_promptfoo(Path(path), question_var=question_var)
    elif fmt == "inspect":
        if question_var is not None:
            raise ConfigError("--question-var is for --format promptfoo; an Inspect sample's question is its input")
        got = read_inspect(Path(path))
    else:
        raise ConfigError(f"unknown import format {fmt!r}; expected one of: {', '.join(IMPORT_FORMATS)}")
    if strict and got.summary is not None:
        got.summary.refuse_unused(got.source)
    return got
