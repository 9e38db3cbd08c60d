"""Downloading one file safely: into `<name>.part`, resumed with an HTTP Range request after a dropped
connection (or restarted when the server ignores the range), checked against its sha256, and only then
renamed to its final name. A file under its final name is therefore always complete and verified.
"""

from __future__ import annotations

import http.client
import os
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

from ..fileio import sha256_file as sha256_of  # the name the data store and its tests use

CHUNK = 1 << 16
ATTEMPTS = 4  # one first try and three resumes
TIMEOUT = 60.0

# (bytes so far, total bytes or None) after every chunk; the CLI draws its progress bar from it.
Progress = Callable[[int, int | None], None]


class FetchError(Exception):
    """A download that could not be completed or verified; the message says what to do."""


class ChecksumMismatch(FetchError):
    pass


def part_path(dest: Path) -> Path:
    return dest.with_name(dest.name + ".part")


def _total(response: http.client.HTTPResponse) -> int | None:
    """The whole file's size: from Content-Range for a resumed (206) answer, else Content-Length."""
    if response.status == 206:
        tail = (response.headers.get("Content-Range") or "").rsplit("/", 1)[-1]  # bytes START-END/TOTAL
        return int(tail) if tail.isdigit() else None
    length = response.headers.get("Content-Length")
    return int(length) if length and length.isdigit() else None


def _attempt(url: str, part: Path, on_progress: Progress | None) -> bool:
    """One request; appends to `part` from where it ends. True when the body arrived complete."""
    have = part.stat().st_size if part.exists() else 0
    request = urllib.request.Request(url, headers={"User-Agent": "decoevo-data", "Accept-Encoding": "identity"})
    if have:
        request.add_header("Range", f"bytes={have}-")
    try:
        response = urllib.request.urlopen(request, timeout=TIMEOUT)
    except urllib.error.HTTPError as exc:
        if exc.code == 416 and have:  # the range starts at the end: the part file is already whole
            return True
        raise FetchError(f"{url}: the server answered HTTP {exc.code} {exc.reason}") from None
    with response:
        if have and response.status != 206:  # the server ignored the range: start over
            have = 0
        total = _total(response)
        with part.open("ab" if have else "wb") as out:
            got = have
            try:
                while block := response.read(CHUNK):
                    out.write(block)
                    got += len(block)
                    if on_progress is not None:
                        on_progress(got, total)
            except (http.client.HTTPException, ConnectionError, TimeoutError, urllib.error.URLError):
                return False  # a dropped connection: the next attempt resumes from what arrived
    return total is None or got >= total


def download(url: str, dest: Path, sha256: str | None, *, on_progress: Progress | None = None,
             sleep: Callable[[float], None] | None = None) -> str:
    """Fetch `url` to `dest`, verified against `sha256` when it is known; returns the file's sha256.

    A `.part` file left by an earlier, interrupted fetch is resumed. On a checksum mismatch nothing is
    kept (neither the part file nor a final file)."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = part_path(dest)
    for attempt in range(ATTEMPTS):
        try:
            if _attempt(url, part, on_progress):
                break
        except urllib.error.URLError as exc:
            if attempt == ATTEMPTS - 1:
                raise FetchError(f"{url}: {exc.reason}; run the same command again to resume") from None
        except (http.client.HTTPException, OSError) as exc:
            if attempt == ATTEMPTS - 1:
                raise FetchError(f"{url}: {exc}; run the same command again to resume") from None
        (sleep or time.sleep)(min(2.0**attempt, 10.0) * 0.5)
    else:
        raise FetchError(f"{url}: the connection kept dropping ({ATTEMPTS} attempts); "
                         f"{part.stat().st_size if part.exists() else 0} bytes are kept in {part}; run the same "
                         "command again to resume")
    got = sha256_of(part)
    if sha256 is not None and got != sha256:
        part.unlink(missing_ok=True)
        raise ChecksumMismatch(f"{url}: sha256 {got} does not match the expected {sha256}; nothing was kept. "
                               "The upstream file changed or the download was corrupted; if a mirror is set "
                               "(DECOEVO_DATA_MIRROR), check it")
    os.replace(part, dest)  # atomic on one file system: the final name only ever holds a verified file
    return got
