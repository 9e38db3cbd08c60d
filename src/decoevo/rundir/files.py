"""Low-level file operations inside a run directory: atomic whole-file writes, fsynced appends, and
reads that never write. No write follows a symbolic link: a run directory whose files point elsewhere
(copied with links, or planted) must not get those files overwritten or truncated."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ..errors import UserError
from ..fileio import atomic_write_text


class UnsafeRunPath(UserError):
    """A write inside a run directory would have gone through a symbolic link."""


def _check_no_links(root: Path, path: Path) -> None:
    """Refuse when `path` or any directory between `root` and it is a symbolic link."""
    try:
        rel = path.relative_to(root)
    except ValueError:
        raise UnsafeRunPath(f"{path}: outside the run directory {root}") from None
    current = root
    for part in rel.parts:
        current = current / part
        if current.is_symlink():
            raise UnsafeRunPath(f"{current}: is a symbolic link; decoevo does not write through links "
                                "inside a run directory (replace it with a regular file)")


def atomic_write(root: Path, path: Path, text: str) -> None:
    """Write `text` to `path` so a reader sees the old or the new file, never a mix (temp + rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    _check_no_links(root, path)
    atomic_write_text(path, text)


def append_line(root: Path, path: Path, line: str, *, fsync: bool = True) -> int:
    """Append one line; returns the file size. A kill (even SIGKILL) loses at most the line being written,
    since a written line is in the kernel; `fsync` also survives a power loss, at ~2 ms a line, which the
    call log (a line per answered request, thousands per run) skips: `sync` flushes it at each checkpoint."""
    path.parent.mkdir(parents=True, exist_ok=True)
    _check_no_links(root, path)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    try:
        os.write(fd, (line + "\n").encode("utf-8", "surrogatepass"))
        if fsync:
            os.fsync(fd)
        return os.fstat(fd).st_size
    finally:
        os.close(fd)


def sync(root: Path, path: Path) -> None:
    """Flush a file appended without fsync to the disk."""
    if path.is_file():
        _check_no_links(root, path)
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def truncate(root: Path, path: Path, size: int) -> None:
    _check_no_links(root, path)
    fd = os.open(path, os.O_WRONLY | os.O_NOFOLLOW)
    try:
        os.ftruncate(fd, size)
    finally:
        os.close(fd)


def dumps_line(obj: Any) -> str:
    """One JSON line. Lone surrogates (from a model or a question) are escaped, not an encoding crash."""
    return json.dumps(obj, ensure_ascii=False, default=str).encode("utf-8", "backslashreplace").decode("utf-8")


def complete_lines(data: bytes) -> list[bytes]:
    """The complete lines of a log: a last line without its newline (a write cut by a kill) is left out
    here, without touching the file (only the resume loader repairs it)."""
    end = data.rfind(b"\n")
    return [line for line in data[: end + 1].split(b"\n") if line.strip()] if end >= 0 else []


def read_text(path: Path) -> str:
    return path.read_text(encoding="utf-8")
