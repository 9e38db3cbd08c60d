"""The decoevo command line: doctor, run, resume, export, methods, sweep, eval, dynamics, align, report."""

from __future__ import annotations

import asyncio
import functools
import re
import sys
from pathlib import Path
from typing import Any, NoReturn

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from .boundary import command_boundary, run_guarded
from .data_cli import choose_data as _choose_data
from .data_cli import data_app
from .errors import ConfigError, UserError
from .lm import LMConfig, LMError, ModelSpec

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False)
console = Console(log_path=False)
err_console = Console(stderr=True)


@app.callback()
def _root() -> None:
    """decoevo: evolve an LLM feature's system prompt against rubric judges, and the rubric generator safely."""


app.add_typer(data_app, name="data")
TrackOption = typer.Option(None, "--track", help="Log the run to an experiment tracker: mlflow "
                           "(pip install 'decoevo[mlflow]').")
TrackUriOption = typer.Option(None, "--track-uri", help="The tracker's URI (default: $MLFLOW_TRACKING_URI).")
BenchmarkOption = typer.Option(None, "--benchmark", help="A fetched public benchmark, NAME[:split] (e.g. "
                               "healthbench:hard); see `decoevo data list`.")


MaxCost = typer.Option(None, "--max-cost", min=0.0, help="Stop cleanly after this many US dollars (paid + "
                       "inherited); every model needs a price (input/output_price_per_mtok, or LiteLLM's map).")


def fail(message: str, code: int = 2) -> NoReturn:
    """Print a one-paragraph error and exit (2 for bad input or configuration), with no traceback."""
    err_console.print(f"[bold red]error:[/] {escape(message)}", highlight=False)  # plain text: keep its [..]
    raise typer.Exit(code)


guarded = command_boundary(fail)  # every command's body: any failure is one line, never a traceback


def model_spec_from_flags(model: str | None, base_url: str | None) -> ModelSpec:
    if base_url:
        return ModelSpec(backend="openai", model=model or "default", base_url=base_url)
    if model:
        return ModelSpec(gguf_path=model, model=Path(model).stem)
    return ModelSpec()


def model_config_from_flags(model: str | None, base_url: str | None, no_cache: bool) -> LMConfig:
    try:
        return LMConfig(models={"default": model_spec_from_flags(model, base_url)}, use_cache=not no_cache)
    except ValueError as exc:
        fail(str(exc))
        raise  # unreachable


@app.command()
@guarded
def doctor(
    model: str = typer.Option(None, help="A GGUF path (local) or a model name served at --base-url."),
    base_url: str = typer.Option(None, help="An OpenAI-compatible server, e.g. http://127.0.0.1:8000/v1"),
    no_cache: bool = typer.Option(False, "--no-cache", help="Bypass the request cache."),
    structured_output: str = typer.Option("auto", help="auto (negotiate), json_schema, json_object or none."),
    reasoning_effort: str = typer.Option(None, help="For reasoning models: none, minimal, low, medium, high."),
    api_key_env: str = typer.Option(None, help="The environment variable holding the API key."),
    max_tokens: int = typer.Option(None, min=1, help="Token limit of the probe (default 64; 1024 for a server)."),
) -> None:
    """Show the available backends, load the default model and make one structured call."""
    from .doctor import backend_statuses, endpoint_lines, run_probe

    table = Table(title="decoevo backends")
    for col in ("backend", "available", "detail"):
        table.add_column(col)
    for status in backend_statuses():
        table.add_row(status.name, "yes" if status.available else "no", status.detail)
    console.print(table)
    config = model_config_from_flags(model, base_url, no_cache)
    settings = {k: v for k, v in (("structured_output", structured_output), ("reasoning_effort", reasoning_effort),
                                  ("api_key_env", api_key_env)) if v is not None}
    try:
        spec = ModelSpec.model_validate({**config.models["default"].model_dump(), **settings})
    except ValueError as exc:
        fail(f"doctor: {exc}")
        return
    config = config.model_copy(update={"models": {**config.models, "default": spec}})
    probe_tokens = max_tokens or (1024 if spec.backend == "openai" else 64)
    with console.status("loading the model and making one structured call"):
        try:
            answer, seconds, lm = run_probe(config, probe_tokens)
        except (LMError, ConfigError) as exc:
            fail(f"the probe call failed ({getattr(exc, 'category', 'config')}): {exc}")
            return
    console.print(f"structured call OK in {seconds:.1f}s -> {answer.model_dump()}")
    for line in endpoint_lines(lm):
        console.print(line, highlight=False)
    console.print(lm.ledger.table())


