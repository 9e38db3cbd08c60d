"""What decoevo learns about an endpoint and keeps beside the request cache (endpoints.json, capacity.json):
a JSON object of entries by endpoint, read forgivingly and written whole, best effort."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def read_entries(path: Path | None) -> dict[str, dict[str, Any]]:
    """The file's entries (objects by key); {} for no file or a damaged one, which only costs a new probe."""
    if path is None or not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {k: v for k, v in data.items() if isinstance(v, dict)} if isinstance(data, dict) else {}


def write_entries(path: Path, entries: dict[str, dict[str, Any]]) -> None:
    """Replace the file atomically (two processes that learn at once both leave a valid file); an unwritable
    cache directory keeps what was learnt in this process only."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(entries, indent=1, sort_keys=True), encoding="utf-8")
        os.replace(tmp, path)
    except OSError:
        pass
