"""Downloading one file safely: into `<name>.part`, resumed with an HTTP Range request after a dropped
connection (or restarted when the server ignores the range), checked against its sha256, and only then
renamed to its final name. A file under its final name is therefore always complete and verified.

Refused on the way: a body larger than the caller's ceiling (an endless or oversized answer stops at the
ceiling, and its part file is deleted), and an HTML page (a login, error or index page served with 200).
A URL's credentials (`user:password@`) go only to its own origin: a redirect to another scheme, host or
port is followed without them.
"""

from __future__ import annotations

import base64
import http.client
import os
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..fileio import sha256_file as sha256_of  # the name the data store and its tests use
from ..redact import redact_url

CHUNK = 1 << 16
ATTEMPTS = 4  # one first try and three resumes
TIMEOUT = 60.0

# (bytes so far, total bytes or None) after every chunk; the CLI draws its progress bar from it.
Progress = Callable[[int, int | None], None]


class FetchError(Exception):
    """A download that could not be completed or verified; the message says what to do."""


class ChecksumMismatch(FetchError):
    pass


class TooLarge(FetchError):
    """The body went past the ceiling the caller set; nothing is kept."""


class NotData(FetchError):
    """The server answered with an HTML page instead of the file; nothing is kept."""


class Unreachable(FetchError):
    """No connection to the host at all (offline, DNS, refused): the caller may add what else to try."""


HTML_START = (b"<!doctype html", b"<html", b"<head", b"<body")


def looks_like_html(head: bytes) -> bool:
    """The first bytes of a body: an HTML page (after a byte-order mark and white space), never data."""
    return head.removeprefix(b"\xef\xbb\xbf").lstrip()[:16].lower().startswith(HTML_START)


def shown(url: str) -> str:
    """A URL as messages print it: its credentials masked (decoevo.redact), and on one line."""
    one_line = "".join(c if c.isprintable() else f"\\x{ord(c):02x}" for c in url)
    return redact_url(one_line)


def _mib(n: int) -> str:
    return f"{n / 2**20:.1f} MiB"


def part_path(dest: Path) -> Path:
    return dest.with_name(dest.name + ".part")


def _total(response: http.client.HTTPResponse) -> int | None:
    """The whole file's size: from Content-Range for a resumed (206) answer, else Content-Length."""
    if response.status == 206:
        tail = (response.headers.get("Content-Range") or "").rsplit("/", 1)[-1]  # bytes START-END/TOTAL
        return int(tail) if tail.isdigit() else None
    length = response.headers.get("Content-Length")
    return int(length) if length and length.isdigit() else None


def _too_large(url: str, part: Path, limit: int, what: str) -> TooLarge:
    part.unlink(missing_ok=True)
    return TooLarge(f"{shown(url)}: {what} more than the {_mib(limit)} this file may have; nothing was kept (a "
                    "wrong URL, or a server that does not stop sending)")


def origin(url: str) -> tuple[str, str, int | None]:
    """(scheme, host, port) with the scheme's default port filled in: what credentials are given for."""
    parts = urllib.parse.urlsplit(url)
    port = parts.port or {"http": 80, "https": 443}.get(parts.scheme.lower())
    return parts.scheme.lower(), (parts.hostname or "").lower(), port


class _SameOriginCredentials(urllib.request.HTTPRedirectHandler):
    """urllib copies every header to a redirect's target, Authorization too: a URL's `user:password@`
    would reach whatever host the first one redirects to. Here it follows only a same-origin redirect."""

    def redirect_request(self, req: urllib.request.Request, fp: Any, code: int, msg: str,
                         headers: Any, newurl: str) -> urllib.request.Request | None:
        new = super().redirect_request(req, fp, code, msg, headers, newurl)
        if new is not None and origin(new.full_url) != origin(req.full_url):
            new.remove_header("Authorization")
        return new


def _open(request: urllib.request.Request) -> http.client.HTTPResponse:
    # Built per request: the proxy settings (HTTPS_PROXY, NO_PROXY) are read when a download starts.
    response: http.client.HTTPResponse = urllib.request.build_opener(_SameOriginCredentials).open(
        request, timeout=TIMEOUT)
    return response


def _request(url: str) -> urllib.request.Request:
    """A GET of `url`. urllib cannot send a URL's `user:password@` (it looks the whole netloc up as the host
    name, "Name or service not known"): it is sent as HTTP Basic authorization instead."""
    parts = urllib.parse.urlsplit(url)
    headers = {"User-Agent": "decoevo-data", "Accept-Encoding": "identity"}
    if parts.username is not None or parts.password is not None:
        pair = f"{urllib.parse.unquote(parts.username or '')}:{urllib.parse.unquote(parts.password or '')}"
        headers["Authorization"] = "Basic " + base64.b64encode(pair.encode("utf-8")).decode("ascii")
        url = urllib.parse.urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))
    return urllib.request.Request(url, headers=headers)