@app.command("methods")
@guarded
def list_methods() -> None:
    """List the methods (a method is a configuration of the one engine)."""
    from .methods import METHODS

    table = Table(title="methods")
    table.add_column("name")
    table.add_column("what it does")
    for m in METHODS.values():
        table.add_row(m.name, m.description)
    console.print(table)


def _overrides(method: str | None, data: str | None, fmt: str | None, task: str | None, task_spec: str | None,
               steps: int | None, max_calls: int | None, max_tokens: int | None, sets: list[str]) -> dict[str, Any]:

    out: dict[str, Any] = {}
    if method:
        out["method"] = method
    data_over = {k: v for k, v in (("path", data), ("format", fmt), ("task", task), ("task_spec", task_spec)) if v}
    if data_over:
        out["data"] = data_over
    if steps is not None:
        out.setdefault("hyper", {})["steps"] = steps
    budget = {k: v for k, v in (("max_calls", max_calls), ("max_tokens", max_tokens)) if v is not None}
    if budget:
        out["budget"] = budget
    for item in sets:
        apply_set(out, item)
    return out


def apply_set(out: dict[str, Any], item: str) -> None:
    """One `--set KEY=VALUE` into `out`: a dotted key, a YAML value; a later --set wins, except that a
    key holding a plain value cannot also be given sub-keys (`--set a=3 --set a.b=1`)."""
    import yaml

    if "=" not in item:
        fail(f"--set expects KEY=VALUE with a dotted key, e.g. hyper.epsilon=0.02; got '{item}'")
    key, text = item.split("=", 1)
    parts = key.strip().split(".")
    if not all(p.strip() for p in parts):
        fail(f"--set '{item}': the key must be dotted names, e.g. hyper.epsilon; got '{key}'")
    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        problem = " ".join(str(getattr(exc, "problem", None) or exc).split())
        fail(f"--set {key}: the value is not valid YAML ({problem}); quote it, e.g. --set '{key}=\"...\"'")
    except RecursionError:
        fail(f"--set {key}: the value is nested too deeply")
    node = out
    for i, part in enumerate(parts[:-1]):
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            fail(f"--set {key}: '{'.'.join(parts[: i + 1])}' was already given the value {child!r} "
                 "(by another --set or a flag); give it either a value or sub-keys")
        node = child
    node[parts[-1]] = value


def _absolute_paths(config: Any) -> Any:
    """Data and spec paths made absolute, so `decoevo eval` finds them from any directory later."""
    data = config.data
    update = {k: str(Path(v).resolve()) for k, v in (("path", data.path), ("task_spec", data.task_spec))
              if v and Path(v).exists()}
    return config.model_copy(update={"data": data.model_copy(update=update)}) if update else config


def _seeds(seeds: str) -> list[int]:
    try:
        out = [int(s) for s in seeds.split(",") if s.strip()]
    except ValueError:
        fail(f"--seeds expects comma-separated integers, e.g. 0,1,2; got '{seeds}'")
    if not out:
        fail("--seeds is empty; give at least one seed, e.g. --seeds 0")
    if len(set(out)) != len(out):
        fail(f"--seeds lists a seed twice: '{seeds}'")
    return out


