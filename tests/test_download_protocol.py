"""decoevo.benchmarks.download against a scripted HTTP server on 127.0.0.1: the whole file's size on a
resumed (206) answer, a part file already whole (416), a conditional request (304 or another error), XHTML
pages, retries after a connection that could not be made, and where a URL's credentials go."""

from __future__ import annotations

import hashlib
import threading
import urllib.error
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from decoevo.benchmarks import download as dl
from decoevo.benchmarks.download import NotData, download, origin, part_path, unchanged

BODY = bytes(range(256)) * 400  # 100 KiB: more than one read of 64 KiB
SHA = hashlib.sha256(BODY).hexdigest()
Answer = Callable[[BaseHTTPRequestHandler], None]


@contextmanager
def scripted(*answers: Answer) -> Iterator[tuple[str, list[dict[str, str]]]]:
    """A server answering its n-th request with answers[n] (the last one repeats); yields its URL and the
    headers of every request."""
    seen: list[dict[str, str]] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            return None

        def do_GET(self) -> None:
            seen.append(dict(self.headers))
            answers[min(len(seen), len(answers)) - 1](self)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/q.jsonl", seen
    finally:
        server.shutdown()
        server.server_close()


def whole(h: BaseHTTPRequestHandler, *, drop_after: int | None = None) -> None:
    """200 with the body, or 206 from the Range asked for; `drop_after`: close after that many bytes."""
    start = int((h.headers.get("Range") or "bytes=0-").removeprefix("bytes=").split("-")[0])
    h.send_response(206 if start else 200)
    if start:
        h.send_header("Content-Range", f"bytes {start}-{len(BODY) - 1}/{len(BODY)}")
    h.send_header("Content-Length", str(len(BODY) - start))
    h.end_headers()
    h.wfile.write(BODY[start:] if drop_after is None else BODY[start:start + drop_after])
    h.close_connection = True


def status(code: int, **headers: str) -> Answer:
    def answer(h: BaseHTTPRequestHandler) -> None:
        h.send_response(code)
        for name, value in headers.items():
            h.send_header(name.replace("_", "-"), value)
        h.send_header("Content-Length", "0")
        h.end_headers()
    return answer


def test_a_resumed_download_counts_the_whole_file_and_reports_its_progress(tmp_path: Path) -> None:
    """Dropped twice: 200 cut at 40 KiB, 206 cut 20 KiB further, then the rest. Each progress report counts
    against the whole file's size (Content-Range's total, not the 206's Content-Length), so the cut 206 is
    not taken for a complete file, even without a checksum to catch it."""
    progress: list[tuple[int, int | None]] = []
    with scripted(lambda h: whole(h, drop_after=40_000), lambda h: whole(h, drop_after=20_000), whole) as (url, seen):
        got = download(url, tmp_path / "q.jsonl", None, on_progress=lambda n, t: progress.append((n, t)),
                       sleep=lambda _: None)
    assert (tmp_path / "q.jsonl").read_bytes() == BODY and got == SHA
    assert [h.get("Range") for h in seen] == [None, "bytes=40000-", "bytes=60000-"]
    assert progress and {t for _, t in progress} == {len(BODY)} and progress[-1][0] == len(BODY)


def test_a_part_file_already_whole_is_finished_when_the_server_answers_416(tmp_path: Path) -> None:
    """Killed after the last byte arrived but before the rename: the resume asks for the range from the end,
    the server says 416 (nothing there), and the part file is verified and kept."""
    dest = tmp_path / "q.jsonl"
    part_path(dest).write_bytes(BODY)
    with scripted(status(416, Content_Range=f"bytes */{len(BODY)}")) as (url, seen):
        assert download(url, dest, SHA, sleep=lambda _: None) == SHA
    assert dest.read_bytes() == BODY and not part_path(dest).exists()
    assert seen[0].get("Range") == f"bytes={len(BODY)}-"


def test_an_announced_size_over_the_ceiling_is_refused_before_the_body_is_read(tmp_path: Path) -> None:
    with scripted(whole) as (url, _), pytest.raises(dl.TooLarge, match="announces"):
        download(url, tmp_path / "q.jsonl", None, limit=len(BODY) - 1, sleep=lambda _: None)
    assert not list(tmp_path.iterdir())


def test_an_xhtml_page_is_refused_like_an_html_one(tmp_path: Path) -> None:
    page = (b'<?xml version="1.0"?>\n<!DOCTYPE html>'
            b'<html xmlns="http://www.w3.org/1999/xhtml"><body>Sign in</body></html>')

    def xhtml(h: BaseHTTPRequestHandler) -> None:
        h.send_response(200)
        h.send_header("Content-Type", "application/xhtml+xml; charset=utf-8")
        h.send_header("Content-Length", str(len(page)))
        h.end_headers()
        h.wfile.write(page)

    with scripted(xhtml) as (url, _), pytest.raises(NotData):
        download(url, tmp_path / "q.jsonl", None, sleep=lambda _: None)
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize(("code", "expected"), [(304, True), (404, False), (500, False)])
def test_a_conditional_request_is_unchanged_only_on_304(code: int, expected: bool) -> None:
    with scripted(status(code, ETag='"abc"')) as (url, seen):
        assert unchanged(url, '"abc"', None) is expected
    assert seen[0].get("If-None-Match") == '"abc"'


def test_a_connection_that_cannot_be_made_is_tried_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The first two attempts cannot connect (a URLError): the third downloads; only the last attempt's
    failure is the caller's error."""
    real_open, calls, waits = dl._open, [], []

    def flaky(request: object) -> object:
        calls.append(request)
        if len(calls) <= 2:
            raise urllib.error.URLError("connection refused")
        return real_open(request)  # type: ignore[arg-type]

    monkeypatch.setattr(dl, "_open", flaky)
    with scripted(whole) as (url, _):
        assert download(url, tmp_path / "q.jsonl", SHA, sleep=waits.append) == SHA
    assert len(calls) == 3 and len(waits) == 2


def test_a_url_with_credentials_is_requested_from_its_host_with_basic_authorization() -> None:
    request = dl._request("https://user:p%40ss@data.example.org:8443/q.jsonl")
    assert request.full_url == "https://data.example.org:8443/q.jsonl"
    assert request.get_header("Authorization") == "Basic dXNlcjpwQHNz"  # user:p@ss


def test_the_default_port_of_a_scheme_is_its_origins_port() -> None:
    assert origin("https://Data.example.org/q") == origin("https://data.example.org:443/r") == (
        "https", "data.example.org", 443)
    assert origin("http://data.example.org/q") == ("http", "data.example.org", 80)
