"""The library API: what a notebook or a script calls; the command line is a thin layer over it.

    import decoevo
    result = decoevo.optimize(questions, method="decoevo", lm=decoevo.ModelSpec(...), task_spec="...")
    print(result.solver.text)                 # the skill that ships
    decoevo.evaluate(result.run_dir)          # the final skill graded on the run's test split
    decoevo.compare(result.run_dir)           # the initial and the shipped skill, paired per question

Every function is synchronous (it runs its own event loop, or a worker thread when called from inside
one, as in Jupyter) and has an `_async` twin. Callbacks are objects with `on_event(event, state)` and/or
`on_call(record)`: they see the typed events the run directory records, and every answered model call.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import threading
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, runtime_checkable

from .api_args import (
    check_callbacks,
    check_lm,
    need,
    need_callable,
    need_mapping,
    need_model,
    need_path,
    need_text,
    new_run_dir,
    question_lines,
)
from .domain import Question
from .engine.config import RunConfig, config_from_dict, deep_merge, load_config
from .engine.run import Engine, RunResult, checked_checkpoint
from .engine.served import API_NAMING, check_served
from .engine.state import LoopState
from .errors import ArgumentError, ConfigError
from .lm import CallRecord, LMConfig, ModelSpec, UsageLedger
from .rundir import RunEvent, RunReadError
from .rundir.records import CALLS, CHECKPOINT, CONFIG, LEDGER, QUESTIONS
from .userfiles import read_user_text

if TYPE_CHECKING:
    from .rundir import RunReader

TASK_SPEC = "task_spec.txt"

T = TypeVar("T")

__all__ = ["RunCallback", "RunResult", "align", "align_async", "compare", "compare_async", "dynamics",
           "dynamics_async", "evaluate", "evaluate_async", "optimize", "optimize_async", "resume",
           "resume_async", "run_config", "run_config_async"]


@runtime_checkable
class RunCallback(Protocol):
    """Either method may be left out. Both run on the event loop: keep them quick."""

    def on_event(self, event: RunEvent, state: LoopState) -> None: ...

    def on_call(self, record: CallRecord) -> None: ...


def _run_sync(make: Callable[[], Awaitable[T]]) -> T:
    """Run a coroutine to completion from synchronous code, also when an event loop is already
    running in this thread (Jupyter): then on a worker thread with its own loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(make())  # type: ignore[arg-type]
    box: dict[str, Any] = {}

    def work() -> None:
        try:
            box["value"] = asyncio.run(make())  # type: ignore[arg-type]
        except BaseException as exc:  # re-raised in the caller's thread
            box["error"] = exc

    thread = threading.Thread(target=work, name="decoevo-api")
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box["value"]


def _observer(callbacks: Iterable[object]) -> tuple[Callable[[RunEvent, LoopState], None] | None,
                                                    Callable[[CallRecord], None] | None]:
    on_event = [cb.on_event for cb in callbacks if callable(getattr(cb, "on_event", None))]  # type: ignore[attr-defined]
    on_call = [cb.on_call for cb in callbacks if callable(getattr(cb, "on_call", None))]  # type: ignore[attr-defined]

    def events(event: RunEvent, state: LoopState) -> None:
        for fn in on_event:
            fn(event, state)

    def calls(record: CallRecord) -> None:
        for fn in on_call:
            fn(record)

    return (events if on_event else None), (calls if on_call else None)


