"""Low-level file operations inside a run directory: atomic whole-file writes, fsynced appends, and
reads that never write. No write follows a symbolic link: a run directory whose files point elsewhere
(copied with links, or planted) must not get those files overwritten or truncated.

The reads here are the one parser of decoevo's JSON, YAML and JSONL files: `RunReader` reads a run
through them, and the report reads the few files beside runs (a sweep's status.json) with them too.
Each raises `RunReadError` with a message naming the file (and line), never a bare parser error."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import weakref
from pathlib import Path
from typing import Any

import pydantic_core
import yaml

from ..errors import UserError
from ..fileio import atomic_write_text, named


class RunReadError(UserError):
    """A file of a run directory that cannot be read as what it should be; the message names it."""


class UnsafeRunPath(UserError):
    """A write inside a run directory would have gone through a symbolic link."""


def _link_refused(path: Path | str) -> UnsafeRunPath:
    return UnsafeRunPath(f"{path}: is a symbolic link; decoevo does not write through links "
                         "inside a run directory (replace it with a regular file)")


def _check_no_links(root: Path, path: Path) -> None:
    """Refuse when `path` or any directory between `root` and it is a symbolic link."""
    try:
        rel = path.relative_to(root)
    except ValueError:
        raise UnsafeRunPath(f"{path}: outside the run directory {root}") from None
    current = str(root)
    for part in rel.parts:  # one lstat a component, on strings (pathlib's objects cost more than the call)
        current = os.path.join(current, part)
        if os.path.islink(current):
            raise _link_refused(current)


def make_parent(root: Path, path: Path) -> None:
    """`path`'s folders made, after checking that none on the way is a link: made first, `mkdir -p` would
    create folders wherever a linked folder (RUN/audits -> elsewhere) points before the check refused."""
    _check_no_links(root, path)
    path.parent.mkdir(parents=True, exist_ok=True)
    _check_no_links(root, path)  # a link made meanwhile: refused before anything is written


def atomic_write(root: Path, path: Path, text: str) -> None:
    """Write `text` to `path` so a reader sees the old or the new file, never a mix (temp + rename)."""
    make_parent(root, path)
    atomic_write_text(path, text)


def append_line(root: Path, path: Path, line: str, *, fsync: bool = True) -> None:
    """Append one line with the file opened for it alone (a writer of many lines keeps an `AppendFiles`).
    A kill (even SIGKILL) loses at most the line being written, since a written line is in the kernel;
    `fsync` also survives a power loss, at ~2 ms a line, which the call log (a line per answered request,
    thousands per run) skips: `sync` flushes it at each checkpoint."""
    files = AppendFiles(root)
    try:
        files.line(path, line, fsync=fsync)
    finally:
        files.close()


_APPEND = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC


def open_append(root: Path, path: Path) -> int:
    """A descriptor appending to `path` (created when absent), never through a link. The file itself is
    refused by O_NOFOLLOW at the open (a link planted there fails the open, so nothing is written through
    it); the folders between `root` and it, when there are any, are checked (an lstat each). Its folder is
    made only when the open finds it missing: a log line costs one open, not a check of every component
    and a `mkdir -p` (thousands of lines a run)."""
    if os.path.dirname(path) != os.fspath(root):  # strings: a Path's parent and == cost more than the open
        _check_no_links(root, path.parent)
    try:
        try:
            return os.open(path, _APPEND, 0o644)
        except FileNotFoundError:  # its folder is missing: made, after the same checks as a whole file's
            make_parent(root, path)
            return os.open(path, _APPEND, 0o644)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise _link_refused(path) from None
        raise named(exc, path) from None


class AppendFiles:
    """The append-only logs of one directory (the call log, the request journal, the transcripts, the
    events), each opened once and kept open until `close()`, instead of an `open` and a `close` for every
    line (three files a paid call, thousands a run).

    What an open per line guaranteed is kept: the open refuses a link at the file (O_NOFOLLOW), and before
    every line the name is looked up without following a link (one `lstat`, cheaper than an open and a
    close) and must still be the file the descriptor holds; the folders between the directory and a file
    in a subfolder are checked too, as before. A log deleted, renamed or replaced (by a link, say) since it
    was opened is opened again by its name: a deleted one is made again, a link put in its place is refused
    at the next line, and no line goes to a file no longer in the directory. Each line is one `write` to the
    kernel, as before: a kill (even SIGKILL) loses at most the line being written. Descriptors are closed
    by `close()` (the run's end) or, for an owner that never calls it, when the object is collected."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._open: dict[str, tuple[int, int, int]] = {}  # path -> (descriptor, its inode, its device)
        self._root_str = os.fspath(root)
        weakref.finalize(self, _close_fds, self._open)

    def append(self, path: Path, data: bytes, *, fsync: bool = False) -> None:
        key = os.fspath(path)
        held = self._open.get(key)
        if held is not None:
            try:
                if os.path.dirname(key) != self._root_str:  # a folder on the way swapped for a link
                    _check_no_links(self.root, path.parent)
                now = os.lstat(key)
                same = now.st_ino == held[1] and now.st_dev == held[2]
            except FileNotFoundError:
                same = False
            except BaseException:
                self._drop(key)
                raise
            if not same:  # not the file opened (deleted, moved, a link): the name is opened again
                self._drop(key)
                held = None
        if held is None:
            fd = open_append(self.root, path)
            st = os.fstat(fd)
            held = self._open[key] = (fd, st.st_ino, st.st_dev)
        write_all(held[0], data, path)
        if fsync:
            try:
                os.fsync(held[0])
            except OSError as exc:
                raise named(exc, path) from None

    def line(self, path: Path, text: str, *, fsync: bool = False) -> None:
        """`text` and a newline (lone surrogates kept, as the JSON lines escape them)."""
        self.append(path, (text + "\n").encode("utf-8", "surrogatepass"), fsync=fsync)

    def _drop(self, key: str) -> None:
        held = self._open.pop(key, None)
        if held is not None:
            os.close(held[0])

    def close(self) -> None:
        _close_fds(self._open)


def _close_fds(held: dict[str, tuple[int, int, int]]) -> None:
    while held:
        _key, (fd, _ino, _dev) = held.popitem()
        with contextlib.suppress(OSError):
            os.close(fd)


def write_all(fd: int, data: bytes, path: Path) -> None:
    """All of `data`: write() may take part of it (a disk filling up); then the rest, or the error that
    stopped it, naming `path` (a failed write() names no file: "No space left on device")."""
    view = memoryview(data)
    try:
        while view:
            view = view[os.write(fd, view):]
    except OSError as exc:
        raise named(exc, path) from None


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


# One encoder each, made once: json.dumps with any option makes a new JSONEncoder on every call.
_LINE = json.JSONEncoder(ensure_ascii=False, default=str)


def dumps_line(obj: Any) -> str:
    """One JSON line. Lone surrogates (from a model or a question) are escaped, not an encoding crash."""
    return _LINE.encode(obj).encode("utf-8", "backslashreplace").decode("utf-8")


def dumps_json_line(obj: Any) -> str:
    """`dumps_line` of a value made of JSON's own types alone (dicts, lists, str, int, float, bool, None: what
    `model_dump(mode="json")` gives), for the lines written on every paid call. pydantic-core's encoder writes
    a paid call's ~7 KiB transcript line ~5x faster than the standard library's; it writes the same value
    (compact, NaN and Infinity as the standard library writes them). A lone surrogate, which it refuses, takes
    `dumps_line`'s escapes instead. Other types (a datetime, an enum) it would write its own way: not for them."""
    try:
        return pydantic_core.to_json(obj, inf_nan_mode="constants").decode("utf-8")
    except pydantic_core.PydanticSerializationError:
        return dumps_line(obj)


def dumps_indented(obj: Any, depth: int = 2, indent: int = 2) -> str:
    """JSON with its outer `depth` levels of objects and arrays laid out one member a line, as
    `json.dumps(indent=indent)` lays out every level, and what is deeper on one line. The same value
    (ensure_ascii off, `default=str`); indent=2 at every level uses Python's pure-Python encoder, which
    made writing a checkpoint and a gate record (thousands of scores) a visible share of a run's CPU."""
    def put(value: Any, level: int) -> str:
        pad = "\n" + " " * (indent * (level + 1))
        if level < depth and value and isinstance(value, dict) and all(isinstance(k, str) for k in value):
            members = [f"{pad}{_LINE.encode(k)}: {put(v, level + 1)}" for k, v in value.items()]
        elif level < depth and value and isinstance(value, list | tuple):
            members = [pad + put(v, level + 1) for v in value]
        else:
            return _LINE.encode(value)
        ends = "{}" if isinstance(value, dict) else "[]"
        return ends[0] + ",".join(members) + "\n" + " " * (indent * level) + ends[1]

    return put(obj, 0)


def complete_lines(data: bytes) -> list[bytes]:
    """The complete lines of a log: a last line without its newline (a write cut by a kill) is left out
    here, without touching the file (only the resume loader repairs it)."""
    end = data.rfind(b"\n")
    return [line for line in data[: end + 1].split(b"\n") if line.strip()] if end >= 0 else []


def read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise RunReadError(f"{path}: missing") from None
    except UnicodeDecodeError as e:
        raise RunReadError(f"{path}: not UTF-8 text (byte {e.start})") from None
    except OSError as e:
        raise RunReadError(f"{path}: cannot be read ({e.strerror or e})") from None


def read_json(path: Path) -> Any:
    try:
        return json.loads(read_text(path))
    except json.JSONDecodeError as e:
        raise RunReadError(f"{path}: not valid JSON (line {e.lineno}: {e.msg})") from None
    except RecursionError:
        raise RunReadError(f"{path}: JSON nested too deeply") from None


def read_yaml(path: Path) -> Any:
    try:
        return yaml.safe_load(read_text(path))
    except yaml.YAMLError as e:
        raise RunReadError(f"{path}: not valid YAML ({e})") from None
    except RecursionError:
        raise RunReadError(f"{path}: YAML nested too deeply") from None


def read_jsonl(path: Path, problems: list[str] | None = None, *, log: bool = True) -> list[dict[str, Any]]:
    """The records of a JSONL file as objects ([] when absent). A bad line is an error naming its number
    or, when `problems` is given, is recorded there and skipped. For a `log` (appended line by line) a
    last line without its newline is a write cut by a kill and is left out; a file written whole has no
    such tail, so there every line counts."""
    if not path.is_file():
        return []
    try:
        data = path.read_bytes()
    except OSError as e:
        raise RunReadError(f"{path}: cannot be read ({e.strerror or e})") from None
    lines = complete_lines(data) if log else [line for line in data.split(b"\n") if line.strip()]
    out = []
    for n, raw in enumerate(lines, 1):
        try:
            record = json.loads(raw)
            message = "" if isinstance(record, dict) else f"{path}:{n}: expected a JSON object"
        except (ValueError, RecursionError) as e:
            message = f"{path}:{n}: not valid JSON ({str(e)[:80]})"
        if message:
            if problems is None:
                raise RunReadError(message)
            problems.append(f"{message}; line skipped")
            continue
        out.append(record)
    return out