def _execute(config: Any, run_dir: Path, resume: bool, tracker: Any = None, accept_changed_data: bool = False) -> None:
    from .progress import run_with_progress

    run_dir = Path(run_dir)
    callbacks = [tracker(run_dir)] if tracker is not None else []
    ended = "FAILED"  # what a tracker that saw no finish event records
    try:
        run_with_progress(config, run_dir, resume=resume, console=console, callbacks=callbacks,
                          accept_changed_data=accept_changed_data)
        ended = "FINISHED"
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


def _guard(fn: Any, *args: Any) -> None:
    """Any failure becomes a one-paragraph message and exit 2 for input, configuration or state."""
    run_guarded(lambda: fn(*args), fail)


_RUN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,199}")


def run_name(name: str) -> str:
    """A run directory's name: one path component inside --runs-root, never `..`, `/` or hidden."""
    if not _RUN_NAME.fullmatch(name) or ".." in name:
        fail(f"--name '{name}': use letters, digits and . _ + - (one directory name inside --runs-root, "
             "not a path)")
    return name


def check_new_run_dir(run_dir: Path) -> None:
    if (run_dir / "config.yaml").exists():
        fail(f"{run_dir} already holds a run; continue it with `decoevo resume {run_dir}`, or pass --name")
    if run_dir.is_symlink() or (run_dir.exists() and not run_dir.is_dir()):
        fail(f"{run_dir} exists and is not a directory; pass another --name")
    # a pilot made for this run (`decoevo pilot RUN_DIR`) may already be there
    leftovers = [p.name for p in run_dir.iterdir() if p.name not in (".lock", "pilot.json", "pilot")] \
        if run_dir.is_dir() else []
    if leftovers:
        fail(f"{run_dir} exists and is not a run directory (it holds {', '.join(sorted(leftovers)[:3])}); "
             "pass another --name or remove it")


@app.command()
def run(
    config_file: Path = typer.Option(None, "--config", "-c", help="A YAML run configuration (every key: "
                                     "docs/configuration.md)."),
    method: str = typer.Option(None, help="decoevo, skillopt, sc_coevo, zero_shot, ... (see `decoevo methods`)"),
    data: str = typer.Option(None, help="Questions: JSONL (yours) or a benchmark file, an https URL or "
                             "hf://datasets/OWNER/NAME/FILE. Default: bundled sample."),
    fmt: str = typer.Option(None, "--format", help="jsonl (yours), healthbench, writingbench, scholarqa_cs, "
                            "researchqa, llmeval_med or eqbench_cw"),
    benchmark: str = BenchmarkOption,
    task: str = typer.Option(None, help="Task family for the structural audit spec (healthbench, writingbench...)"),
    task_spec: str = typer.Option(None, help="A text file with your own structural-audit specification."),
    model: str = typer.Option(None, help="A GGUF path (embedded) or a model name served at --base-url."),
    base_url: str = typer.Option(None, help="An OpenAI-compatible server, e.g. http://127.0.0.1:8000/v1"),
    seeds: str = typer.Option(None, help="Comma-separated seeds; one run per seed (default: the configuration's "
                              "seed, else 0)."),
    steps: int = typer.Option(None, help="Inner-loop steps T."),
    preset: str = typer.Option("quick", help="quick (embedded demo), default, paper or paper-full"),
    runs_root: Path = typer.Option(Path("runs"), help="Where run directories are created."),
    name: str = typer.Option(None, help="Run directory name (default: METHOD-DATA-sSEED)."),
    max_calls: int = typer.Option(None, help="Stop cleanly after this many paid calls."),
    max_tokens: int = typer.Option(None, help="Stop cleanly after this many paid tokens."),
    max_cost: float = MaxCost,
    no_cache: bool = typer.Option(False, "--no-cache", help="Bypass the request cache."),
    set_: list[str] = typer.Option([], "--set", help="Override any config key: --set hyper.epsilon=0.02"),
    pilot: Path = typer.Option(None, "--pilot", help="Take ε, τ_tie and K from this pilot.json (`decoevo pilot`)."),
    track: str = TrackOption,
    track_uri: str = TrackUriOption,
) -> None:
    """Run a method (default: DecoEvo) and write a run directory per seed."""
    set_ = [*set_, *([f"budget.max_cost={max_cost}"] if max_cost is not None else [])]
    _guard(functools.partial(_run, track=(track, track_uri)), config_file, method, data, fmt, benchmark, task,
           task_spec, model, base_url, seeds, steps, preset, runs_root, name, max_calls, max_tokens, no_cache, set_,
           pilot)


