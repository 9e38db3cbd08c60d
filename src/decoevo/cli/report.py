"""`decoevo report`: one self-contained HTML report over runs and sweeps (the work is `decoevo.report`)."""

from __future__ import annotations

from pathlib import Path

import typer

from .common import check_output, console, err_console, fail, guarded


@guarded
def report(
    paths: list[Path] = typer.Argument(..., help="Run directories and/or sweep directories (SWEEP/runs/*/*)."),
    output: Path = typer.Option(Path("report.html"), "--output", "-o", help="The HTML file to write."),
    title: str = typer.Option("DecoEvo report", help="The report's title."),
) -> None:
    """Write one self-contained HTML report: results, comparisons, dynamics, alignment, cost and every run."""
    from ..report import ReportInputError, build_report, write

    try:
        built = build_report(paths, title=title)
    except ReportInputError as exc:
        fail(str(exc))
        return
    for problem in built.problems:
        err_console.print(f"[yellow]warning:[/] {problem}", highlight=False)
    check_output(output, replaced=True)
    try:
        written = write(built, output)
    except OSError as exc:
        fail(f"-o {output}: cannot write ({exc.strerror or exc})")
    console.print(f"wrote {written} ({len(built.runs)} runs, {written.stat().st_size / 1024:,.0f} KiB)")
