"""`decoevo data`: list, fetch, locate and verify the public benchmark files (flags and printing only;
the work is in `decoevo.benchmarks.datastore`)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, NoReturn

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TransferSpeedColumn
from rich.table import Table

from ..benchmarks import datastore
from ..benchmarks.download import FetchError
from ..benchmarks.record import DataFile
from ..lm.errors import ConfigError
from ..redact import redact
from .boundary import command_boundary
from .common import _print_labelled as labelled
from .common import fail
from .display import print_json, show_table

data_app = typer.Typer(no_args_is_help=True, help="Download and check the public benchmark files.")
console = Console(log_path=False)
err_console = Console(stderr=True)


def _fail(message: str, code: int = 2) -> NoReturn:
    fail(message, code)  # wrapped at spaces, a URL or a quoted command never split


guarded = command_boundary(_fail)


@contextmanager
def download_bars(out: Console) -> Iterator[Callable[[DataFile, int | None], Callable[[int, int | None], None]]]:
    """A rich progress display; the yielded function opens one bar per file being downloaded."""
    with Progress(TextColumn("{task.description}"), BarColumn(), DownloadColumn(), TransferSpeedColumn(),
                  console=out, transient=False) as progress:

        def on_file(f: DataFile, size: int | None) -> Callable[[int, int | None], None]:
            bar = progress.add_task(f.name, total=size)

            def tick(done: int, total: int | None) -> None:
                progress.update(bar, completed=done, total=total)

            return tick

        yield on_file


def choose_data(data: str | None, fmt: str | None, benchmark: str | None) -> tuple[str | None, str | None]:
    """`--data` / `--format` / `--benchmark` of run, eval and sweep to a local path and a format; a URL is
    downloaded with a progress bar on stderr."""
    with download_bars(err_console) as on_file:
        return datastore.choose_data(data, fmt, benchmark, on_file=on_file, on_notice=_notice)


def _notice(message: str) -> None:
    labelled("note:", "yellow", redact(message))


@data_app.command("list")
@guarded
def list_(as_json: bool = typer.Option(False, "--json", help="Print a JSON list instead of the table.")) -> None:
    """Benchmarks and their splits: size, licence, source, and whether they are downloaded."""
    rows: list[dict[str, Any]] = []
    for bench, split in datastore.all_splits():
        assert bench.source is not None
        sizes = [f.size for f in split.files]
        rows.append({"spec": bench.name if split is bench.source.default_split else f"{bench.name}:{split.name}",
                     "benchmark": bench.name, "split": split.name, "description": split.description,
                     "size_bytes": sum(s for s in sizes if s) if all(sizes) else None,
                     "licence": bench.source.licence, "source": bench.source.upstream,
                     "sha256": "pinned" if all(f.sha256 for f in split.files) else "unpinned",
                     "here": all(datastore.file_status(bench, f, hash_it=False).state == "ok" for f in split.files)})
    if as_json:
        print_json({"cache": str(datastore.data_root()), "splits": rows})
        return
    table = Table(title=f"benchmark data (cache: {datastore.data_root()})")
    table.add_column("benchmark[:split]", no_wrap=True)
    # the long texts wrap in their cells, so the whole table fits a wide terminal (about 160 columns)
    for col, width in (("what", 34), ("size", None), ("licence", 24), ("source", 30), ("sha256", None),
                       ("here", None)):
        table.add_column(col, max_width=width, overflow="fold")
    for r in rows:
        size = "?" if r["size_bytes"] is None else f"{r['size_bytes'] / 1e6:.1f} MB"
        table.add_row(r["spec"], r["description"], size, r["licence"], r["source"], r["sha256"],
                      "yes" if r["here"] else "no")
    show_table(console, table)


@data_app.command()
@guarded
def fetch(spec: str = typer.Argument(..., help="NAME or NAME:SPLIT, e.g. healthbench:hard"),
          force: bool = typer.Option(False, "--force", help="Download again even when the files are here.")) -> None:
    """Download a benchmark's files (resumes a broken download, verifies sha256)."""
    try:
        with download_bars(console) as on_file:
            path, fetched = datastore.fetch(spec, on_file=on_file, force=force)
    except ConfigError as exc:
        _fail(str(exc))
    except FetchError as exc:
        _fail(str(exc), code=1)
    console.print(f"{'fetched ' + ', '.join(fetched) if fetched else 'already here, verified'}: {path}")
    _fetch_official(spec, force)


def _fetch_official(spec: str, force: bool) -> None:
    """The benchmark's official grader prompts (benchmarks/templates.py); without them grading uses ours."""
    from ..benchmarks import templates

    bench, _ = datastore.parse_spec(spec)
    if not bench.official_prompts:
        return
    try:
        got = templates.fetch_templates(bench, force=force)
    except ConfigError as exc:
        err_console.print(f"[bold yellow]warning:[/] official grader prompt not fetched: {escape(str(exc))}; "
                          "evaluations grade with decoevo's own prompt", highlight=False)
        return
    console.print(f"official grader prompt {'fetched' if got else 'already here, verified'}: "
                  f"{templates.template_dir(bench)}")


@data_app.command()
@guarded
def path(spec: str = typer.Argument(..., help="NAME or NAME:SPLIT")) -> None:
    """Print the local path of a fetched benchmark (what --data would take)."""
    try:
        print(datastore.local_path(spec))
    except ConfigError as exc:
        _fail(str(exc))


@data_app.command()
@guarded
def verify(spec: str = typer.Argument(None, help="NAME or NAME:SPLIT; default: every downloaded file")) -> None:
    """Check the sha256 of downloaded files against the pinned (or first-fetch) checksums."""
    try:
        pairs = [datastore.parse_spec(spec)] if spec else datastore.all_splits()
    except ConfigError as exc:
        _fail(str(exc))
    bad = checked = 0
    seen: set[tuple[str, str]] = set()
    for bench, split in pairs:
        for f in split.files:
            if (bench.name, f.name) in seen:
                continue
            seen.add((bench.name, f.name))
            status = datastore.file_status(bench, f)
            if status.state in ("missing",) and not spec:
                continue
            checked += 1
            ok = status.state in ("ok", "unpinned")  # unpinned: nothing to compare with, said in the detail
            bad += not ok
            colour = "green" if status.state == "ok" else "yellow" if ok else "red"
            console.print(f"[{colour}]{status.state}[/] {escape(str(status.path))} {escape(status.detail)}",
                          highlight=False)
    if bad:
        _fail(f"{bad} of {checked} file(s) failed verification; fetch them again with `decoevo data fetch NAME "
              "--force`", code=1)
    console.print(f"{checked} file(s) verified" if checked else "nothing downloaded yet (see `decoevo data list`)")