# ---- running a configuration -------------------------------------------------------------------------
async def run_config_async(config: RunConfig, run_dir: Path | str, *, resume: bool = False,
                           callbacks: Sequence[object] = (), questions: list[Question] | None = None,
                           engine_hook: Callable[[Engine], None] | None = None,
                           accept_changed_data: bool = False, accept_changed_config: bool = False) -> RunResult:
    """Run (or resume) `config` in `run_dir`. A new run that fails before anything worth keeping (no
    completed step, no answered model call) leaves no directory behind: it would block the next
    attempt. One that got further is kept for `resume`, which refuses a changed method, seed, data file
    or splits (the last two: unless `accept_changed_data`), and result-changing settings unless
    `accept_changed_config`."""
    need_path("run_config", "run_dir", run_dir)
    if not isinstance(config, RunConfig):
        raise ArgumentError(f"run_config: config must be a RunConfig, not {type(config).__name__}")
    callbacks = check_callbacks("run_config", callbacks)
    run_dir = Path(run_dir)
    created = not run_dir.exists()
    try:
        on_event, on_call = _observer(callbacks)
        engine = Engine(config, run_dir, observer=on_event, on_call=on_call, questions=questions,
                        accept_changed_data=accept_changed_data, accept_changed_config=accept_changed_config)
        if engine_hook is not None:
            engine_hook(engine)
        return await engine.run_async(resume=resume)
    except BaseException:
        if created and run_dir.is_dir() and not any((run_dir / f).exists() for f in (CHECKPOINT, CALLS)):
            shutil.rmtree(run_dir, ignore_errors=True)
        raise


def run_config(config: RunConfig, run_dir: Path | str, *, resume: bool = False,
               callbacks: Sequence[object] = ()) -> RunResult:
    return _run_sync(lambda: run_config_async(config, run_dir, resume=resume, callbacks=callbacks))


# ---- optimize ---------------------------------------------------------------------------------------
def _lm_config(lm: LMConfig | ModelSpec | Mapping[str, Any] | None) -> dict[str, Any] | None:
    if lm is None:
        return None
    if isinstance(lm, ModelSpec):
        return LMConfig(models={"default": lm}).model_dump(mode="json")
    if isinstance(lm, LMConfig):
        return lm.model_dump(mode="json")
    return dict(lm)


def build_config(questions_path: Path, *, method: str, seed: int, lm: Any, task: str | None,
                 task_spec_path: Path | None, hyper: Mapping[str, Any] | None, splits: Mapping[str, Any] | None,
                 budget: Mapping[str, Any] | None, preset: str | None, base: Mapping[str, Any] | None) -> RunConfig:
    from .presets import PRESETS

    if preset is not None and preset not in PRESETS:
        raise ConfigError(f"unknown preset '{preset}'; choose one of: {', '.join(PRESETS)}")
    raw: dict[str, Any] = deep_merge(dict(PRESETS[preset]) if preset else {}, dict(base or {}))
    data = {"path": str(questions_path), "format": "jsonl"}
    if task:
        data["task"] = task
    if task_spec_path is not None:
        data["task_spec"] = str(task_spec_path)
    over: dict[str, Any] = {"method": method, "seed": seed, "data": data}
    for key, value in (("hyper", hyper), ("splits", splits), ("budget", budget), ("lm", _lm_config(lm))):
        if value is not None:
            over[key] = dict(value)
    return config_from_dict(deep_merge(raw, over), source="decoevo.optimize arguments")


