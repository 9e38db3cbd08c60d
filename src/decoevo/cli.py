"""The decoevo command line: doctor, run, resume, export, methods, sweep, eval, dynamics, align, report.

Flags and printing only: configurations are assembled in `decoevo.settings`, the work is in the library.
Each command is registered by one line below; the evaluation commands live in `eval_cli`, `data` in
`data_cli`."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import typer
from rich.markup import escape
from rich.table import Table

from . import eval_cli
from .cli_common import (
    BaseUrlOption,
    BenchmarkOption,
    ConfigOption,
    JsonOption,
    MaxCost,
    ModelOption,
    NoCacheOption,
    SetOption,
    StepsOption,
    TrackOption,
    TrackUriOption,
    check_output,
    console,
    err_console,
    fail,
    guard,
    guarded,
    warn,
    write_output,
)
from .data_cli import choose_data, data_app
from .display import print_json, show_table
from .lm import LMError
from .reproduce_cli import reproduce_command

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False)


@app.callback()
def _root() -> None:
    """decoevo: evolve an LLM feature's system prompt against rubric judges, and the rubric generator safely."""


@guarded
def doctor(
    model: str = ModelOption,
    base_url: str = BaseUrlOption,
    no_cache: bool = NoCacheOption,
    structured_output: str = typer.Option(None, help="auto (the default: negotiate), json_schema, json_object or "
                                          "none."),
    reasoning_effort: str = typer.Option(None, help="For reasoning models: none, minimal, low, medium, high."),
    api_key_env: str = typer.Option(None, help="The environment variable holding the API key."),
    max_tokens: int = typer.Option(None, min=1, help="Token limit of the probe (default 64; 1024 for a server)."),
    config_file: Path = typer.Option(None, "--config", "-c", help="Check the models of this run configuration "
                                     "(its lm section: a LiteLLM backend, a configured endpoint)."),
    set_: list[str] = typer.Option([], "--set", help="Override a model setting: an lm.* key, as for run."),
) -> None:
    """Show the available backends, load the default model and make one structured call."""
    from .doctor import backend_statuses, endpoint_lines, run_probe
    from .errors import ConfigError
    from .settings import doctor_lm_config

    table = Table(title="decoevo backends")
    for col in ("backend", "available", "detail"):
        table.add_column(col)
    for status in backend_statuses():
        table.add_row(status.name, "yes" if status.available else "no", status.detail)
    show_table(console, table)
    settings = {k: v for k, v in (("structured_output", structured_output), ("reasoning_effort", reasoning_effort),
                                  ("api_key_env", api_key_env)) if v is not None}
    config = doctor_lm_config(config_file=config_file, sets=set_, model=model, base_url=base_url, no_cache=no_cache,
                              settings=settings)
    for name, spec in config.models.items():  # each configured model (a role map's judge too)
        one = config.model_copy(update={"models": {"default": spec}, "roles": {}})
        probe_tokens = max_tokens or (64 if spec.backend == "local" else 1024)
        label = f"model {name} ({spec.backend}: {spec.model})" if len(config.models) > 1 else "structured call"
        with console.status(f"{name}: loading the model and making one structured call"):
            try:
                answer, seconds, lm = run_probe(one, probe_tokens)
            except (LMError, ConfigError) as exc:
                fail(f"the probe call failed ({getattr(exc, 'category', 'config')}) for model '{name}': {exc}")
        console.print(f"{label} OK in {seconds:.1f}s -> {answer.model_dump()}", highlight=False)
        for line in endpoint_lines(lm):
            console.print(line, highlight=False)
        show_table(console, lm.ledger.table(), keys=2)


@guarded
def list_methods(as_json: bool = JsonOption) -> None:
    """List the methods (a method is a configuration of the one engine)."""
    from .methods import METHODS

    if as_json:
        print_json([{"name": m.name, "group": m.group, "description": m.description} for m in METHODS.values()])
        return
    table = Table(title="methods")
    table.add_column("name", no_wrap=True)
    table.add_column("group")
    table.add_column("what it does")
    for m in METHODS.values():
        table.add_row(m.name, m.group, m.description)
    show_table(console, table)


