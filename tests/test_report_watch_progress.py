"""`decoevo report --watch` during a run: the running run shows as progress (step, phase, ETA), not as a
problem; the page answers only requests naming 127.0.0.1 or localhost on its port (a DNS-rebinding page
gets nothing), dropped connections print nothing, and a bad --interval is one line and exit 2. The page is
checked in a real headless Chromium while a toy-world run is being written."""

from __future__ import annotations

import asyncio
import http.client
import json
import socket
import struct
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from decoevo.cli import app
from decoevo.report import build_report
from decoevo.report.serve import ReportServer, allowed_hosts

from .chromium_helpers import SlowRun, devtools_browser, look_at


def _get(port: int, host: str, path: str = "/") -> tuple[int, str]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.putrequest("GET", path, skip_host=True)
    conn.putheader("Host", host)
    conn.endheaders()
    r = conn.getresponse()
    body = r.read().decode()
    conn.close()
    return r.status, body


def test_only_loopback_hosts_on_its_port_get_the_page(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with ReportServer([tmp_path / "empty"], port=0, interval=60) as server:
        port = int(server.url.rsplit(":", 1)[1].strip("/"))
        assert allowed_hosts(port) == {f"127.0.0.1:{port}", f"localhost:{port}"}
        for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"LOCALHOST:{port}"):
            assert _get(port, host)[0] == 200, host
            assert _get(port, host, "/version")[0] == 200, host
        for host in ("attacker.example", f"attacker.example:{port}", f"127.0.0.1:{port + 1}", "127.0.0.1", ""):
            status, body = _get(port, host)
            assert status == 403 and "Waiting for runs" not in body, (host, status)
            assert _get(port, host, "/version")[0] == 403


def test_a_dropped_connection_prints_nothing(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "empty").mkdir()
    with ReportServer([tmp_path / "empty"], port=0, interval=60) as server:
        port = int(server.url.rsplit(":", 1)[1].strip("/"))
        server._html *= 1 + (8 << 20) // max(len(server._html), 1)  # a page far larger than the socket buffers
        for _ in range(3):
            s = socket.create_connection(("127.0.0.1", port))
            s.sendall(f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
            s.recv(1)  # the answer has started
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            s.close()  # a reset mid-answer
        assert _get(port, f"127.0.0.1:{port}", "/version")[0] == 200  # still serving
    err = capfd.readouterr().err
    assert "Traceback" not in err and "BrokenPipe" not in err and "ConnectionReset" not in err, err


@pytest.mark.parametrize("value", ["inf", "nan", "0", "-1", "1e9"])
def test_a_bad_interval_is_one_line_and_exit_2(value: str, tmp_path: Path) -> None:
    out = CliRunner().invoke(app, ["report", str(tmp_path), "--watch", "--interval", value])
    assert out.exit_code == 2, out.output
    assert len(out.output.strip().splitlines()) == 1 and "--interval" in out.output, out.output
    assert "Traceback" not in out.output


def test_a_running_run_is_progress_not_a_problem(tmp_path: Path) -> None:
    with SlowRun(tmp_path) as slow:
        built = build_report([slow.run])
        (run,) = built.runs
        assert run.status == "running" and run.status_detail and "/6" in run.status_detail, run.status_detail
        assert "calls answered" in run.status_detail and "ETA" in run.status_detail
        assert not any("ledger" in p for p in built.problems), built.problems
        assert built.status_counts.get("running") == 1


_BODY_TEXT = "JSON.stringify([document.readyState, location.href, document.body ? document.body.innerText : ''])"


def _body_text(devtools: int, url: str) -> str:
    def loaded(value: Any) -> bool:
        state, href, text = json.loads(value) if value else ("", "", "")
        return bool(state == "complete" and href == url and text)

    return str(json.loads(asyncio.run(look_at(devtools, url, _BODY_TEXT, loaded)))[2])


def test_the_watch_page_in_chromium_during_a_run(tmp_path: Path) -> None:
    with SlowRun(tmp_path) as slow, ReportServer([slow.run], port=0, interval=0.5) as server:
        port = int(server.url.rsplit(":", 1)[1].strip("/"))
        # rebind.test resolves to 127.0.0.1, as an attacker's name does after a DNS rebinding
        with devtools_browser(tmp_path / "profile", "--host-resolver-rules=MAP rebind.test 127.0.0.1") as devtools:
            page = _body_text(devtools, server.url)
            foreign = _body_text(devtools, f"http://rebind.test:{port}/")
    assert "1 run in progress" in page and "live" in page, page[:2000]
    assert "ETA" in page and "calls answered" in page and "/6" in page, page[:2000]
    assert "ledger.json" not in page and "problem" not in page.split("in progress")[0].lower(), page[:2000]
    assert "only served to 127.0.0.1 and localhost" in foreign and "decoevo" not in foreign.lower(), foreign
