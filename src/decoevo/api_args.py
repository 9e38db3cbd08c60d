"""Checks of the Python API's arguments at the boundary: a wrong type or value is an `ArgumentError`
(a `UserError` that is also a TypeError/ValueError) naming the argument, before anything is written or
paid, never an AttributeError from deep inside. Pure functions; `api.py` calls them first."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .domain import Question
from .errors import ArgumentError, ConfigError
from .lm import LMConfig, ModelSpec


def kind(value: object) -> str:
    return type(value).__name__


def need(fn: str, name: str, value: object, types: tuple[type, ...], what: str) -> None:
    """`value` is None or one of `types` (a bool is never taken for an int)."""
    if value is None:
        return
    if (isinstance(value, bool) and bool not in types) or not isinstance(value, types):
        raise ArgumentError(f"{fn}: {name} must be {what}, not {kind(value)}")


def need_text(fn: str, name: str, value: object) -> None:
    need(fn, name, value, (str,), "a string")
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:  # a lone surrogate ("\ud800"): no file or request can hold it
            raise ArgumentError(f"{fn}: {name} holds {value[exc.start:exc.end]!a} at index {exc.start}, a lone "
                                "UTF-16 surrogate, which is not valid Unicode text") from None


def need_mapping(fn: str, name: str, value: object) -> None:
    need(fn, name, value, (Mapping,), "a mapping (a dict)")


def need_model(fn: str, name: str, value: object) -> None:
    need(fn, name, value, (ModelSpec,), "a decoevo.ModelSpec")


def need_callable(fn: str, name: str, value: object) -> None:
    if value is not None and not callable(value):
        raise ArgumentError(f"{fn}: {name} must be callable, not {kind(value)}")


def need_path(fn: str, name: str, value: object) -> None:
    need(fn, name, value, (str, os.PathLike), "a path (str or pathlib.Path)")


def question_record(q: Question | Mapping[str, Any]) -> dict[str, Any]:
    if isinstance(q, Mapping):
        return dict(q)
    record: dict[str, Any] = {"id": q.id, "task": q.task,
                              "prompt": [{"role": t.role, "content": t.content} for t in q.turns]}
    if q.gold is not None:
        record["gold"] = q.gold.model_dump(mode="json")
    if q.meta:
        record["meta"] = q.meta
    return record


def question_lines(fn: str, questions: object) -> str:
    """The questions as JSONL text, or an ArgumentError naming the first one that cannot be."""
    if isinstance(questions, str | bytes | bytearray | Mapping) or not isinstance(questions, Sequence):
        raise ArgumentError(f"{fn}: questions must be a list of Question objects or of dicts in the question "
                            f"format ({{'id': ..., 'prompt': ...}}), not {kind(questions)}")
    if not questions:
        raise ConfigError(f"{fn}: no questions given")
    lines = []
    for i, q in enumerate(questions):
        if not isinstance(q, Question | Mapping):
            raise ArgumentError(f"{fn}: questions[{i}] must be a Question or a dict in the question format "
                                f"({{'id': ..., 'prompt': ...}}), not {kind(q)}")
        record = question_record(q)
        if not all(isinstance(k, str) for k in record):
            raise ArgumentError(f"{fn}: questions[{i}] has a key that is not a string")
        try:
            line = json.dumps(record, ensure_ascii=False, allow_nan=False)
            line.encode("utf-8")
        except (TypeError, ValueError, RecursionError) as exc:  # sets, objects, NaN, lone surrogates
            raise ArgumentError(f"{fn}: questions[{i}] cannot be written as a JSON question: "
                                f"{str(exc).splitlines()[0][:200]}") from None
        lines.append(line + "\n")
    return "".join(lines)


def check_callbacks(fn: str, callbacks: object) -> list[object]:
    if isinstance(callbacks, str | bytes | Mapping) or not isinstance(callbacks, Sequence):
        raise ArgumentError(f"{fn}: callbacks must be a list of objects with on_event and/or on_call methods, "
                            f"not {kind(callbacks)}")
    for i, cb in enumerate(callbacks):
        if not any(callable(getattr(cb, m, None)) for m in ("on_event", "on_call")):
            raise ArgumentError(f"{fn}: callbacks[{i}] ({kind(cb)}) has neither an on_event nor an on_call method")
    return list(callbacks)


def check_lm(fn: str, lm: object) -> None:
    need(fn, "lm", lm, (LMConfig, ModelSpec, Mapping), "a decoevo.ModelSpec, an LMConfig or a mapping of one")


def new_run_dir(fn: str, run_dir: object) -> Path | None:
    """The directory a new run may be written to: new, or empty. A directory holding anything (a
    user's own questions.jsonl, say) is refused, so the API never writes over a file of the user's."""
    need_path(fn, "run_dir", run_dir)
    if run_dir is None:
        return None
    from .rundir import RunReader

    path = Path(run_dir).resolve()  # type: ignore[arg-type]
    if RunReader(path).exists():
        raise ConfigError(f"{path} already holds a run; continue it with decoevo.resume({str(path)!r})")
    if path.exists() and not path.is_dir():
        raise ArgumentError(f"{fn}: run_dir {path} is a file; pass a new or empty directory")
    if path.is_dir() and (held := sorted(p.name for p in path.iterdir())):
        shown = ", ".join(held[:3]) + (", ..." if len(held) > 3 else "")
        raise ConfigError(f"{fn}: run_dir {path} is not empty ({shown}); pass a new or empty directory (a run "
                          "writes its questions and records there, and never over files of yours)")
    return path