def _execute(config: Any, run_dir: Path, resume: bool, tracker: Any = None, accept_changed_data: bool = False,
             accept_changed_config: bool = False, as_json: bool = False) -> None:
    from .progress import run_with_progress
    from .rundir import RunReader

    callbacks = [tracker(run_dir)] if tracker is not None else []
    ended = "FAILED"  # what a tracker that saw no finish event records
    try:
        run_with_progress(config, run_dir, resume=resume, console=err_console if as_json else console,
                          callbacks=callbacks, accept_changed_data=accept_changed_data,
                          accept_changed_config=accept_changed_config)
        ended = "FINISHED"
        if as_json:
            summary = RunReader(run_dir).summary()
            print_json({"run_dir": str(run_dir), **(summary.model_dump(mode="json") if summary else {})})
    except LMError as exc:
        then = (f"Everything up to the last completed step is saved; fix the cause and continue with "
                f"`decoevo resume {run_dir}`." if run_dir.exists() or resume else
                "Nothing was saved; fix the cause and run the same command again.")
        fail(f"a model call failed ({exc.category}): {exc}. {then}", code=1 if exc.category != "infrastructure" else 2)
    except KeyboardInterrupt:
        fail(f"interrupted; continue with `decoevo resume {run_dir}` (completed steps and paid calls are kept)", 130)
    finally:
        for callback in callbacks:
            callback.close(ended)


def run(
    config_file: Path = ConfigOption,
    method: str = typer.Option(None, help="decoevo, skillopt, sc_coevo, zero_shot, ... (see `decoevo methods`)"),
    data: str = typer.Option(None, help="Questions: JSONL (yours) or a benchmark file, an https URL or "
                             "hf://datasets/OWNER/NAME/FILE. Default: bundled sample."),
    fmt: str = typer.Option(None, "--format", help="jsonl (yours), healthbench, writingbench, scholarqa_cs, "
                            "researchqa, llmeval_med or eqbench_cw"),
    benchmark: str = BenchmarkOption,
    task: str = typer.Option(None, help="Task family for the structural audit spec (healthbench, writingbench...)"),
    task_spec: str = typer.Option(None, help="A text file with your own structural-audit specification."),
    model: str = ModelOption,
    base_url: str = BaseUrlOption,
    seeds: str = typer.Option(None, help="Comma-separated seeds; one run per seed (default: the configuration's "
                              "seed, else 0)."),
    steps: int = StepsOption,
    preset: str = typer.Option("quick", help="quick (embedded demo), default, paper or paper-full"),
    runs_root: Path = typer.Option(Path("runs"), help="Where run directories are created."),
    name: str = typer.Option(None, help="Run directory name (default: METHOD-DATA-sSEED)."),
    max_calls: int = typer.Option(None, help="Stop cleanly after this many paid calls."),
    max_tokens: int = typer.Option(None, help="Stop cleanly after this many paid tokens."),
    max_cost: float = MaxCost,
    no_cache: bool = NoCacheOption,
    set_: list[str] = SetOption,
    pilot: Path = typer.Option(None, "--pilot", help="Take ε, τ_tie and K from this pilot.json (`decoevo pilot`)."),
    track: str = TrackOption,
    track_uri: str = TrackUriOption,
    as_json: bool = JsonOption,
) -> None:
    """Run a method (default: DecoEvo) and write a run directory per seed."""
    from .settings import RunFlags

    flags = RunFlags(config_file, method, data, fmt, benchmark, task, task_spec, model, base_url, seeds, steps,
                     preset, max_calls, max_tokens, max_cost, no_cache, tuple(set_), pilot)
    guard(_run, flags, runs_root, name, (track, track_uri), as_json)