async def optimize_async(questions: Sequence[Question | Mapping[str, Any]], *, method: str = "decoevo",
                         lm: LMConfig | ModelSpec | Mapping[str, Any] | None = None, task_spec: str | None = None,
                         task: str | None = None, hyper: Mapping[str, Any] | None = None,
                         splits: Mapping[str, Any] | None = None, budget: Mapping[str, Any] | None = None,
                         seed: int = 0, preset: str | None = "default", config: Mapping[str, Any] | None = None,
                         run_dir: Path | str | None = None, callbacks: Sequence[object] = (),
                         allow_unlisted: bool = False) -> RunResult:
    """Optimize a solver skill on in-memory questions (dicts in the JSONL question format, or `Question`s).

    The questions (and `task_spec`, your structural-audit specification as text) are written into the run
    directory, so the run can be resumed, evaluated and reported later like any other. `run_dir` must be
    new or empty (nothing of yours is ever written over); without it the run goes to a new temporary
    directory (its path is `result.run_dir`). Every argument is checked before anything is written: a
    wrong one is an `ArgumentError` or `ConfigError` naming it. A served model its server's `GET /models`
    does not list is a `ConfigError` before any call (`allow_unlisted=True`: a server that answers any
    name, e.g. llama.cpp's)."""
    fn = "optimize"
    need_text(fn, "method", method)
    if method is None:
        raise ArgumentError(f"{fn}: method must be a string, not NoneType")
    for name, value in (("task_spec", task_spec), ("task", task), ("preset", preset)):
        need_text(fn, name, value)
    for section, mapping in (("hyper", hyper), ("splits", splits), ("budget", budget), ("config", config)):
        need_mapping(fn, section, mapping)
    need(fn, "seed", seed, (int,), "an integer")
    need(fn, "allow_unlisted", allow_unlisted, (bool,), "True or False")
    check_lm(fn, lm)
    callbacks = check_callbacks(fn, callbacks)
    lines = question_lines(fn, questions)
    chosen = new_run_dir(fn, run_dir)
    # The whole configuration is validated before the directory is made or a byte is written.
    where = chosen if chosen is not None else Path(tempfile.gettempdir()) / "decoevo-run-(new)"
    checked = build_config(where / QUESTIONS, method=method, seed=seed, lm=lm, task=task,
                           task_spec_path=where / TASK_SPEC if task_spec is not None else None, hyper=hyper,
                           splits=splits, budget=budget, preset=preset, base=config)
    # GET /models is a blocking request: off the event loop, before the directory is made
    await asyncio.to_thread(check_served, checked.lm, allow_unlisted, naming=API_NAMING)
    path = chosen if chosen is not None else Path(tempfile.mkdtemp(prefix="decoevo-run-")).resolve()
    path.mkdir(parents=True, exist_ok=True)
    written = [path / QUESTIONS]
    try:
        with (path / QUESTIONS).open("x", encoding="utf-8") as out:  # "x": never over an existing file
            out.write(lines)
        if task_spec is not None:
            written.append(path / TASK_SPEC)
            with (path / TASK_SPEC).open("x", encoding="utf-8") as out:
                out.write(task_spec)
        cfg = build_config(path / QUESTIONS, method=method, seed=seed, lm=lm, task=task,
                           task_spec_path=path / TASK_SPEC if task_spec is not None else None, hyper=hyper,
                           splits=splits, budget=budget, preset=preset, base=config)
    except BaseException:
        for f in written:
            f.unlink(missing_ok=True)
        raise
    try:
        return await run_config_async(cfg, path, callbacks=callbacks)
    except BaseException:
        # A run that failed before anything worth keeping leaves the directory as it found it: empty (a
        # directory the run made itself is removed by run_config_async).
        if path.is_dir() and not any((path / f).exists() for f in (CHECKPOINT, CALLS)):
            for child in path.iterdir():
                shutil.rmtree(child) if child.is_dir() and not child.is_symlink() else child.unlink()
            if chosen is None:
                path.rmdir()
        raise


def optimize(questions: Sequence[Question | Mapping[str, Any]], **kwargs: Any) -> RunResult:
    """Synchronous `optimize_async` (see there for the arguments)."""
    return _run_sync(lambda: optimize_async(questions, **kwargs))


