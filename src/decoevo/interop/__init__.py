"""decoevo in and out of the eval tools users already run.

In: a promptfoo config (tests -> questions, prompt -> initial solver skill, `llm-rubric` texts -> the
task specification) or an Inspect AI dataset (JSONL/CSV samples) becomes decoevo's own inputs.
Out: a run's shipped skill and its co-evolved generator's rubrics become a promptfoo config or an Inspect AI
task that the tool runs as is. Nothing here imports either tool: the files are plain YAML, JSONL and Python.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .formats import IMPORT_FORMATS

if TYPE_CHECKING:
    from .imported import Imported
    from .readers import read_imported

__all__ = ["IMPORT_FORMATS", "Imported", "read_imported"]


def __getattr__(name: str) -> Any:
    """`read_imported` loads the readers (YAML with line numbers, promptfoo's and Inspect's formats) and
    `Imported` its record when first asked for: a run that imports nothing checks `IMPORT_FORMATS` only
    (tests/test_startup.py)."""
    if name == "read_imported":
        from .readers import read_imported

        return read_imported
    if name == "Imported":
        from .imported import Imported

        return Imported
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
