"""Reading an imported file within bounds, and its parsed values as plain JSON data.

A size bound before anything is parsed: an 80 MB promptfoo config took minutes and 700 MB to parse as
YAML whatever `--limit` said. The bound is said with the way to raise it. Values decoevo keeps (a test's
vars and assertions, a sample's metadata) are copied as plain JSON: text keys, finite numbers, nesting
within a bound (a YAML anchor may make a value contain itself), so questions.jsonl is always valid JSON.
"""

from __future__ import annotations

import csv
import io
import math
import os
import re
from pathlib import Path
from typing import Any

from ..errors import ConfigError, DatasetError
from ..userfiles import read_user_text

MAX_MB_ENV = "DECOEVO_IMPORT_MAX_MB"
DEFAULT_MAX_MB = 10.0  # YAML parses at 0.2-0.5 MB/s on a loaded 2-core machine: a minute at most
MAX_DEPTH = 64


def max_import_bytes() -> int:
    raw = os.environ.get(MAX_MB_ENV, "").strip()
    if not raw:
        return int(DEFAULT_MAX_MB * 1e6)
    try:
        mb = float(raw)
    except ValueError:
        mb = math.nan
    if not math.isfinite(mb) or mb <= 0:
        raise ConfigError(f"{MAX_MB_ENV}={raw!r} must be a positive number of megabytes")
    return int(mb * 1e6)


def read_import_text(path: Path, what: str) -> str:
    """A file's text, refused (one line naming the size, the bound and how to raise it) when larger than
    decoevo reads from an imported file."""
    try:
        size = path.stat().st_size if path.is_file() else None
    except OSError:
        size = None  # read_user_text names what is wrong with it
    bound = max_import_bytes()
    if size is not None and size > bound:
        raise ConfigError(f"{what} {path} is {size / 1e6:.1f} MB, more than decoevo reads from an imported file "
                          f"({bound / 1e6:g} MB); split it, or raise the bound with {MAX_MB_ENV}=N (megabytes)")
    return read_user_text(path, what)


def plain(value: Any, path: Path, line: int | None, field: str) -> Any:
    """`value` as plain JSON data (dict with text keys, list, text, finite number, bool, None), or a
    DatasetError naming the field that is not: a non-finite number, binary data, a date object, a key that
    clashes with another once written as text, nesting deeper than MAX_DEPTH."""
    return _plain(value, path, line, field, 0)


def _plain(value: Any, path: Path, line: int | None, field: str, depth: int) -> Any:
    if depth > MAX_DEPTH:
        raise DatasetError(path, line, field, f"is nested more than {MAX_DEPTH} levels deep (or contains itself)")
    if value is None or isinstance(value, bool | str | int):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise DatasetError(path, line, field, f"is {value} (not a finite number); write it as text or a number")
        return value
    if isinstance(value, list | tuple):
        return [_plain(v, path, getattr(value, "line", None) or line, f"{field}[{i}]", depth + 1)
                for i, v in enumerate(value)]
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        inner = getattr(value, "line", None) or line
        for k, v in value.items():
            if not isinstance(k, str | int | float | bool) and k is not None:
                raise DatasetError(path, inner, field, f"has a key of type {type(k).__name__}; keys are text")
            key = k if isinstance(k, str) else ("null" if k is None else str(k).lower() if isinstance(k, bool)
                                                 else str(k))
            if key in out:
                raise DatasetError(path, inner, field, f"names the key {key!r} twice")
            out[key] = _plain(v, path, inner, f"{field}.{key}", depth + 1)
        return out
    raise DatasetError(path, line, field, f"holds a {type(value).__name__} value; decoevo keeps text, numbers, "
                       "lists and mappings")


def csv_records(path: Path, text: str) -> list[tuple[int, dict[str, str]]]:
    """A CSV file's rows under its header, each with the line it starts on. A quote never closed (which a
    lenient reader turns into one cell holding the rest of the file) is refused naming the line it opens
    on; so is a row with more cells than the header has columns."""
    reader = csv.reader(io.StringIO(text), strict=True)
    header: list[str] | None = None
    rows: list[tuple[int, dict[str, str]]] = []
    ended = 0  # the last line of the previous row
    try:
        for cells in reader:
            start, ended = ended + 1, reader.line_num
            if not cells:
                continue
            if header is None:
                twice = sorted({c for c in cells if cells.count(c) > 1})
                if twice:
                    raise DatasetError(path, start, None, f"the header names the column {twice[0]!r} twice")
                header = cells
                continue
            if len(cells) > len(header):
                raise DatasetError(path, start, None, "has more cells than the header has columns")
            rows.append((start, {h: (cells[i] if i < len(cells) else "") for i, h in enumerate(header)}))
    except csv.Error as exc:
        start = ended + 1
        problem = ("a quoted cell opens on this line and is never closed" if "unexpected end of data" in str(exc)
                   else f"not valid CSV ({exc})")
        raise DatasetError(path, start, None, problem) from None
    return rows


SECRET_KEY = re.compile(r"(?i)(api[_-]?key|secret|password|passwd|authorization|cookie|"
                        r"(access|auth|api|bearer|session|refresh)[_-]?token)\Z")


def without_secrets(value: Any) -> tuple[Any, int]:
    """Plain data with every entry whose key names a credential (`apiKey`, `Authorization`, `password`,
    ...) left out, and how many were: decoevo never writes a key anywhere, a run directory included.
    (`apiKeyEnvar`, a variable's name, stays.)"""
    if isinstance(value, list):
        parts = [without_secrets(v) for v in value]
        return [p for p, _ in parts], sum(n for _, n in parts)
    if isinstance(value, dict):
        out, dropped = {}, 0
        for k, v in value.items():
            if SECRET_KEY.search(str(k)):
                dropped += 1
                continue
            out[k], n = without_secrets(v)
            dropped += n
        return out, dropped
    return value, 0