# ---- resume -----------------------------------------------------------------------------------------
async def resume_async(run_dir: Path | str, *, callbacks: Sequence[object] = (),
                       accept_changed_data: bool = False, accept_changed_config: bool = False) -> RunResult:
    """Continue a stopped or killed run from its last completed step; paid calls come from the cache.
    A changed data file or splits is refused unless `accept_changed_data`; an edit of config.yaml that
    changes results (anything but concurrency, timeouts, retries, rates, tracking) unless
    `accept_changed_config`."""
    if run_dir is None:  # need_path lets an optional argument's None through; this one is required
        raise ArgumentError("resume: run_dir must be a run directory (str or pathlib.Path), not None")
    need_path("resume", "run_dir", run_dir)
    callbacks = check_callbacks("resume", callbacks)
    from .rundir import RunReader  # the reader (and the resume loader) load for a resume only

    path = Path(run_dir)
    reader = RunReader(path)
    if not reader.exists():
        raise ConfigError(f"{path} is not a run directory (no config.yaml)")
    finished = finished_result(reader)
    if finished is not None:
        return finished
    return await run_config_async(load_config(path / CONFIG), path, resume=True, callbacks=callbacks,
                                  accept_changed_data=accept_changed_data, accept_changed_config=accept_changed_config)


def finished_result(reader: RunReader) -> RunResult | None:
    """The result of a run that finished all its steps, read from disk (resuming it does nothing)."""
    summary, checked = reader.summary(), checked_checkpoint(reader.path)
    if summary is None or summary.run_status != "finished" or checked is None:
        return None
    state, ledger = checked
    written = reader.ledger()  # the ledger at the finish (it counts calls made after the last checkpoint)
    try:
        return RunResult(reader.path, state, UsageLedger.from_dict(written) if written else ledger)
    except ValueError as exc:
        field, _, problem = str(exc).partition(": ")
        raise RunReadError(f"{reader.path / LEDGER}: field '{field}': {problem}") from None


def resume(run_dir: Path | str, *, callbacks: Sequence[object] = (), accept_changed_data: bool = False,
           accept_changed_config: bool = False) -> RunResult:
    return _run_sync(lambda: resume_async(run_dir, callbacks=callbacks, accept_changed_data=accept_changed_data,
                                          accept_changed_config=accept_changed_config))


def _run_path(fn: str, run: object) -> Path:
    if isinstance(run, RunResult):
        return run.run_dir
    need_path(fn, "run", run)
    if run is None:
        raise ArgumentError(f"{fn}: run must be a RunResult or a run directory, not None")
    return Path(run)  # type: ignore[arg-type]


# ---- evaluate ---------------------------------------------------------------------------------------
async def evaluate_async(run: RunResult | Path | str, *, split: str = "test", data: Mapping[str, Any] | None = None,
                         grader: ModelSpec | None = None, skill_version: int | None = None, force: bool = False,
                         on_item: Callable[[Any], None] | None = None, grader_prompt: str = "auto",
                         concurrency: int | None = None, name: str | None = None) -> dict[str, Any]:
    """Grade a run's final (or a given) solver skill with the benchmark's official rule, on the run's
    `split` or, for transfer, on `data` (a DataConfig mapping: path, format, limit). Writes and returns
    RUN/eval/<name>.json (a transfer: transfer-<`name`, default the data format>.json); an earlier result
    that graded more questions is kept unless `force`.
    `grader_prompt`: "auto" (the benchmark's official prompt when fetched, else ours), "official", "ours".
    `concurrency`: questions graded at once (default: the run's hyper.concurrency)."""
    from pydantic import ValidationError

    from .engine.config import DataConfig, describe_validation_error
    from .evaluation import EvalSession, EvalTarget, RunView
    from .evaluation import evaluate as grade_run

    path = _run_path("evaluate", run)
    need_text("evaluate", "split", split)
    need_mapping("evaluate", "data", data)
    need_model("evaluate", "grader", grader)
    need("evaluate", "force", force, (bool,), "True or False")
    need("evaluate", "skill_version", skill_version, (int,), "an integer")
    need("evaluate", "name", name, (str,), "a string")
    if name is not None and (not name or not all(c.isalnum() or c in "-_" for c in name)):
        raise ArgumentError(f"evaluate: name must be letters, digits, - or _ (a file name part), got {name!r}")
    if on_item is not None and not callable(on_item):
        raise ArgumentError(f"evaluate: on_item must be callable, not {type(on_item).__name__}")
    view = RunView(path)
    try:
        target = EvalTarget(split=split, data=DataConfig.model_validate(dict(data)) if data else None, label=name)
    except ValidationError as exc:  # one line, naming the field, as for a configuration file
        raise ConfigError(describe_validation_error("evaluate(data=...)", exc)) from None
    except ValueError as exc:
        raise ConfigError(f"evaluate: data: {exc}") from None
    if grader_prompt not in ("auto", "official", "ours"):
        raise ConfigError(f"grader_prompt must be auto, official or ours, got {grader_prompt!r}")
    if concurrency is not None and (isinstance(concurrency, bool) or not isinstance(concurrency, int)
                                    or concurrency < 1):
        raise ArgumentError(f"evaluate: concurrency must be a positive integer, not {concurrency!r}")
    session = EvalSession(view, grader=grader, force=force, grader_prompt=grader_prompt,  # type: ignore[arg-type]
                          concurrency=concurrency)
    try:
        record = await grade_run(session, target, skill_version=skill_version, on_item=on_item)
    finally:
        await session.aclose()
    if session.saved is not None and not session.saved.write:
        record = {**record, "kept_previous": session.saved.reason}
    elif record.get("n_graded"):  # a tracked run (`--track mlflow`) gets its scores in its MLflow run
        from .tracking import log_evaluation

        await asyncio.to_thread(log_evaluation, path, record)
    return record