def _run(flags: Any, runs_root: Path, name: str | None, track: tuple[str | None, str | None], as_json: bool) -> None:
    from .settings import check_new_run_dir, run_configs, run_dir_for, run_name
    from .tracking import make_tracker

    tracker = make_tracker(*track)
    configs = run_configs(flags, choose_data)
    if name is not None:
        run_name(name)
    if name is not None and len(configs) > 1:
        fail(f"--name names one run directory, but --seeds gives {len(configs)} seeds; drop --name "
             "(each seed gets METHOD-DATA-sSEED) or run one seed at a time")
    if runs_root.exists() and not runs_root.is_dir():
        fail(f"--runs-root {runs_root} is a file, not a directory")
    for config in configs:
        run_dir = run_dir_for(config, runs_root, name)
        check_new_run_dir(run_dir)
        _execute(config, run_dir, resume=False, tracker=tracker, as_json=as_json)


def pilot_cmd(
    out_dir: Path = typer.Argument(..., help="Where pilot.json and the pilot's call log (pilot/) go."),
    config_file: Path = ConfigOption,
    data: str = typer.Option(None, help="Questions, as for `decoevo run`. Default: bundled sample."),
    fmt: str = typer.Option(None, "--format", help="The format of --data."),
    benchmark: str = BenchmarkOption,
    task: str = typer.Option(None, help="Task family for the structural audit spec."),
    model: str = ModelOption,
    base_url: str = BaseUrlOption,
    seeds: str = typer.Option(None, help="Comma-separated seeds; each seed's own pilot split (default: the "
                              "configuration's seed, else 0)."),
    preset: str = typer.Option("quick", help="quick, default, paper or paper-full"),
    set_: list[str] = typer.Option([], "--set", help="Override any config key, as the runs will: --set splits.pilot=4"),
) -> None:
    """Choose ε, τ_tie and K on the pilot split (docs/pilot.md); its calls are logged apart from any run."""
    from .settings import RunFlags

    flags = RunFlags(config_file, None, data, fmt, benchmark, task, None, model, base_url, seeds, None, preset,
                     sets=tuple(set_))
    guard(_pilot, flags, out_dir)


def _pilot(flags: Any, out_dir: Path) -> None:
    from .pilot import run_pilot
    from .settings import run_configs

    for config in run_configs(flags, choose_data):
        entry = run_pilot(config, out_dir)
        console.print(f"pilot seed {config.seed}: {entry.choice} -> {out_dir / 'pilot.json'}")


def resume(
    run_dir: Path = typer.Argument(..., help="A run directory made by `decoevo run`."),
    accept_changed_data: bool = typer.Option(False, "--accept-changed-data", help="Continue even though the "
                                             "data file (its sha256) or the splits it gives changed since the start."),
    accept_changed_config: bool = typer.Option(False, "--accept-changed-config", help="Continue even though "
                                               "config.yaml changes results since the start (recorded in "
                                               "events.jsonl)."),
    config_file: Path = typer.Option(None, "--config", "-c", help="A YAML file of settings that cannot change "
                                     "results (concurrency, timeouts, retries, rates, tracking)."),
    set_: list[str] = typer.Option([], "--set", help="Change a setting that cannot change results (concurrency, "
                                   "timeouts, rates: docs/configuration.md), e.g. hyper.concurrency=2"),
    track: str = TrackOption, track_uri: str = TrackUriOption,
    as_json: bool = JsonOption,
) -> None:
    """Continue a stopped or killed run from its last completed step; paid calls come from the cache.
    A changed method or seed is refused; a changed data file or splits too, unless --accept-changed-data;
    an edited config.yaml that changes results too, unless --accept-changed-config."""
    guard(_resume, run_dir, accept_changed_data, accept_changed_config, config_file, set_, track, track_uri, as_json)


def _resume(run_dir: Path, accept_changed_data: bool, accept_changed_config: bool, config_file: Path | None,
            sets: list[str], track: str | None, track_uri: str | None, as_json: bool) -> None:
    from .settings import resume_config
    from .tracking import make_tracker

    tracker = make_tracker(track, track_uri)
    _execute(resume_config(run_dir, config_file, sets), run_dir, resume=True, tracker=tracker,
             accept_changed_data=accept_changed_data, accept_changed_config=accept_changed_config, as_json=as_json)