@app.command("pilot")
def pilot_cmd(
    out_dir: Path = typer.Argument(..., help="Where pilot.json and the pilot's call log (pilot/) go."),
    config_file: Path = typer.Option(None, "--config", "-c", help="A YAML run configuration."),
    data: str = typer.Option(None, help="Questions, as for `decoevo run`. Default: bundled sample."),
    fmt: str = typer.Option(None, "--format", help="The format of --data."),
    benchmark: str = BenchmarkOption,
    task: str = typer.Option(None, help="Task family for the structural audit spec."),
    model: str = typer.Option(None, help="A GGUF path (embedded) or a model name served at --base-url."),
    base_url: str = typer.Option(None, help="An OpenAI-compatible server, e.g. http://127.0.0.1:8000/v1"),
    seeds: str = typer.Option(None, help="Comma-separated seeds; each seed's own pilot split (default: the "
                              "configuration's seed, else 0)."),
    preset: str = typer.Option("quick", help="quick, default, paper or paper-full"),
    set_: list[str] = typer.Option([], "--set", help="Override any config key, as the runs will: --set splits.pilot=4"),
) -> None:
    """Choose ε, τ_tie and K on the pilot split (docs/pilot.md); its calls are logged apart from any run."""
    _guard(_run, config_file, None, data, fmt, benchmark, task, None, model, base_url, seeds, None, preset,
           Path("runs"), None, None, None, False, set_, None, out_dir)


def _run(config_file: Path | None, method: str | None, data: str | None, fmt: str | None, benchmark: str | None,
         task: str | None, task_spec: str | None, model: str | None, base_url: str | None, seeds: str | None,
         steps: int | None, preset: str, runs_root: Path, name: str | None, max_calls: int | None,
         max_tokens: int | None, no_cache: bool, sets: list[str], pilot: Path | None = None,
         pilot_out: Path | None = None, track: tuple[str | None, str | None] = (None, None)) -> None:
    from .engine.config import config_from_dict, deep_merge, lm_with_flags
    from .presets import PRESETS, bundled_healthbench
    from .tracking import make_tracker
    from .userfiles import load_yaml_mapping

    tracker = make_tracker(*track)

    if preset not in PRESETS:
        fail(f"unknown preset '{preset}'; choose one of: {', '.join(PRESETS)}")
    base: dict[str, Any] = deep_merge({}, PRESETS[preset])
    source = "the command-line flags"
    if config_file is not None:
        base, source = deep_merge(base, load_yaml_mapping(config_file)), str(config_file)
    if "data" not in base or data or benchmark:
        data, fmt = _choose_data(data, fmt, benchmark)
    if "data" not in base and not data:
        base["data"] = {"path": bundled_healthbench(), "format": "healthbench"}
    if model or base_url or no_cache:  # they change the default model only (a file's role map stays)
        base["lm"] = lm_with_flags(base.get("lm"), model, base_url, no_cache)
    over = _overrides(method, data, fmt, task, task_spec, steps, max_calls, max_tokens, sets)
    if over:  # name every place a bad key may come from
        source = "the command-line flags" if config_file is None else f"{config_file} or the command-line flags"
    # --seeds wins; without it the seed a file or --set gave (validated with the rest of the config)
    seed_list: list[Any] = _seeds(seeds) if seeds is not None else [deep_merge(base, over).get("seed", 0)]
    if name is not None:
        run_name(name)
        if len(seed_list) > 1:
            fail(f"--name names one run directory, but --seeds gives {len(seed_list)} seeds; drop --name "
                 "(each seed gets METHOD-DATA-sSEED) or run one seed at a time")
    if runs_root.exists() and not runs_root.is_dir():
        fail(f"--runs-root {runs_root} is a file, not a directory")
    configs = [_absolute_paths(config_from_dict(deep_merge(base, {**over, "seed": seed}), source=source))
               for seed in seed_list]  # every seed's configuration is valid before the first run starts
    if pilot_out is not None:  # `decoevo pilot`: measure and choose; no run
        from .pilot import run_pilot

        for config in configs:
            entry = run_pilot(config, pilot_out)
            console.print(f"pilot seed {config.seed}: {entry.choice} -> {pilot_out / 'pilot.json'}")
        return
    if pilot is not None:  # what the user set explicitly keeps its value
        from .pilot import with_pilot

        from_file = load_yaml_mapping(config_file) if config_file else {}
        explicit = set(over.get("hyper", {})) | set(from_file.get("hyper", {}))
        configs = [with_pilot(c, pilot, explicit) for c in configs]
    for config in configs:
        stem = Path(config.data.path).stem.split(".")[0]
        run_dir = runs_root / (name or re.sub(r"[^A-Za-z0-9._+-]", "_", f"{config.method}-{stem}-s{config.seed}"))
        check_new_run_dir(run_dir)
        _execute(config, run_dir, resume=False, tracker=tracker)