def evaluate(run: RunResult | Path | str, **kwargs: Any) -> dict[str, Any]:
    """Synchronous `evaluate_async` (see there for the arguments)."""
    return _run_sync(lambda: evaluate_async(run, **kwargs))


async def compare_async(run: RunResult | Path | str, *, data: Mapping[str, Any] | None = None,
                        grader: ModelSpec | None = None, before: int | None = None, after: int | None = None,
                        force: bool = False, on_item: Callable[[Any], None] | None = None,
                        grader_prompt: str = "auto", concurrency: int | None = None,
                        name: str | None = None, split: str = "test",
                        skill_file: Path | str | None = None) -> dict[str, Any]:
    """The initial (`before`, default v000) and the shipped (`after`, default the final) solver skill on the
    run's `split` (test) or, given `data` (path, format, limit), on that file; each answer graded by the gold
    grader, paired per question: both means (over the paired questions, as the Δ), after − before with a
    paired 95% CI, and per question both answers, grades and the criteria that changed. With `skill_file`, the
    after side is the skill in that file (an edited prompt) and the before side, unless `before` names a
    version, the run's shipped skill: a regression guard for a changed prompt. Writes RUN/eval/compare-….json
    (never an eval result) and returns its record. Answers already paid for (by `evaluate` or an earlier
    comparison) come from the cache."""
    from pydantic import ValidationError

    from .engine.config import DataConfig, describe_validation_error
    from .evaluation import EvalSession, EvalTarget, RunView
    from .evaluation.compare import SkillFile, compare

    path = _run_path("compare", run)
    need_mapping("compare", "data", data)
    need_model("compare", "grader", grader)
    need("compare", "force", force, (bool,), "True or False")
    need("compare", "before", before, (int,), "an integer")
    need("compare", "after", after, (int,), "an integer")
    need("compare", "split", split, (str,), "a split name")
    need("compare", "skill_file", skill_file, (str, Path), "a path")
    for which, version in (("before", before), ("after", after)):
        if isinstance(version, int) and version < 0:
            raise ArgumentError(f"compare: {which} must be a solver version (0 or more), not {version!r}")
    if skill_file is not None and after is not None:
        raise ArgumentError("compare: give after (a version of the run) or skill_file, not both")
    after_file = None
    if skill_file is not None:
        text = read_user_text(skill_file, "skill file").strip()
        if not text:
            raise ConfigError(f"skill file {skill_file} is empty; give the prompt to compare (e.g. what "
                              "`decoevo export RUN -o FILE` wrote, edited)")
        after_file = SkillFile(str(skill_file), text)
    if before is None and after_file is None:
        before = 0  # the initial skill against the shipped one
    need_callable("compare", "on_item", on_item)
    if name is not None and (not isinstance(name, str) or not name or
                             not all(c.isalnum() or c in "-_" for c in name)):
        raise ArgumentError(f"compare: name must be letters, digits, - or _ (a file name part), got {name!r}")
    if grader_prompt not in ("auto", "official", "ours"):
        raise ConfigError(f"grader_prompt must be auto, official or ours, got {grader_prompt!r}")
    if concurrency is not None and (isinstance(concurrency, bool) or not isinstance(concurrency, int)
                                    or concurrency < 1):
        raise ArgumentError(f"compare: concurrency must be a positive integer, not {concurrency!r}")
    view = RunView(path)
    try:
        target = EvalTarget(split=split, data=DataConfig.model_validate(dict(data)) if data else None, label=name)
    except ValidationError as exc:
        raise ConfigError(describe_validation_error("compare(data=...)", exc)) from None
    except ValueError as exc:
        raise ConfigError(f"compare: data: {exc}") from None
    session = EvalSession(view, grader=grader, force=force, grader_prompt=grader_prompt,  # type: ignore[arg-type]
                          concurrency=concurrency)
    try:
        record = await compare(session, target, before=before, after=after, after_file=after_file, on_item=on_item)
    finally:
        await session.aclose()
    if session.saved is not None and not session.saved.write:
        record = {**record, "kept_previous": session.saved.reason}
    return record


