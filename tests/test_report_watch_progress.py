"""`decoevo report --watch` during a run: the running run shows as progress (step, phase, ETA), not as a
problem; the page answers only requests naming 127.0.0.1 or localhost on its port (a DNS-rebinding page
gets nothing), dropped connections print nothing, and a bad --interval is one line and exit 2. The page is
checked in a real headless Chromium while a toy-world run is being written."""

from __future__ import annotations

import asyncio
import http.client
import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from typer.testing import CliRunner

from decoevo.cli import app
from decoevo.report import build_report
from decoevo.report.serve import ReportServer, allowed_hosts
from decoevo.rundir.progress import live_progress
from decoevo.testing.server import serve_app
from decoevo.testing.toy_server import toy_run_args, toy_server, write_toy_questions

from .test_report_watch import _cdp

ROOT = Path(__file__).resolve().parents[1]


def _get(port: int, host: str, path: str = "/") -> tuple[int, str]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.putrequest("GET", path, skip_host=True)
    conn.putheader("Host", host)
    conn.endheaders()
    r = conn.getresponse()
    body = r.read().decode()
    conn.close()
    return r.status, body


def _wait(condition: Any, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.05)


class _SlowRun:
    """A toy-world run in a child process against a toy server whose answers take a while, so it is
    still being written while the test looks at it; stopped at the end."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.runs = tmp / "runs"
        self.run = self.runs / "live"

    def __enter__(self) -> _SlowRun:
        data = write_toy_questions(self.tmp / "toy.jsonl")
        self._server = serve_app(toy_server(delay_s=0.3).app())
        url = self._server.__enter__()
        env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "DECOEVO_CACHE": str(self.tmp / "cache.sqlite")}
        self.proc = subprocess.Popen([sys.executable, "-m", "decoevo", *toy_run_args(
            f"{url}/v1", data, self.runs, "live", steps=6, sets=("hyper.concurrency=1",))],
            cwd=self.tmp, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        # running: its lock names it and it has answered a request
        _wait(lambda: live_progress(self.run) is not None and live_progress(self.run).calls > 0)  # type: ignore[union-attr]
        return self

    def __exit__(self, *exc: object) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=60)
        self._server.__exit__(None, None, None)


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
    with _SlowRun(tmp_path) as slow:
        built = build_report([slow.run])
        (run,) = built.runs
        assert run.status == "running" and run.status_detail and "/6" in run.status_detail, run.status_detail
        assert "calls answered" in run.status_detail and "ETA" in run.status_detail
        assert not any("ledger" in p for p in built.problems), built.problems
        assert built.status_counts.get("running") == 1


async def _look(devtools_port: int, url: str) -> str:
    async with aiohttp.ClientSession() as http_:
        async with http_.get(f"http://127.0.0.1:{devtools_port}/json/list") as r:
            target = next(t for t in await r.json() if t["type"] == "page")
        async with http_.ws_connect(target["webSocketDebuggerUrl"], max_msg_size=0) as ws:
            ids = [0]
            await _cdp(ws, "Page.navigate", ids, url=url)
            seen = ""
            for _ in range(300):  # until the page has loaded
                got = await _cdp(ws, "Runtime.evaluate", ids, returnByValue=True, expression=(
                    "JSON.stringify([document.readyState, location.href, "
                    "document.body ? document.body.innerText : ''])"))
                seen = got.get("result", {}).get("value") or seen
                state, href, text = json.loads(seen) if seen else ("", "", "")
                if state == "complete" and href == url and text:
                    return str(text)
                await asyncio.sleep(0.1)
    raise AssertionError(f"{url} never loaded: {seen[:500]}")


def test_the_watch_page_in_chromium_during_a_run(tmp_path: Path) -> None:
    exe = shutil.which("chromium")
    if exe is None:
        pytest.skip("chromium is not installed (scripts/install.sh --dev installs it)")
    with _SlowRun(tmp_path) as slow, ReportServer([slow.run], port=0, interval=0.5) as server:
        port = int(server.url.rsplit(":", 1)[1].strip("/"))
        profile = tmp_path / "profile"
        # rebind.test resolves to 127.0.0.1, as an attacker's name does after a DNS rebinding
        browser = subprocess.Popen(
            [exe, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--remote-debugging-port=0", "--remote-allow-origins=*",
             "--host-resolver-rules=MAP rebind.test 127.0.0.1", f"--user-data-dir={profile}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            active = profile / "DevToolsActivePort"
            _wait(lambda: active.is_file() and bool(active.read_text().strip()), 60)
            devtools = int(active.read_text().split()[0])
            page = asyncio.run(_look(devtools, server.url))
            foreign = asyncio.run(_look(devtools, f"http://rebind.test:{port}/"))
        finally:
            browser.terminate()
            browser.wait(timeout=20)
    assert "1 run in progress" in page and "live" in page, page[:2000]
    assert "ETA" in page and "calls answered" in page and "/6" in page, page[:2000]
    assert "ledger.json" not in page and "problem" not in page.split("in progress")[0].lower(), page[:2000]
    assert "only served to 127.0.0.1 and localhost" in foreign and "decoevo" not in foreign.lower(), foreign
