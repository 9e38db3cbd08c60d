"""Replacing a whole file atomically: readers see the old or the new file, never half of one.
The one helper for every file decoevo writes whole (run files go through `rundir`, which adds its
no-symlink rule on top). And the one sha256 of a file (data, downloads, provenance)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path


def atomic_write_text(path: Path, text: str, *, fsync: bool = True) -> None:
    """Write `text` to a temp file beside `path` (never through a link), then rename it over `path`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
    except OSError as exc:  # the temp file is ours, not the user's: the message names the file they gave
        raise OSError(exc.errno, f"cannot be written ({exc.strerror})", str(path)) from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            if fsync:
                f.flush()
                os.fsync(f.fileno())
    except OSError as exc:  # a full disk: no half-written temp file left beside `path`, and `path` named
        tmp.unlink(missing_ok=True)
        raise named(exc, path) from None
    try:
        os.replace(tmp, path)  # replaces a link itself, never its target
    except OSError as exc:  # e.g. `path` is a directory: named, and no temp file left beside it
        tmp.unlink(missing_ok=True)
        raise OSError(exc.errno, f"cannot be written ({exc.strerror})", str(path)) from None


def named(exc: OSError, path: Path) -> OSError:
    """`exc` with the file it was about (a failed write() names none: "No space left on device")."""
    return exc if exc.filename else OSError(exc.errno, exc.strerror, str(path))


def sha256_file(path: Path) -> str:
    """The file's sha256, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()