@app.command()
def resume(
    run_dir: Path = typer.Argument(..., help="A run directory made by `decoevo run`."),
    accept_changed_data: bool = typer.Option(False, "--accept-changed-data", help="Continue even though the "
                                             "data file (its sha256) or the splits it gives changed since the start."),
    track: str = TrackOption, track_uri: str = TrackUriOption,
) -> None:
    """Continue a stopped or killed run from its last completed step; paid calls come from the cache.
    A changed method or seed is refused; a changed data file or splits too, unless --accept-changed-data."""
    _guard(_resume, run_dir, accept_changed_data, track, track_uri)


def _resume(run_dir: Path, accept_changed_data: bool = False, track: str | None = None,
            track_uri: str | None = None) -> None:
    from .engine.config import load_config
    from .tracking import make_tracker

    tracker = make_tracker(track, track_uri)
    if not (run_dir / "config.yaml").is_file():
        fail(f"{run_dir} is not a run directory (no config.yaml)")
    _execute(load_config(run_dir / "config.yaml"), run_dir, resume=True, tracker=tracker,
             accept_changed_data=accept_changed_data)


@app.command()
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
    model: str = typer.Option(None, help="A GGUF path (embedded) or a model name served at --base-url."),
    base_url: str = typer.Option(None, help="An OpenAI-compatible server, e.g. http://127.0.0.1:8000/v1"),
    steps: int = typer.Option(None, help="Inner-loop steps T."),
    max_calls: int = typer.Option(None, help="Per-run budget of paid calls."),
    max_tokens: int = typer.Option(None, help="Per-run budget of paid tokens."),
    max_cost: float = MaxCost,
    evaluate: str = typer.Option(None, help="Post-run steps, comma-separated (test, dynamics, alignment), "
                                 "or 'none'. Default: test."),
    workers: int = typer.Option(None, min=1, help="Cells at once (default: min(cells, cores); 8 per core when "
                                 "no model is embedded; on Ray, CPUs)."),
    threads: int = typer.Option(None, min=1, help="Threads per cell (default: cores // workers)."),
    ray_address: str = typer.Option(None, help="Run cells as Ray tasks on this cluster: auto or HOST:PORT."),
    no_cache: bool = typer.Option(False, "--no-cache", help="Bypass the request cache."),
    set_: list[str] = typer.Option([], "--set", help="Override a shared setting: --set hyper.epsilon=0.02"),
    pilot: Path = typer.Option(None, "--pilot", help="Take ε, τ_tie and K per benchmark and seed from this "
                               "pilot.json (`decoevo pilot`)."),
    track: str = TrackOption,
    track_uri: str = TrackUriOption,
) -> None:
    """Run a grid of methods × seeds × benchmarks (matched splits); finished cells are not rerun."""
    from .tracking import export_tracking

    set_ = [*set_, *([f"budget.max_cost={max_cost}"] if max_cost is not None else [])]
    _guard(export_tracking, track, track_uri)  # one tracker run per cell
    try:
        _guard(_sweep, sweep_dir, spec, methods, seeds, data, fmt, task, benchmark, preset, model, base_url, steps,
               max_calls, max_tokens, evaluate, workers, threads, ray_address, no_cache, set_, pilot)
    except KeyboardInterrupt:  # pragma: no cover - interactive
        fail(f"interrupted; run `decoevo sweep {sweep_dir}` again to continue (finished cells are kept)", 130)


