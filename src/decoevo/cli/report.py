"""`decoevo report`: one self-contained HTML report over runs and sweeps (the work is `decoevo.report`);
`--watch` serves it on 127.0.0.1 instead, refreshed as the runs write."""

from __future__ import annotations

import time
from pathlib import Path

import typer

from .common import check_output, console, err_console, fail, guarded

MIN_INTERVAL, MAX_INTERVAL = 0.2, 3600.0  # --watch: a tighter loop burns a core, a longer one is no watch


@guarded
def report(
    paths: list[Path] = typer.Argument(..., help="Run directories and/or sweep directories (SWEEP/runs/*/*)."),
    output: Path = typer.Option(Path("report.html"), "--output", "-o", help="The HTML file to write."),
    title: str = typer.Option("DecoEvo report", help="The report's title."),
    watch: bool = typer.Option(False, "--watch", help="Serve the report on 127.0.0.1 and refresh it in the "
                               "browser as the runs write (writes no file); Ctrl-C stops."),
    port: int = typer.Option(8765, "--port", min=0, max=65535, help="--watch: the port (0: any free one)."),
    interval: float = typer.Option(2.0, "--interval", help="--watch: seconds between checks (0.2 to 3600)."),
) -> None:
    """Write one self-contained HTML report: results, comparisons, dynamics, alignment, cost and every run.

    With --watch, serve it on 127.0.0.1 instead and keep it current while the runs write."""
    from ..report import ReportInputError, build_report, write

    if watch:
        if not MIN_INTERVAL <= interval <= MAX_INTERVAL:  # also nan and inf: neither is a number of seconds
            fail(f"--interval {interval:g}: give seconds between {MIN_INTERVAL:g} and {MAX_INTERVAL:g}")
        try:
            _watch(paths, title, port, interval)
        except KeyboardInterrupt:  # while the first report was built: a report calls no model, pays nothing
            fail("interrupted (Ctrl-C) before the report was served; nothing was written", 130)
        return
    try:
        built = build_report(paths, title=title)
    except ReportInputError as exc:
        fail(str(exc))
        return
    except KeyboardInterrupt:
        fail("interrupted (Ctrl-C); no report was written", 130)
    for problem in built.problems:
        err_console.print(f"[yellow]warning:[/] {problem}", highlight=False)
    check_output(output, replaced=True)
    try:
        written = write(built, output)
    except OSError as exc:
        fail(f"-o {output}: cannot write ({exc.strerror or exc})")
    n = len(built.runs)
    console.print(f"wrote {written} ({n} run{'s' if n != 1 else ''}, {written.stat().st_size / 1024:,.0f} KiB)")


def _watch(paths: list[Path], title: str, port: int, interval: float) -> None:
    from ..report.serve import ReportServer

    missing = [p for p in paths if not p.is_dir()]
    if missing:
        fail(f"{missing[0]}: not a directory; name run or sweep directories (made by `decoevo run` or `sweep`)")
    try:
        server = ReportServer(paths, title=title, port=port, interval=interval)
    except OSError as exc:
        fail(f"--port {port}: cannot listen on 127.0.0.1 ({exc.strerror or exc}); choose another, or --port 0")
    with server:
        for problem in server.problems:
            err_console.print(f"[yellow]warning:[/] {problem}", highlight=False)
        console.print(f"serving {server.url} (rebuilt when the runs change, checked every {interval:g} s); "
                      "Ctrl-C stops", highlight=False, soft_wrap=True)
        console.file.flush()  # a caller reading the URL from a pipe gets it now
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            console.print("stopped", highlight=False)