def compare(run: RunResult | Path | str, **kwargs: Any) -> dict[str, Any]:
    """Synchronous `compare_async` (see there for the arguments)."""
    return _run_sync(lambda: compare_async(run, **kwargs))


async def dynamics_async(run: RunResult | Path | str, *, split: str = "diagnostic", grader: ModelSpec | None = None,
                         force: bool = False, on_point: Callable[[Any], None] | None = None) -> dict[str, Any]:
    """Score every checkpoint on the held-out `split`: generated-rubric proxy and gold grade; writes
    RUN/eval/dynamics.json."""
    from .evaluation import EvalSession, RunView
    from .evaluation.dynamics import dynamics

    path = _run_path("dynamics", run)  # every argument checked before a session opens or a call is paid
    need_text("dynamics", "split", split)
    need_model("dynamics", "grader", grader)
    need("dynamics", "force", force, (bool,), "True or False")
    need_callable("dynamics", "on_point", on_point)
    session = EvalSession(RunView(path), grader=grader, force=force)
    try:
        return await dynamics(session, split=split, on_point=on_point)
    finally:
        await session.aclose()


async def align_async(run: RunResult | Path | str, *, split: str = "test", grader: ModelSpec | None = None,
                      matcher: ModelSpec | None = None, force: bool = False) -> dict[str, Any]:
    """Criterion-level P/R/F1 of the final generated rubrics against the gold rubrics; writes
    RUN/eval/alignment.json."""
    from .evaluation import EvalSession, RunView
    from .evaluation.alignment import alignment

    path = _run_path("align", run)  # every argument checked before a session opens or a call is paid
    need_text("align", "split", split)
    need_model("align", "grader", grader)
    need_model("align", "matcher", matcher)
    need("align", "force", force, (bool,), "True or False")
    session = EvalSession(RunView(path), grader=grader, matcher=matcher, force=force)
    try:
        return await alignment(session, split=split)
    finally:
        await session.aclose()


def dynamics(run: RunResult | Path | str, **kwargs: Any) -> dict[str, Any]:
    return _run_sync(lambda: dynamics_async(run, **kwargs))


def align(run: RunResult | Path | str, **kwargs: Any) -> dict[str, Any]:
    return _run_sync(lambda: align_async(run, **kwargs))
