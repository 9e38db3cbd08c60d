"""`decoevo export`: print what a run ships, its final solver skill."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from .common import err_console, guarded, warn, write_output


@guarded
def export(
    run_dir: Path = typer.Argument(..., help="A run directory."),
    output: Path = typer.Option(None, "--output", "-o", help="Write the skill here instead of stdout."),
) -> None:
    """Print the final solver skill (what ships); warns on stderr if it is the initial one or the run unfinished."""
    from ..rundir import RunReader
    from .shipped import export_warnings

    text = RunReader(run_dir).shipped_skill_text()
    for warning in export_warnings(run_dir):
        warn(warning)
    if output:
        write_output(output, text.strip() + "\n")
        err_console.print(f"wrote {output}")
    else:
        sys.stdout.write(text.strip() + "\n")