def unchanged(url: str, etag: str | None, last_modified: str | None) -> bool | None:
    """Whether the file at `url` is still the one a download saw, asked with a conditional request:
    True (304 Not Modified, or the same ETag / Last-Modified), False (changed, or nothing to compare
    with), None when the host cannot be reached at all."""
    if not etag and not last_modified:
        return False
    request = _request(url)
    if etag:
        request.add_header("If-None-Match", etag)
    if last_modified:
        request.add_header("If-Modified-Since", last_modified)
    try:
        with _open(request) as response:  # not read: closed unread
            now = (response.headers.get("ETag"), response.headers.get("Last-Modified"))
    except urllib.error.HTTPError as exc:
        return exc.code == 304  # another error: treated as changed, so the download says what it is
    except (urllib.error.URLError, http.client.HTTPException, OSError):
        return None
    if etag:
        return now[0] == etag
    return now[1] == last_modified


def _html(url: str, part: Path) -> NotData:
    part.unlink(missing_ok=True)
    return NotData(f"{shown(url)}: the server answered with an HTML page, not the data file; nothing was kept (a "
                   "login, error or index page: check the URL or the mirror)")


def _attempt(url: str, part: Path, on_progress: Progress | None, limit: int | None,
             meta: dict[str, str] | None) -> bool:
    """One request; appends to `part` from where it ends. True when the body arrived complete."""
    have = part.stat().st_size if part.exists() else 0
    request = _request(url)
    if have:
        request.add_header("Range", f"bytes={have}-")
    try:
        response = _open(request)
    except urllib.error.HTTPError as exc:
        if exc.code == 416 and have:  # the range starts at the end: the part file is already whole
            return True
        raise FetchError(f"{shown(url)}: the server answered HTTP {exc.code} {exc.reason}") from None
    with response:
        if have and response.status != 206:  # the server ignored the range: start over
            have = 0
        total = _total(response)
        if limit is not None and total is not None and total > limit:
            raise _too_large(url, part, limit, f"the server announces {_mib(total)},")
        if (response.headers.get("Content-Type") or "").split(";")[0].strip().lower() in ("text/html",
                                                                                         "application/xhtml+xml"):
            raise _html(url, part)
        if meta is not None:  # what a later reuse compares with (see datastore._from_url)
            meta.clear()
            meta.update({k: v for k in ("ETag", "Last-Modified") if (v := response.headers.get(k))})
        with part.open("ab" if have else "wb") as out:
            got = have
            try:
                while block := response.read(CHUNK):
                    out.write(block)
                    got += len(block)
                    if limit is not None and got > limit:
                        out.close()
                        raise _too_large(url, part, limit, "the body ran to")
                    if on_progress is not None:
                        on_progress(got, total)
            except (http.client.HTTPException, ConnectionError, TimeoutError, urllib.error.URLError):
                return False  # a dropped connection: the next attempt resumes from what arrived
    return total is None or got >= total


def download(url: str, dest: Path, sha256: str | None, *, on_progress: Progress | None = None,
             sleep: Callable[[float], None] | None = None, limit: int | None = None,
             meta: dict[str, str] | None = None) -> str:
    """Fetch `url` to `dest`, verified against `sha256` when it is known; returns the file's sha256.

    A `.part` file left by an earlier, interrupted fetch is resumed. On a checksum mismatch, a body over
    `limit` bytes or an HTML page nothing is kept (neither the part file nor a final file). `meta`, when
    given, receives the answer's ETag and Last-Modified."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = part_path(dest)
    for attempt in range(ATTEMPTS):
        try:
            if _attempt(url, part, on_progress, limit, meta):
                break
        except urllib.error.URLError as exc:
            if attempt == ATTEMPTS - 1:
                if part.exists() and part.stat().st_size > 0:
                    raise FetchError(f"{shown(url)}: {exc.reason}; run the same command again to resume") from None
                raise Unreachable(f"{shown(url)}: cannot be reached ({exc.reason})") from None
        except (http.client.HTTPException, OSError) as exc:
            if attempt == ATTEMPTS - 1:
                raise FetchError(f"{shown(url)}: {exc}; run the same command again to resume") from None
        (sleep or time.sleep)(min(2.0**attempt, 10.0) * 0.5)
    else:
        raise FetchError(f"{shown(url)}: the connection kept dropping ({ATTEMPTS} attempts); "
                         f"{part.stat().st_size if part.exists() else 0} bytes are kept in {part}; run the same "
                         "command again to resume")
    with part.open("rb") as head:
        if looks_like_html(head.read(64)):
            raise _html(url, part)
    got = sha256_of(part)
    if sha256 is not None and got != sha256:
        part.unlink(missing_ok=True)
        raise ChecksumMismatch(f"{shown(url)}: sha256 {got} does not match the expected {sha256}; nothing was kept. "
                               "The upstream file changed or the download was corrupted; if a mirror is set "
                               "(DECOEVO_DATA_MIRROR), check it")
    os.replace(part, dest)  # atomic on one file system: the final name only ever holds a verified file
    return got
