"""Readers for the evaluation files a run directory may hold (docs/evaluation-files.md).

Each reader returns a validated model or raises `ReportInputError` naming the file and the field, so a
malformed file shows up in the report as a named problem instead of as a silent gap or a crash. Fields
the report does not use (per-item responses, grades, criteria) are not validated here; their writers are.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from ..rundir.records import AlignmentFile, DynamicsFile, DynamicsPoint, EvalFile

__all__ = ["AlignmentFile", "DynamicsFile", "DynamicsPoint", "EvalFile", "ReportInputError", "load_alignment",
           "load_dynamics", "load_eval", "read_json", "read_jsonl", "read_yaml"]

M = TypeVar("M", bound=BaseModel)


class ReportInputError(ValueError):
    """A file under a run or sweep directory that cannot be read; the message names it."""


def read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as e:
        raise ReportInputError(f"{path}: missing") from e
    except (OSError, UnicodeDecodeError) as e:
        raise ReportInputError(f"{path}: cannot be read ({e})") from e
    except json.JSONDecodeError as e:
        raise ReportInputError(f"{path}: not valid JSON (line {e.lineno}: {e.msg})") from e
    except RecursionError as e:
        raise ReportInputError(f"{path}: nested too deeply to read") from e


def read_yaml(path: Path) -> Any:
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError as e:
        raise ReportInputError(f"{path}: missing") from e
    except (OSError, UnicodeDecodeError) as e:
        raise ReportInputError(f"{path}: cannot be read ({e})") from e
    except yaml.YAMLError as e:
        raise ReportInputError(f"{path}: not valid YAML ({e})") from e
    except RecursionError as e:
        raise ReportInputError(f"{path}: nested too deeply to read") from e


def read_jsonl(path: Path, problems: list[str] | None = None) -> list[dict[str, Any]]:
    """Records of a JSONL file; [] when absent. A bad line is an error naming its number, or, when a
    `problems` list is given, is recorded there and skipped so the other lines still count."""
    if not path.is_file():
        return []
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ReportInputError(f"{path}: cannot be read ({e})") from e
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            if not isinstance(record, dict):
                raise ReportInputError(f"{path}:{n}: expected a JSON object")
        except (json.JSONDecodeError, RecursionError, ReportInputError) as e:
            error = e if isinstance(e, ReportInputError) else ReportInputError(
                f"{path}:{n}: not valid JSON ({getattr(e, 'msg', 'nested too deeply')})")
            if problems is None:
                raise error from e
            problems.append(f"{error}; line skipped")
            continue
        out.append(record)
    return out


def _validate(model: type[M], data: Any, path: Path) -> M:
    try:
        return model.model_validate(data)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(top level)"
        more = f" (and {e.error_count() - 1} more)" if e.error_count() > 1 else ""
        raise ReportInputError(f"{path}: field '{where}': {first['msg']}{more}") from e


def load_eval(path: Path) -> EvalFile:
    return _validate(EvalFile, read_json(path), path)


def load_dynamics(path: Path) -> DynamicsFile:
    return _validate(DynamicsFile, read_json(path), path)


def load_alignment(path: Path) -> AlignmentFile:
    return _validate(AlignmentFile, read_json(path), path)
