"""`report --watch`'s server (report/serve.py) in what a browser relies on: the page asks for `/version` at
the watch interval and never more often than five times a second, every answer states its length, and a
page without a closing body tag still gets the reload script. Each case failed a mutant that the mutation
bench found the older tests let pass (issue 46.2); on an empty folder, so no run is built."""

from __future__ import annotations

import http.client
import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from decoevo.report import serve
from decoevo.report.serve import ReportServer


def _server(tmp_path: Path, interval: float) -> ReportServer:
    (tmp_path / "empty").mkdir(exist_ok=True)
    return ReportServer([tmp_path / "empty"], port=0, interval=interval)


@pytest.mark.parametrize(("interval", "every_ms"), [(1.5, 1500), (0.2, 200), (0.05, 200)])
def test_the_page_polls_at_the_watch_interval_and_never_faster_than_every_200_ms(
        tmp_path: Path, interval: float, every_ms: int) -> None:
    server = _server(tmp_path, interval)
    try:
        assert server.refresh()
        polls = re.findall(r"\}, (\d+)\);", server.html())
        assert polls == [str(every_ms)], polls
    finally:
        server._httpd.server_close()


def test_every_answer_states_its_length(tmp_path: Path) -> None:
    with _server(tmp_path, 60) as server:
        port = int(server.url.rsplit(":", 1)[1].strip("/"))
        for path, host, status in (("/", f"127.0.0.1:{port}", 200), ("/version", f"localhost:{port}", 200),
                                   ("/", "attacker.example", 403)):
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            conn.putrequest("GET", path, skip_host=True)
            conn.putheader("Host", host)
            conn.endheaders()
            answer = conn.getresponse()
            body = answer.read()
            conn.close()
            assert answer.status == status
            # a client can tell a whole page from one cut short
            assert answer.getheader("Content-Length") == str(len(body)) and body, (path, answer.getheaders())


def test_a_page_without_a_closing_body_tag_still_gets_the_reload_script(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(serve, "build_report", lambda paths, title: SimpleNamespace(problems=()))
    monkeypatch.setattr(serve, "page", lambda report: "<p>a bare page</p>")
    server = _server(tmp_path, 60)
    try:
        assert server.refresh()
        html = server.html()
        assert html.startswith("<p>a bare page</p><script>") and html.endswith("</script>")
        assert 'fetch("/version"' in html and html.count("<script>") == 1
    finally:
        server._httpd.server_close()