def _sweep(sweep_dir: Path, spec_file: Path | None, methods: str | None, seeds: str | None, data: str | None,
           fmt: str | None, task: str | None, benchmark: str | None, preset: str | None, model: str | None,
           base_url: str | None, steps: int | None, max_calls: int | None, max_tokens: int | None,
           evaluate: str | None, workers: int | None, threads: int | None, ray_address: str | None,
           no_cache: bool, sets: list[str], pilot: Path | None = None) -> None:
    from .sweep import build_spec, run_sweep

    if sweep_dir.exists() and not sweep_dir.is_dir():
        fail(f"{sweep_dir} exists and is not a directory; name a sweep directory")
    over = _overrides(None, None, None, None, None, steps, max_calls, max_tokens, sets)
    if pilot is not None:
        over["pilot"] = str(pilot.resolve())
    if methods:
        over["methods"] = [m.strip() for m in methods.split(",") if m.strip()]
    if seeds:
        over["seeds"] = _seeds(seeds)
    if preset:
        over["preset"] = preset
    if evaluate:
        over["evaluate"] = [] if evaluate.strip() == "none" else [s.strip() for s in evaluate.split(",") if s.strip()]
    if no_cache:
        over.setdefault("lm", {})["use_cache"] = False
    bench = None
    if benchmark and not data:  # a fetched public benchmark
        data, fmt = _choose_data(None, fmt, benchmark)
        benchmark = benchmark.replace(":", "-")
    elif data:
        data, fmt = _choose_data(data, fmt, None)
    if data:
        stem = Path(data).stem.split(".")[0]
        bench = {"name": benchmark or stem, "data": str(Path(data).resolve()), "format": fmt or "jsonl",
                 **({"task": task} if task else {})}
    elif fmt or task:
        fail("--format and --task describe --data; pass --data too, or --benchmark NAME[:split] alone")
    spec, source = build_spec(sweep_dir, spec_file, overrides=over, benchmark=bench, model=model, base_url=base_url)
    book = run_sweep(spec, sweep_dir, source=source, workers=workers, threads=threads, ray_address=ray_address,
                     console=console)
    counts = book.counts()
    console.print(f"sweep {sweep_dir}: {counts['done']} done, {counts['failed']} failed "
                  f"(status: {sweep_dir / 'status.json'})")
    failed = book.failed()
    if failed:
        for cell_id, status in failed.items():
            err_console.print(f"[red]failed[/] {cell_id}: {escape(status.error or '')}", highlight=False)
        raise typer.Exit(1)


@app.command()
@guarded
def export(
    run_dir: Path = typer.Argument(..., help="A run directory."),
    output: Path = typer.Option(None, "--output", "-o", help="Write the skill here instead of stdout."),
) -> None:
    """Print the final solver skill (the only artifact that ships)."""
    from .rundir import RunReader

    try:
        text = RunReader(run_dir).shipped_skill_text()
    except UserError as exc:
        fail(str(exc))
    if output:
        write_output(output, text.strip() + "\n")
        err_console.print(f"wrote {output}")
    else:
        sys.stdout.write(text.strip() + "\n")