def sweep(
    sweep_dir: Path = typer.Argument(..., help="The sweep directory (created; an earlier sweep's is continued)."),
    spec: Path = typer.Option(None, "--spec", "-s", help="A sweep YAML (see docs/sweeps.md). Default: "
                              "SWEEP/sweep.yaml of an earlier sweep, else the flags below."),
    methods: str = typer.Option(None, help="Comma-separated methods, e.g. decoevo,skillopt,budget_matched"),
    seeds: str = typer.Option(None, help="Comma-separated seeds, e.g. 0,1,2 (matched across methods)."),
    data: str = typer.Option(None, help="One benchmark's questions (replaces the spec's benchmarks)."),
    fmt: str = typer.Option(None, "--format", help="The format of --data (see `decoevo run --help`)."),
    task: str = typer.Option(None, help="Task family of --data for the structural audit spec."),
    benchmark: str = typer.Option(None, help="With --data: that benchmark's name (default: the file's stem). "
                                  "Alone: a fetched public benchmark, NAME[:split] (see `decoevo data list`)."),
    preset: str = typer.Option(None, help="quick (default), default, paper or paper-full"),
    model: str = ModelOption,
    base_url: str = BaseUrlOption,
    steps: int = StepsOption,
    max_calls: int = typer.Option(None, help="Per-run budget of paid calls."),
    max_tokens: int = typer.Option(None, help="Per-run budget of paid tokens."),
    max_cost: float = MaxCost,
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
    from .settings import sweep_benchmark, sweep_overrides
    from .tracking import export_tracking

    def body() -> None:
        from .sweep import build_spec, run_sweep

        if sweep_dir.exists() and not sweep_dir.is_dir():
            fail(f"{sweep_dir} exists and is not a directory; name a sweep directory")
        over = sweep_overrides(methods=methods, seeds=seeds, preset=preset, steps=steps, max_calls=max_calls,
                               max_tokens=max_tokens, max_cost=max_cost, evaluate=evaluate, no_cache=no_cache,
                               sets=set_, pilot=pilot)
        bench = sweep_benchmark(data, fmt, task, benchmark, choose_data)
        built, source = build_spec(sweep_dir, spec, overrides=over, benchmark=bench, model=model, base_url=base_url)
        book = run_sweep(built, sweep_dir, source=source, workers=workers, threads=threads, ray_address=ray_address,
                         console=console)
        counts = book.counts()
        console.print(f"sweep {sweep_dir}: {counts['done']} done, {counts['failed']} failed "
                      f"(status: {sweep_dir / 'status.json'})")
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


@guarded
def export(
    run_dir: Path = typer.Argument(..., help="A run directory."),
    output: Path = typer.Option(None, "--output", "-o", help="Write the skill here instead of stdout."),
) -> None:
    """Print the final solver skill (what ships); warns on stderr if it is the initial one or the run unfinished."""
    from .rundir import RunReader
    from .shipped import export_warnings

    text = RunReader(run_dir).shipped_skill_text()
    for warning in export_warnings(run_dir):
        warn(warning)
    if output:
        write_output(output, text.strip() + "\n")
        err_console.print(f"wrote {output}")
    else:
        sys.stdout.write(text.strip() + "\n")


@guarded
def report(
    paths: list[Path] = typer.Argument(..., help="Run directories and/or sweep directories (SWEEP/runs/*/*)."),
    output: Path = typer.Option(Path("report.html"), "--output", "-o", help="The HTML file to write."),
    title: str = typer.Option("DecoEvo report", help="The report's title."),
) -> None:
    """Write one self-contained HTML report: results, comparisons, dynamics, alignment, cost and every run."""
    from .report import ReportInputError, build_report, write

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


# One line per command (the order of `decoevo --help`).
app.add_typer(data_app, name="data")
app.command()(doctor)
app.command("methods")(list_methods)
app.command()(run)
app.command("pilot")(pilot_cmd)
app.command()(resume)
app.command()(sweep)
app.command()(export)
app.command("eval")(eval_cli.eval_)
app.command()(eval_cli.dynamics)
app.command()(eval_cli.align)
app.command()(report)
app.command("reproduce")(reproduce_command)

def main() -> None:  # pragma: no cover
    sys.exit(app())
