"""`decoevo sweep`: a grid of methods × seeds × benchmarks (the work is `decoevo.sweep`)."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.markup import escape

from ..errors import ConfigError
from .common import (
    BaseUrlOption,
    MaxCost,
    ModelOption,
    NoCacheOption,
    StepsOption,
    TrackOption,
    TrackUriOption,
    console,
    err_console,
    fail,
    guard,
)
from .data import choose_data


def sweep(
    sweep_dir: Path = typer.Argument(..., help="The sweep directory (created; an earlier sweep's is continued)."),
    spec: Path = typer.Option(None, "--spec", "-s", help="A sweep YAML (methods, seeds, benchmarks, preset, and "
                              "the run keys of `decoevo config`). Default: "
                              "SWEEP/sweep.yaml of an earlier sweep, else the flags below."),
    methods: str = typer.Option(None, help="Comma-separated methods, e.g. decoevo,skillopt "
                               "(`decoevo methods` lists them)."),
    seeds: str = typer.Option(None, help="Comma-separated seeds, e.g. 0,1,2 (matched across methods)."),
    data: str = typer.Option(None, help="One benchmark's questions (replaces the spec's benchmarks)."),
    fmt: str = typer.Option(None, "--format", help="The format of --data (see `decoevo run --help`)."),
    task: str = typer.Option(None, help="Task family of --data for the structural audit spec."),
    benchmark: str = typer.Option(None, help="With --data: that benchmark's name (default: the file's stem). "
                                  "Alone: a fetched public benchmark, NAME[:split] (see `decoevo data list`)."),
    preset: str = typer.Option(None, help="quick, default, paper, lean or paper-full (default: the spec's, else "
                               "default for a served model, quick for the embedded one)."),
    model: str = ModelOption,
    base_url: str = BaseUrlOption,
    steps: int = StepsOption,
    max_calls: int = typer.Option(None, help="Per-run budget of paid calls."),
    max_tokens: int = typer.Option(None, help="Per-run budget of paid tokens."),
    max_cost: float = MaxCost,
    parity: bool = typer.Option(False, "--parity", help="Controls at DecoEvo's tokens, as `decoevo reproduce` "
                                "runs them: sc_coevo and direct_audit topped up to, and budget_matched capped at, "
                                "the paired decoevo run's tokens (top_up and budget.match_on in SWEEP/sweep.yaml)."),
    evaluate: str = typer.Option(None, help="Post-run steps, comma-separated (test, dynamics, alignment), "
                                 "or 'none'. Default: test."),
    workers: int = typer.Option(None, min=1, help="Cells at once (default: min(cells, cores); 8 per core when "
                                 "no model is embedded; on Ray, CPUs)."),
    threads: int = typer.Option(None, min=1, help="Threads per cell (default: cores // workers)."),
    ray_address: str = typer.Option(None, help="Run cells as Ray tasks on this cluster: auto or HOST:PORT."),
    no_cache: bool = NoCacheOption,
    set_: list[str] = typer.Option([], "--set", help="Override a shared setting: --set hyper.epsilon=0.02"),
    pilot: Path = typer.Option(None, "--pilot", help="Take ε, τ_tie and K per benchmark and seed from this "
                               "pilot.json (`decoevo pilot`)."),
    track: str = TrackOption,
    track_uri: str = TrackUriOption,
) -> None:
    """Run a grid of methods × seeds × benchmarks (matched splits); finished cells are not rerun."""
    from ..tracking import export_tracking
    from .settings import sweep_benchmark, sweep_overrides

    def body() -> None:
        from ..sweep import build_spec, run_sweep
        from ..tasks.splits import SplitsTooLarge
        from .endpoint import with_smaller_preset
        from .sweep_progress import sweep_bars

        if sweep_dir.exists() and not sweep_dir.is_dir():
            fail(f"{sweep_dir} exists and is not a directory; name a sweep directory")
        over = sweep_overrides(methods=methods, seeds=seeds, preset=preset, steps=steps, max_calls=max_calls,
                               max_tokens=max_tokens, max_cost=max_cost, evaluate=evaluate, no_cache=no_cache,
                               sets=set_, pilot=pilot)
        bench = sweep_benchmark(data, fmt, task, benchmark, choose_data)
        built, source = build_spec(sweep_dir, spec, overrides=over, benchmark=bench, model=model, base_url=base_url,
                                   on_preset=lambda chosen: console.print(f"preset: {chosen.name} ({chosen.reason})",
                                                                          highlight=False), parity=parity)
        try:
            book = run_sweep(built, sweep_dir, source=source, workers=workers, threads=threads,
                             ray_address=ray_address, console=console, observer=sweep_bars(console))
        except SplitsTooLarge as exc:
            raise ConfigError(with_smaller_preset(str(exc), built.preset)) from None
        counts = book.counts()
        console.print(f"sweep {sweep_dir}: {counts['done']} done, {counts['failed']} failed "
                      f"(status: {sweep_dir / 'status.json'})")
        console.print(f"next: decoevo report {sweep_dir}  # every cell on one page", highlight=False, soft_wrap=True)
        failed = book.failed()
        if failed:
            for cell_id, status in failed.items():
                err_console.print(f"[red]failed[/] {cell_id}: {escape(status.error or '')}", highlight=False)
            raise typer.Exit(1)

    guard(export_tracking, track, track_uri, sweep_dir)  # one tracker run per cell
    try:
        guard(body)
    except KeyboardInterrupt:  # pragma: no cover - interactive
        fail(f"interrupted; run `decoevo sweep {sweep_dir}` again to continue (finished cells are kept)", 130)