def check_output(output: Path, replaced: bool = False) -> None:
    """A user-named output file (-o): its directory is made; a path that cannot be a file is one line.
    `replaced`: the file is written atomically (a new file renamed over it), so a device or a pipe
    there would be replaced, not written to."""
    if output.is_dir():
        fail(f"-o {output}: is a directory; name a file")
    if replaced and output.exists() and not output.is_file():
        fail(f"-o {output}: is not a regular file; name a file")
    try:
        output.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        fail(f"-o {output}: cannot create its directory ({exc.strerror or exc})")


def write_output(output: Path, text: str) -> None:
    check_output(output)
    try:
        output.write_text(text, encoding="utf-8")
    except OSError as exc:
        fail(f"-o {output}: cannot write ({exc.strerror or exc})")


# ---- evaluation ----------------------------------------------------------------------------------
RunDirs = typer.Argument(..., help="Run directories made by `decoevo run` (or a sweep's runs).")
GraderModel = typer.Option(None, "--grader-model", help="Gold grader: a GGUF path, or a model name at "
                           "--grader-base-url. Default: the run's own model (checks the pipeline; a tiny model "
                           "does not grade meaningfully).")
GraderBaseUrl = typer.Option(None, "--grader-base-url", help="OpenAI-compatible server for the gold grader.")


def _grader_spec(model: str | None, base_url: str | None) -> ModelSpec | None:
    if not model and not base_url:
        return None
    try:
        return model_spec_from_flags(model, base_url)
    except ValueError as exc:
        fail(str(exc))
        raise


