"""`decoevo run` and `decoevo resume`: a new run per seed, or a stopped run continued (flags and printing;
configurations are assembled in `settings`, the work is in the library)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import typer
from rich.markup import escape

from ..errors import ConfigError
from ..lm import LMError
from ..redact import redact
from .boundary import failure_label, printable
from .common import (
    AllowUnlistedOption,
    BaseUrlOption,
    BenchmarkOption,
    ConcurrencyOption,
    ConfigOption,
    JsonOption,
    LimitOption,
    MaxCost,
    ModelOption,
    NoCacheOption,
    SetOption,
    StepsOption,
    TrackOption,
    TrackUriOption,
    console,
    err_console,
    fail,
    guard,
)
from .data import choose_data
from .display import print_json
from .server_fit import fit_to_servers
from .stopping import Stop, sigterm_as_interrupt, where_stopped

IMPORT_PANEL = "promptfoo configs and Inspect datasets (--format promptfoo|inspect)"


# The cyclic garbage collector during a run: its young generation collected every GC_YOUNG allocations, not
# Python's 700, and what start-up made (modules, classes, schemas: ~60,000 objects that live as long as the
# process) moved out of its reach, so a full collection no longer walks it. A run allocates for every call (a
# task, a request, a reply, the records) and frees nearly all of it at once, by reference counting: the
# collector cost ~0.3 s of CPU over a 2,400-call run, and ~0.1 s so (bench/client/run_cpu.py, docs/performance.md).
GC_YOUNG = 7000


@contextlib.contextmanager
def quiet_gc() -> Iterator[None]:
    """Tune the collector for the run this process is about to make (see GC_YOUNG), and put it back after:
    a process that calls the command in-process (a test, a notebook) keeps its own settings."""
    import gc

    before = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(GC_YOUNG, 10, 10)
    try:
        yield
    finally:
        gc.set_threshold(*before)
        gc.unfreeze()


def _execute(config: Any, run_dir: Path, resume: bool, tracker: Any = None, accept_changed_data: bool = False,
             accept_changed_config: bool = False, as_json: bool = False, staged: bool = False) -> None:
    """`staged`: `run_dir` holds only a staged import (interop/staging.py), removed if the run saves nothing,
    so a failure says to run the same command again, not to resume a folder that is gone."""
    from ..tracking import where_logged
    from .run_progress import run_with_progress

    out = err_console if as_json else console
    callbacks = [tracker(run_dir)] if tracker is not None else []
    ended = "FAILED"  # what a tracker that saw no finish event records
    stop = Stop()
    try:
        with sigterm_as_interrupt(stop):
            # what the servers can take, before the first call (max_concurrency, timeouts; lines say what was set)
            config = config.model_copy(update={"lm": fit_to_servers(config.lm, lambda line: out.print(
                line, highlight=False))})
            with quiet_gc():
                run_with_progress(config, run_dir, resume=resume, console=out, callbacks=callbacks,
                                  accept_changed_data=accept_changed_data,
                                  accept_changed_config=accept_changed_config)
        ended = "FINISHED"
        if as_json:
            from ..rundir import RunReader  # the run's reader, after it

            summary = RunReader(run_dir).summary()
            print_json({"run_dir": str(run_dir), **(summary.model_dump(mode="json") if summary else {})})
    except LMError as exc:
        kept = _discard_unstarted(run_dir) if staged else run_dir.exists()
        then = (f"Everything up to the last completed step is saved; fix the cause and continue with "
                f"`decoevo resume {run_dir}`." if kept or resume else
                "Nothing was saved; fix the cause and run the same command again.")
        fail(f"a model call failed ({failure_label(exc)}): {str(exc).rstrip('.')}. {then}",
             code=1 if exc.category != "infrastructure" else 2)
    except KeyboardInterrupt:
        how, code = ("stopped by SIGTERM", 143) if stop.signal == "SIGTERM" else ("interrupted", 130)
        # nothing was worth keeping: api.run_config_async removed a new run's folder, a staged import goes too
        if not (_discard_unstarted(run_dir) if staged else run_dir.exists()):
            fail(f"{how} before anything was saved; run the same command again (paid calls come from the cache)",
                 code)
        fail(f"{how} {where_stopped(run_dir)}; continue with `decoevo resume {run_dir}` (completed steps and paid "
             "calls are kept)", code)
    finally:
        for callback in callbacks:
            callback.close(ended)
            (err_console if as_json else console).print(
                escape(redact(where_logged(callback.uri, callback.experiment, callback.run_id))), highlight=False,
                soft_wrap=True)  # one line: the command in it stays whole to copy

def run(
    config_file: Path = ConfigOption,
    method: str = typer.Option(None, help="decoevo, skillopt, sc_coevo, zero_shot, ... (see `decoevo methods`)"),
    data: str = typer.Option(None, help="Questions: JSONL (yours) or a benchmark file, an https URL or "
                             "hf://datasets/OWNER/NAME/FILE (default: the bundled sample)."),
    fmt: str = typer.Option(None, "--format", help="jsonl (yours), healthbench, writingbench, scholarqa_cs, "
                            "researchqa, llmeval_med, eqbench_cw; promptfoo (a config) or inspect (a dataset)"),
    question_var: str = typer.Option(None, "--question-var", rich_help_panel=IMPORT_PANEL,
                                     help="promptfoo: the test variable holding the question (default: found)."),
    strict: bool = typer.Option(False, "--strict", rich_help_panel=IMPORT_PANEL,
                                help="Refuse a promptfoo config or Inspect dataset holding anything decoevo does "
                                     "not use (assertions promptfoo runs itself, sandbox fields, ...)."),
    benchmark: str = BenchmarkOption,
    task: str = typer.Option(None, help="Task family for the structural audit spec (healthbench, writingbench...)"),
    task_spec: str = typer.Option(None, help="A text file with your own structural-audit specification."),
    model: str = ModelOption,
    base_url: str = BaseUrlOption,
    seeds: str = typer.Option(None, help="Comma-separated seeds; one run per seed (default: the configuration's "
                              "seed, else 0)."),
    steps: int = StepsOption,
    preset: str = typer.Option(None, help="quick, default, paper, lean or paper-full (default: default against a "
                               "server, quick for the embedded model)"),
    limit: int = LimitOption,
    concurrency: int = ConcurrencyOption,
    runs_root: Path = typer.Option(Path("runs"), help="Where run directories are created."),
    name: str = typer.Option(None, help="Run directory name (default: METHOD-DATA-sSEED)."),
    max_calls: int = typer.Option(None, help="Stop cleanly after this many paid calls."),
    max_tokens: int = typer.Option(None, help="Stop cleanly after this many paid tokens."),
    max_cost: float = MaxCost,
    no_cache: bool = NoCacheOption,
    set_: list[str] = SetOption,
    pilot: Path = typer.Option(None, "--pilot", help="Take ε, τ_tie and K from this pilot.json (`decoevo pilot`)."),
    allow_unlisted_model: bool = AllowUnlistedOption,
    track: str = TrackOption,
    track_uri: str = TrackUriOption,
    as_json: bool = JsonOption,
) -> None:
    """Run a method (default: DecoEvo) and write a run directory per seed."""
    from .settings import RunFlags

    flags = RunFlags(config_file, method, data, fmt, benchmark, task, task_spec, model, base_url, seeds, steps,
                     preset, max_calls, max_tokens, max_cost, no_cache, tuple(set_), pilot, limit, concurrency)
    guard(_run, flags, runs_root, name, (track, track_uri), as_json, allow_unlisted_model, question_var, strict)

def _run(flags: Any, runs_root: Path, name: str | None, track: tuple[str | None, str | None], as_json: bool,
         allow_unlisted: bool = False, question_var: str | None = None, strict: bool = False) -> None:
    from dataclasses import replace

    from ..interop import IMPORT_FORMATS

    imported = None
    if flags.fmt in IMPORT_FORMATS:  # read (and refused) before anything is made; staged into each run directory
        # the readers (YAML with line numbers, promptfoo's and Inspect's formats) load only for an import
        from ..interop import read_imported
        from .import_flags import flags_with_imported_model

        if not flags.data:
            raise ConfigError(f"--format {flags.fmt} needs --data FILE")
        imported = read_imported(flags.data, flags.fmt, question_var=question_var, strict=strict)
        flags, model_line = flags_with_imported_model(replace(flags, fmt=None), imported)
        out = err_console if as_json else console
        for line in [*imported.account(), *([model_line] if model_line else [])]:
            out.print(printable(line), highlight=False, markup=False)  # the file's text, never a terminal control
    elif question_var is not None:
        raise ConfigError("--question-var goes with --format promptfoo")
    elif strict:
        raise ConfigError("--strict goes with --format promptfoo or --format inspect")
    from ..lm.local import check_embedded
    from ..tasks.splits import SplitsTooLarge
    from ..tracking import make_tracker
    from .endpoint import check_keys, check_served, with_smaller_preset
    from .settings import check_new_run_dir, preset_choice, run_configs, run_dir_for, run_name

    tracker = make_tracker(*track)
    configs = run_configs(flags, choose_data)
    chosen = preset_choice(flags)
    if chosen.reason is not None:
        (err_console if as_json else console).print(f"preset: {chosen.name} ({chosen.reason})", highlight=False)
    check_embedded(configs[0].lm.models)  # before a run directory exists: a missing library is no run
    check_keys(configs[0].lm, os.environ)
    check_served(configs[0].lm, allow_unlisted)
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
        made = not run_dir.exists()
        if imported is not None:
            from ..interop.staging import staged_config

            config = staged_config(config, imported, run_dir)
        staged = imported is not None and made
        try:
            _execute(config, run_dir, resume=False, tracker=tracker, as_json=as_json, staged=staged)
        except SplitsTooLarge as exc:
            raise ConfigError(with_smaller_preset(str(exc), chosen.name)) from None
        finally:  # a run that saved nothing leaves no staged import behind: the same command can run again
            if staged:
                _discard_unstarted(run_dir)


def _discard_unstarted(run_dir: Path) -> bool:
    """Remove a staged run that saved nothing; True when something was saved (and kept, for a resume)."""
    from ..interop.staging import discard_unstarted, saved_anything

    discard_unstarted(run_dir)
    return run_dir.is_dir() and saved_anything(run_dir)

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
                                   "timeouts, rates: `decoevo config`), e.g. hyper.concurrency=2"),
    track: str = TrackOption, track_uri: str = TrackUriOption,
    as_json: bool = JsonOption,
) -> None:
    """Continue a stopped or killed run from its last completed step; paid calls come from the cache.
    A changed method or seed is refused; a changed data file or splits too, unless --accept-changed-data;
    an edited config.yaml that changes results too, unless --accept-changed-config."""
    guard(_resume, run_dir, accept_changed_data, accept_changed_config, config_file, set_, track, track_uri, as_json)

def _resume(run_dir: Path, accept_changed_data: bool, accept_changed_config: bool, config_file: Path | None,
            sets: list[str], track: str | None, track_uri: str | None, as_json: bool) -> None:
    from ..rundir import RunReader
    from ..tracking import make_tracker
    from .settings import resume_config
    from .shipped import closing_lines

    summary = RunReader(run_dir).summary() if run_dir.is_dir() else None
    # nothing to continue (unless an accepted config change, e.g. more steps, extends it): say so, run nothing.
    # Anything a resume refuses (a link, a damaged checkpoint, an edit that changes results) goes the resume's
    # way instead, to be refused there.
    if (summary is not None and summary.run_status == "finished" and not accept_changed_config
            and _nothing_to_resume(run_dir, resume_config(run_dir, config_file, sets).model_dump(mode="json"))):
        out = err_console if as_json else console
        out.print(f"{run_dir} has already finished ({summary.steps_done} inner steps; summary.json): nothing to "
                  "resume", highlight=False)
        for line in closing_lines(run_dir):
            out.print(line, highlight=False, markup=False, soft_wrap=line.lstrip().startswith("decoevo "))
        if as_json:
            print_json({"run_dir": str(run_dir), **summary.model_dump(mode="json")})
        return
    tracker = make_tracker(track, track_uri)
    _execute(resume_config(run_dir, config_file, sets), run_dir, resume=True, tracker=tracker,
             accept_changed_data=accept_changed_data, accept_changed_config=accept_changed_config, as_json=as_json)


def _nothing_to_resume(run_dir: Path, config: dict[str, Any]) -> bool:
    """A finished run that a resume would only read again: its own folder with no link in it, a checkpoint
    that reads, and a config.yaml that changed nothing that changes results since it was recorded."""
    from ..engine.resume_config import result_changes
    from ..engine.run import checked_checkpoint
    from ..rundir import RunReader

    if run_dir.is_symlink() or any(p.is_symlink() for p in run_dir.rglob("*")):
        return False
    checked_checkpoint(run_dir)  # a damaged checkpoint or call log is named even when nothing is left to do
    recorded = RunReader(run_dir).recorded_config()
    return recorded is None or not result_changes(recorded, config)
