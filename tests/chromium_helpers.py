"""A real headless Chromium driven over the DevTools protocol, for the tests that look at a served page while a
run writes it (`report --watch`, the first screen): launch it, talk to its page, wait on what the page shows.
A toy-world run kept busy in a child process gives those pages something live to show."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from decoevo.rundir.progress import live_progress
from decoevo.testing.server import serve_app
from decoevo.testing.toy_server import toy_run_args, toy_server, write_toy_questions

ROOT = Path(__file__).resolve().parents[1]


def wait_for(condition: Callable[[], object], timeout: float = 120.0) -> None:
    """Until `condition()` holds; the bound only keeps a broken test from hanging (a loaded machine is slow)."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.05)


def chromium() -> str:
    """The browser's path; a test needing it is skipped where it is not installed, and fails in CI."""
    exe = shutil.which("chromium")
    if exe is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is missing: scripts/install.sh --dev installs Debian's chromium")
        pytest.skip("chromium is not installed (scripts/install.sh --dev installs it)")
    return exe


@contextmanager
def devtools_browser(profile: Path, *flags: str, url: str = "about:blank") -> Iterator[int]:
    """A headless Chromium opened on `url`, yielding its DevTools port; closed on the way out."""
    browser = subprocess.Popen(
        [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--remote-debugging-port=0", "--remote-allow-origins=*",
         *flags, f"--user-data-dir={profile}", url],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        active = profile / "DevToolsActivePort"
        wait_for(lambda: active.is_file() and bool(active.read_text().strip()), 60)
        yield int(active.read_text().split()[0])
    finally:
        browser.terminate()
        browser.wait(timeout=20)


class Page:
    """The browser's one page over its DevTools socket: commands in order, each answered before the next."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        self._ws = ws
        self._id = 0

    async def send(self, method: str, **params: Any) -> Any:
        self._id += 1
        await self._ws.send_json({"id": self._id, "method": method, "params": params})
        while True:
            msg = await self._ws.receive_json(timeout=30)
            if msg.get("id") == self._id:
                return msg.get("result", {})

    async def evaluate(self, expression: str) -> Any:
        """The expression's value, or None while the page is being replaced."""
        got = await self.send("Runtime.evaluate", expression=expression, returnByValue=True)
        return got.get("result", {}).get("value")

    async def until(self, expression: str, ready: Callable[[Any], bool], what: str, tries: int = 900) -> Any:
        """Evaluate until `ready(value)` (a bound on a condition, not a wait: a loaded machine takes seconds)."""
        value = None
        for _ in range(tries):
            value = await self.evaluate(expression)
            if ready(value):
                return value
            await asyncio.sleep(0.1)
        raise AssertionError(f"{what}: {str(value)[:500]}")


@asynccontextmanager
async def open_page(devtools_port: int) -> AsyncIterator[tuple[Page, str]]:
    """The browser's page and the browser's name (printed, so a test's output says which Chromium ran)."""
    async with aiohttp.ClientSession() as http:
        async with http.get(f"http://127.0.0.1:{devtools_port}/json/list") as r:
            target = next(t for t in await r.json() if t["type"] == "page")
        async with http.get(f"http://127.0.0.1:{devtools_port}/json/version") as r:
            browser = str((await r.json()).get("Browser", "?"))
        print(f"browser: {browser}")
        async with http.ws_connect(target["webSocketDebuggerUrl"], max_msg_size=0) as ws:
            yield Page(ws), browser


async def look_at(devtools_port: int, url: str, expression: str, ready: Callable[[Any], bool]) -> Any:
    """Navigate to `url` and return the expression's first value `ready` accepts."""
    async with open_page(devtools_port) as (page, _):
        await page.send("Page.navigate", url=url)
        return await page.until(expression, ready, f"{url} never showed what the test waits for")


class SlowRun:
    """A toy-world run in a child process against a toy server whose answers take a while, so it is
    still being written while the test looks at it; stopped at the end."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.runs = tmp / "runs"
        self.run = self.runs / "live"

    def __enter__(self) -> SlowRun:
        data = write_toy_questions(self.tmp / "toy.jsonl")
        self._server = serve_app(toy_server(delay_s=0.3).app())
        url = self._server.__enter__()
        env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "DECOEVO_CACHE": str(self.tmp / "cache.sqlite")}
        self.proc = subprocess.Popen([sys.executable, "-m", "decoevo", *toy_run_args(
            f"{url}/v1", data, self.runs, "live", steps=6, sets=("hyper.concurrency=1",))],
            cwd=self.tmp, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

        def answering() -> bool:  # running: its lock names it and it has answered a request
            progress = live_progress(self.run)
            return progress is not None and progress.calls > 0

        wait_for(answering)
        return self

    def __exit__(self, *exc: object) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=60)
        self._server.__exit__(None, None, None)


def json_value(value: Any) -> Any:
    """A JSON string the page returned, parsed (None stays None)."""
    return json.loads(value) if value else None