def _each_run(run_dirs: list[Path], title: str, job: Any) -> None:
    """Run `job(run_dir, progress_callback)` for every run; one failing run does not stop the others.
    A job returns (summary line, ok): not ok (nothing graded, or the result was not saved) fails the command."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    failed = user_errors = 0
    for run_dir in run_dirs:
        try:
            with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                          console=console, transient=True) as progress:
                bar = progress.add_task(f"{title} {run_dir.name}", total=None)

                def tick(total: int | None = None, bar: Any = bar, progress: Any = progress) -> None:
                    progress.update(bar, advance=1, total=total)

                summary, ok = job(run_dir, tick)
            if ok:
                console.print(f"{run_dir}: {summary}")
            else:
                failed += 1
                err_console.print(f"[bold red]error:[/] {run_dir}: {summary}", highlight=False)
        except (UserError, LMError) as exc:
            failed += 1
            user_errors += isinstance(exc, UserError)
            where = "" if str(run_dir) in str(exc) else f"{run_dir}: "
            err_console.print(f"[bold red]error:[/] {where}{exc}", highlight=False)
    if failed:
        fail(f"{failed} of {len(run_dirs)} run(s) could not be evaluated (see above); fix them and rerun; "
             "answers already paid for come from the cache", code=2 if user_errors else 1)


def _saved(record: dict[str, Any], graded: int, what: str) -> tuple[str, bool]:
    """The summary line and whether the command succeeded: something graded, and the result saved."""
    if graded == 0:
        return f"{what}: nothing could be graded; no result written (details in RUN/eval/failed/)", False
    if "kept_previous" in record:
        return f"{what}: {record['kept_previous']}", False
    return what, True


def _fmt(x: float | None, scale: float = 1.0) -> str:
    return "n/a" if x is None else f"{x * scale:.1f}"


Force = typer.Option(False, "--force", help="Replace an earlier result even if this one graded fewer questions.")


@app.command("eval")
@guarded
def eval_(
    run_dirs: list[Path] = RunDirs,
    split: str = typer.Option("test", help="The run's split to grade on (test by default)."),
    data: str = typer.Option(None, help="Transfer: grade on every question of this benchmark file instead."),
    fmt: str = typer.Option(None, "--format", help="Format of --data (e.g. llmeval_med, eqbench_cw)."),
    benchmark: str = typer.Option(None, "--benchmark", help="Transfer: grade on a fetched public benchmark, "
                                  "NAME[:split], instead of --data."),
    limit: int = typer.Option(None, min=1, help="Transfer: use only the first N questions (sorted by id)."),
    skill_version: int = typer.Option(None, min=0, help="Grade this solver version instead of the final one."),
    grader_model: str = GraderModel,
    grader_base_url: str = GraderBaseUrl,
    force: bool = Force,
) -> None:
    """Grade a run's solver skill with the benchmark's official rule; writes RUN/eval/<name>.json."""
    from .api import evaluate_async

    grader = _grader_spec(grader_model, grader_base_url)
    if data and not fmt:
        fail("--data needs --format (the benchmark's format, e.g. llmeval_med or eqbench_cw)")
    path: str | None = data
    path_fmt: str | None = fmt
    if data or benchmark:
        try:
            path, path_fmt = _choose_data(data, fmt, benchmark)
        except ConfigError as exc:
            fail(str(exc))
    target = {"path": path, "format": path_fmt or "jsonl", "limit": limit} if path else None

    def job(run_dir: Path, tick: Any) -> tuple[str, bool]:
        r = asyncio.run(evaluate_async(run_dir, split=split, data=target, grader=grader, skill_version=skill_version,
                                       force=force, on_item=lambda _: tick()))
        return _saved(r, r["n_graded"], f"{r['name']} {r['benchmark']} score {_fmt(r['score'])} ({r['n_graded']} "
                                        f"graded, {r['n_ungraded']} ungraded; grader {r['grader_model']})")

    _each_run(run_dirs, "grading", job)


@app.command()
@guarded
def dynamics(
    run_dirs: list[Path] = RunDirs,
    split: str = typer.Option("diagnostic", help="The held-out split to track (diagnostic by default)."),
    grader_model: str = GraderModel,
    grader_base_url: str = GraderBaseUrl,
    force: bool = Force,
) -> None:
    """Score every checkpoint on the diagnostic split: generated-rubric proxy and gold grade (Figure 3)."""
    from .api import dynamics_async

    grader = _grader_spec(grader_model, grader_base_url)

    def job(run_dir: Path, tick: Any) -> tuple[str, bool]:
        r = asyncio.run(dynamics_async(run_dir, split=split, grader=grader, force=force, on_point=lambda _: tick()))
        graded = sum(1 for p in r["points"] if p.get("gold") is not None or p.get("proxy") is not None)
        return _saved(r, graded, "; ".join(f"step {p['step']}: proxy {_fmt(p['proxy'])} gold {_fmt(p['gold'])}"
                                           for p in r["points"]))

    _each_run(run_dirs, "checkpoints", job)


@app.command()
@guarded
def align(
    run_dirs: list[Path] = RunDirs,
    split: str = typer.Option("test", help="Questions whose rubrics are compared (test by default)."),
    matcher_model: str = typer.Option(None, "--matcher-model", help="Matcher: a GGUF path or a model name at "
                                      "--matcher-base-url. Default: the grader model, else the run's model."),
    matcher_base_url: str = typer.Option(None, "--matcher-base-url", help="OpenAI-compatible server for the matcher."),
    grader_model: str = GraderModel,
    grader_base_url: str = GraderBaseUrl,
    force: bool = Force,
) -> None:
    """Criterion-level P/R/F1 of the final generated rubrics against the gold rubrics (Table 5)."""
    from .api import align_async

    grader = _grader_spec(grader_model, grader_base_url)
    matcher = _grader_spec(matcher_model, matcher_base_url)

    def job(run_dir: Path, tick: Any) -> tuple[str, bool]:
        r = asyncio.run(align_async(run_dir, split=split, grader=grader, matcher=matcher, force=force))
        return _saved(r, r["n_questions"], f"P {_fmt(r['precision'], 100)} R {_fmt(r['recall'], 100)} "
                                           f"F1 {_fmt(r['f1'], 100)} over {r['n_questions']} question(s) "
                                           f"({r['n_failed']} failed; matcher {r['matcher_model']})")

    _each_run(run_dirs, "matching", job)


@app.command()
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


def main() -> None:  # pragma: no cover
    sys.exit(app())
