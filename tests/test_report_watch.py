"""`decoevo report --watch`: the report served on 127.0.0.1, rebuilt as the runs write, and reloaded by a
real headless Chromium without anyone touching it (driven over the DevTools protocol)."""

from __future__ import annotations

import asyncio
import json
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from decoevo.report.serve import ReportServer

from .chromium_helpers import devtools_browser, json_value, open_page
from .report_helpers import make_sweep, write_eval


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, ""


@pytest.fixture(scope="module")
def sweep(tmp_path_factory) -> Path:
    return make_sweep(tmp_path_factory.mktemp("watch"), methods=("decoevo",), seeds=(0,), benchmarks=("healthbench",))


def test_serves_on_loopback_and_rebuilds_only_when_a_run_changes(sweep, tmp_path):
    run = sweep / "runs" / "healthbench" / "decoevo-s0"
    before = {p: p.stat().st_mtime_ns for p in sweep.rglob("*") if p.is_file()}
    with ReportServer([sweep], port=0, interval=60) as server:  # refreshed by hand here
        assert server.url.startswith("http://127.0.0.1:")
        status, page = _get(server.url)
        assert status == 200 and 'class="figure"' in page and "/version" in page
        assert _get(server.url + "version") == (200, "1")
        assert _get(server.url + "config.yaml")[0] == 404  # nothing but the page and its version
        assert not server.refresh()  # nothing changed: no rebuild
        write_eval(run, "test", "healthbench", "decoevo", 0, 61.5)
        assert server.refresh() and _get(server.url + "version") == (200, "2")
        assert "61.5" in _get(server.url)[1]
    (run / "eval" / "test.json").unlink()
    (run / "eval").rmdir()
    assert {p: p.stat().st_mtime_ns for p in sweep.rglob("*") if p.is_file()} == before  # it wrote nothing


async def _drive(devtools_port: int, run: Path) -> dict[str, Any]:
    """Open a run's section, write its test score, and wait for the page to reload itself with it."""
    # `loaded`: the whole page is parsed and its scripts ran. A reloaded page can show the new score while the
    # parser is still on its way to the live script that reopens the runs (seen with Chromium 156 on a loaded
    # machine): the restore is judged only once the page has loaded.
    probe = ("JSON.stringify({figures: [...document.querySelectorAll('main svg.figure')].filter(f => "
             "f.getBoundingClientRect().width > 100).length, open: [...document.querySelectorAll('details.run[open]')]"
             ".map(d => d.id), marker: window.marker === 1, score: document.body.innerText.includes('61.5'), "
             "loaded: document.readyState === 'complete'})")
    blank = {"figures": 0, "open": [], "marker": False, "score": False, "loaded": False}
    async with open_page(devtools_port) as (page, browser):

        async def look() -> dict[str, Any]:
            return json_value(await page.evaluate(probe)) or blank  # none while a page is being replaced

        async def until(ready: Any) -> dict[str, Any]:
            return json_value(await page.until(probe, lambda v: bool(v) and ready(json.loads(v)), "page")) or blank

        first = await until(lambda s: s["figures"] and s["loaded"])
        anchor = await page.evaluate(
            "(() => { window.marker = 1; const d = document.querySelector('details.run'); d.open = true; "
            "return d.id; })()")
        opened = await look()
        write_eval(run, "test", "healthbench", "decoevo", 0, 61.5)
        t0 = time.monotonic()
        after = await until(lambda s: s["score"] and s["loaded"])
        return {"first": first, "opened": opened, "after": after, "anchor": anchor,
                "seconds": time.monotonic() - t0, "browser": browser}


def test_the_page_reloads_itself_in_headless_chromium_when_a_run_writes(sweep, tmp_path):
    run = sweep / "runs" / "healthbench" / "decoevo-s0"
    with ReportServer([sweep], port=0, interval=0.3) as server:
        try:
            with devtools_browser(tmp_path / "profile", "--window-size=1280,2000", url=server.url) as devtools:
                result = asyncio.run(_drive(devtools, run))
        finally:
            for leftover in (run / "eval" / "test.json",):
                leftover.unlink(missing_ok=True)
    first, opened, after = result["first"], result["opened"], result["after"]
    assert first["figures"] >= 1 and not first["score"], first  # the page as served, laid out
    assert opened["open"] == [result["anchor"]] and opened["marker"]
    assert after["score"], result  # the new score is on the page without anyone reloading it
    assert not after["marker"], result  # ...because the page reloaded itself (the old window's marker is gone)
    assert after["open"] == [result["anchor"]], result  # and the run that was open is open again
    assert after["figures"] > first["figures"], result  # the new test-score figure


def test_watch_refuses_bad_input_in_one_line(sweep, tmp_path):
    import socket

    from typer.testing import CliRunner

    from decoevo.cli import app

    missing = CliRunner().invoke(app, ["report", str(tmp_path / "nope"), "--watch"])
    assert missing.exit_code == 2 and "not a directory" in " ".join(missing.output.split())
    assert "Traceback" not in missing.output
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        busy = CliRunner().invoke(app, ["report", str(sweep), "--watch", "--port", str(port)])
    assert busy.exit_code == 2 and f"--port {port}: cannot listen" in " ".join(busy.output.split()), busy.output
