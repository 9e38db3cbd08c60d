"""`decoevo report --watch`: the report served on 127.0.0.1, rebuilt when the runs under it change.

A standard-library HTTP server in a thread, answering two paths: `/` (the report, with a short script
added) and `/version` (a counter bumped at each rebuild). The script asks for `/version` every few seconds
and reloads the page when it changed, keeping the runs that were open. The runs are polled by their
files' sizes and modification times; nothing is written, to the runs or anywhere else. Bound to the
loopback address only, and answering only requests whose Host header names it (127.0.0.1 or localhost on
its port), so a web page that rebinds its own name to 127.0.0.1 cannot read it: the report shows prompts,
skills and model replies. A run still being written shows as progress (rundir/progress.py).
"""

from __future__ import annotations

import html
import os
import threading
from collections.abc import Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from .discover import ReportInputError
from .model import build_report
from .render import page

HOST = "127.0.0.1"
# A dropped connection (a closed tab, a reload mid-answer) is the client's business: nothing is printed.
_DROPPED = (BrokenPipeError, ConnectionResetError, ConnectionAbortedError)


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: object, client_address: object) -> None:
        import sys

        if isinstance(sys.exc_info()[1], _DROPPED):
            return
        super().handle_error(request, client_address)  # type: ignore[arg-type]


def allowed_hosts(port: int) -> frozenset[str]:
    """The Host headers the page is served to: the loopback names on its own port. A page on another
    site that rebinds its own name to 127.0.0.1 sends its own name, and gets nothing (DNS rebinding)."""
    names = ("127.0.0.1", "localhost")
    return frozenset({f"{n}:{port}" for n in names} | (set(names) if port == 80 else set()))

_LIVE = """<script>(() => {{
  const key = "decoevo-open-runs", version = "{version}";
  for (const id of JSON.parse(sessionStorage.getItem(key) || "[]")) {{
    const d = document.getElementById(id); if (d) d.open = true;
  }}
  setInterval(async () => {{
    try {{
      const now = (await (await fetch("/version", {{cache: "no-store"}})).text()).trim();
      if (now !== version) {{
        sessionStorage.setItem(key, JSON.stringify([...document.querySelectorAll("details[open][id]")].map(d => d.id)));
        location.reload();
      }}
    }} catch (e) {{}}  // the server stopped: keep the last page
  }}, {interval_ms});
}})();</script>"""


def fingerprint(paths: Iterable[Path]) -> tuple[tuple[str, int, int], ...]:
    """Every file under `paths` with its size and modification time: what changes when a run writes."""
    out = []
    for root in paths:
        for folder, _, files in os.walk(root):
            for name in files:
                full = os.path.join(folder, name)
                try:
                    st = os.stat(full)
                except OSError:  # removed between the listing and the stat
                    continue
                out.append((full, st.st_size, st.st_mtime_ns))
    return tuple(sorted(out))


class ReportServer:
    """Serves the report over `paths` on 127.0.0.1:`port` (0: any free port) and rebuilds it when their
    files change, checking every `interval` seconds. `start()` returns once the first page is built."""

    def __init__(self, paths: Iterable[Path | str], title: str = "DecoEvo report", port: int = 0,
                 interval: float = 2.0) -> None:
        self.paths = tuple(Path(p) for p in paths)
        self.title, self.interval = title, interval
        self.version = 0
        self.problems: tuple[str, ...] = ()
        self._html = ""
        self._seen: tuple[tuple[str, int, int], ...] | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._httpd = _Server((HOST, port), self._handler())
        self._threads: list[threading.Thread] = []

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self._httpd.server_address[1]}/"

    def html(self) -> str:
        with self._lock:
            return self._html

    def refresh(self) -> bool:
        """Rebuild the page if a file under the paths changed since the last build; True if it did."""
        now = fingerprint(self.paths)
        if now == self._seen:
            return False
        try:
            report = build_report(self.paths, title=self.title)
            body, problems = page(report), report.problems
        except ReportInputError as exc:  # e.g. a sweep with no run started yet: say so, and keep watching
            body = (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(self.title)}</title>"
                    f"</head><body><main><p>Waiting for runs: {html.escape(str(exc))}</p></main></body></html>")
            problems = (str(exc),)
        with self._lock:
            self.version += 1
            live = _LIVE.format(version=self.version, interval_ms=max(int(self.interval * 1000), 200))
            self._html = body.replace("</body>", live + "</body>", 1) if "</body>" in body else body + live
            self.problems, self._seen = tuple(problems), now
        return True

    def start(self) -> ReportServer:
        self.refresh()
        self._threads = [threading.Thread(target=self._httpd.serve_forever, daemon=True, name="report-http"),
                         threading.Thread(target=self._watch, daemon=True, name="report-watch")]
        for t in self._threads:
            t.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        for t in self._threads:
            t.join(timeout=10)

    def __enter__(self) -> ReportServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _watch(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.refresh()
            except Exception as exc:  # a run caught mid-write in a way the reader refuses: try again next time
                self.problems = (f"rebuild failed: {type(exc).__name__}: {exc}",)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # http.server's name
                host = (self.headers.get("Host") or "").strip().lower()
                if host not in allowed_hosts(server._httpd.server_address[1]):
                    self._send("only served to 127.0.0.1 and localhost on this port\n", "text/plain; charset=utf-8",
                               status=403)
                    return
                path = self.path.split("?", 1)[0]
                if path == "/":
                    self._send(server.html(), "text/html; charset=utf-8")
                elif path == "/version":
                    self._send(str(server.version), "text/plain; charset=utf-8")
                else:
                    self.send_error(404)

            def _send(self, text: str, kind: str, status: int = 200) -> None:
                data = text.encode("utf-8")
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", kind)
                    self.send_header("Content-Length", str(len(data)))
                    self.send_header("Cache-Control", "no-store")
                    self.end_headers()
                    self.wfile.write(data)
                except _DROPPED:  # the browser went away mid-answer
                    self.close_connection = True

            def log_message(self, format: str, *args: object) -> None:  # quiet: no request log
                return

        return Handler
