"""Experiment tracking: a run callback that mirrors a decoevo run into an MLflow run.

    tracker = MlflowTracker(run_dir)                  # MLFLOW_TRACKING_URI, or tracking_uri=...
    decoevo.optimize(questions, run_dir=run_dir, callbacks=[tracker]); tracker.close()

What it logs: the resolved configuration as parameters (flattened, `hyper.epsilon`); per inner step the
gate's J for the incumbent and the candidate, its decision and the solver version; per outer round the
generator decision, its audit objectives' deltas and record counts (the decision itself, with the
policy's reason, as `decisions/round_NNN.json`); usage (paid and cached calls and tokens); every
accepted skill version, the final skill, summary and provenance as artifacts; method, seed and run
directory as tags. A resumed run continues the MLflow run tagged with the same run directory, and
`decoevo eval` (any `evaluate`) logs its scores to it (`log_evaluation`).

The store is `--track-uri`, else $MLFLOW_TRACKING_URI, else an SQLite file beside the runs
(`RUNS_ROOT/mlflow.db`, a sweep's `SWEEP/mlflow.db`; artifacts in `mlartifacts/` next to it): MLflow 3
refuses its old file store unless told otherwise, and its own default (`./mlflow.db`, artifacts in
`./mlruns`) writes into whatever directory the command ran in. A store that cannot work with what is
installed is one line naming the fix (`open_client`), before the run starts.

The engine calls callbacks on its event loop, so logging happens on one worker thread, in order. A
tracking failure after the start is reported once on stderr and logging stops; the run goes on.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from . import __version__
from .engine.state import LoopState
from .errors import UserError
from .lm import CallRecord
from .redact import mask_secrets, register_url_secrets
from .rundir import (
    FinishEvent,
    InnerStepEvent,
    InnerStepFailedEvent,
    OuterRoundEvent,
    OuterRoundFailedEvent,
    ResumeEvent,
    RunEvent,
    StartEvent,
    StoppedEvent,
)
from .rundir.records import FINAL_SKILL, PROVENANCE, SUMMARY

TRACKERS = ("mlflow",)
TRACK_ENV, TRACK_URI_ENV = "DECOEVO_TRACK", "DECOEVO_TRACK_URI"  # a sweep's setting, read by its cells
RUN_DIR_TAG = "decoevo.run_dir"
PARAM_MAX = 500  # MLflow keeps up to 6000 characters; skill texts belong in artifacts, not parameters
_BATCH = 100  # MLflow's limit of parameters per log_batch call


def flatten(config: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    """`{"hyper": {"epsilon": 0.02}}` -> `{"hyper.epsilon": "0.02"}`; lists as JSON; long values cut."""
    out: dict[str, str] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            out.update(flatten(value, f"{name}."))
        else:
            text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
            out[name] = text if len(text) <= PARAM_MAX else text[: PARAM_MAX - 1] + "…"
    return out


STORE_FILE, ARTIFACTS_DIR = "mlflow.db", "mlartifacts"


def default_store(root: Path | str) -> str:
    """The SQLite store in `root` (a runs root or a sweep directory)."""
    return f"sqlite:///{Path(root).resolve() / STORE_FILE}"


def resolve_uri(uri: str | None, root: Path | str) -> str:
    return uri or os.environ.get("MLFLOW_TRACKING_URI") or default_store(root)


def _artifact_location(uri: str) -> str | None:
    """Where an experiment made in an SQLite store keeps its artifacts: beside the database (MLflow's
    default is ./mlruns in the current directory)."""
    if not uri.startswith("sqlite:///"):
        return None
    return (Path(uri.removeprefix("sqlite:///")).parent / ARTIFACTS_DIR).as_uri()


def _has_sql_store() -> bool:
    try:
        import alembic  # noqa: F401
        import sqlalchemy  # noqa: F401
    except ImportError:
        return False
    return True


def store_problem(uri: str, exc: BaseException) -> str:
    """One line saying why the store at `uri` cannot be used and what to do."""
    text = str(exc)
    if uri.startswith("sqlite:") and not _has_sql_store():
        return (f"MLflow tracking ({uri}): an SQLite store needs SQLAlchemy and Alembic, which mlflow-skinny "
                "lacks: pip install 'decoevo[mlflow]', or point --track-uri (or $MLFLOW_TRACKING_URI) at a "
                "tracking server (http://HOST:5000)")
    if "MLFLOW_ALLOW_FILE_STORE" in text or "maintenance mode" in text or "filesystem tracking backend" in text:
        return (f"MLflow tracking ({uri}): MLflow 3 refuses its file store: leave out --track-uri to use "
                "sqlite:///RUNS/mlflow.db, give an sqlite:/// or http:// URI, or set MLFLOW_ALLOW_FILE_STORE=true")
    first = text.strip().splitlines()[0] if text.strip() else ""
    return f"MLflow tracking ({uri}): {type(exc).__name__}: {first[:300]}"


def open_client(uri: str) -> Any:
    """An MlflowClient on `uri`, checked by one read; UserError with the fix when it cannot work."""
    try:
        from mlflow.tracking import MlflowClient
    except ImportError:
        raise UserError("--track mlflow needs MLflow: pip install 'decoevo[mlflow]'") from None
    _quiet_mlflow()
    try:
        client = MlflowClient(tracking_uri=uri)
        client.search_experiments(max_results=1)
    except Exception as exc:  # before the run starts: a store that cannot work is the user's to fix
        raise UserError(store_problem(uri, exc)) from None
    return client


def _quiet_mlflow() -> None:
    """MLflow logs each database migration at INFO on the first use of a store: not the user's business."""
    import logging

    for name in ("mlflow.store.db.utils", "alembic.runtime.migration"):
        logging.getLogger(name).setLevel(logging.WARNING)


def create_experiment(client: Any, name: str) -> str:
    return str(client.create_experiment(name, artifact_location=_artifact_location(str(client.tracking_uri))))


def where_logged(uri: str, experiment: str, run_id: str) -> str:
    """Where a run was logged and how to look at it (a local store is opened with `mlflow ui`)."""
    how = (f"open {uri} in a browser" if uri.startswith(("http://", "https://", "databricks"))
           else f"browse it with: mlflow ui --backend-store-uri {uri}")
    return f"MLflow: logged as run {run_id} of experiment '{experiment}' in {uri}; {how}"


class MlflowTracker:
    """A `RunCallback` logging one decoevo run (`run_dir`) to MLflow. Call `close()` when the run ends
    (it is also closed by the run's finish, budget stop or error stop). The store: `tracking_uri`, else
    $MLFLOW_TRACKING_URI, else `default_store(run_dir.parent)`."""

    def __init__(self, run_dir: Path | str, *, tracking_uri: str | None = None, experiment: str | None = None,
                 client: Any = None) -> None:
        self.run_dir = Path(run_dir).resolve()
        uri = resolve_uri(tracking_uri, self.run_dir.parent)
        self.client = client or open_client(uri)
        name = experiment or os.environ.get("MLFLOW_EXPERIMENT_NAME") or "decoevo"
        self.uri, self.experiment = uri, name
        try:
            experiment_id = self._experiment(name)
            self.run_id, self._new = self._open_run(experiment_id)
        except Exception as exc:  # before the run starts: a wrong URI is the user's to fix
            raise UserError(store_problem(uri, exc)) from None
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="decoevo-mlflow")
        self._lock = threading.Lock()
        self._failed = False
        self._closed = False
        self.usage = {"calls_paid": 0, "calls_cached": 0, "tokens_paid": 0, "tokens_cached": 0}

    def _experiment(self, name: str) -> str:
        """The experiment's id, made if missing. Sweep cells start together: when another cell creates it
        between the lookup and the create, MLflow refuses the create, and the lookup then finds it."""
        found = self.client.get_experiment_by_name(name)
        if found is not None:
            return str(found.experiment_id)
        try:
            return create_experiment(self.client, name)
        except Exception:
            found = self.client.get_experiment_by_name(name)
            if found is None:
                raise
            return str(found.experiment_id)

    def _open_run(self, experiment_id: str) -> tuple[str, bool]:
        """The MLflow run already tagged with this run directory (a resume), else a new one."""
        found = tracked_run(self.client, [experiment_id], self.run_dir)
        if found is not None:
            self.client.update_run(found, status="RUNNING")
            return found, False
        run = self.client.create_run(experiment_id, run_name=self.run_dir.name,
                                     tags={RUN_DIR_TAG: str(self.run_dir), "decoevo.version": __version__})
        return run.info.run_id, True

    # ---- the callback ------------------------------------------------------------------------------
    def on_call(self, record: CallRecord) -> None:
        tokens = record.prompt_tokens + record.completion_tokens
        kind = "cached" if record.cached else "paid"
        with self._lock:
            self.usage[f"calls_{kind}"] += 1
            self.usage[f"tokens_{kind}"] += tokens

    def on_event(self, event: RunEvent, state: LoopState) -> None:
        # Read everything from `state` now: the engine changes it after this returns.
        if isinstance(event, StartEvent | ResumeEvent):
            if isinstance(event, ResumeEvent):
                self._seed_usage()
            self._submit(self._log_start, state.solver.text, state.generator.text, state.solver.version,
                         state.generator.version)
        elif isinstance(event, InnerStepEvent):
            metrics = {"solver_accepted": float(event.accepted), "solver_version": float(event.solver_version)}
            if event.J_incumbent is not None:
                metrics["J_incumbent"] = event.J_incumbent
            if event.J_candidate is not None:
                metrics["J_candidate"] = event.J_candidate
            skill = f"skills/solver/v{state.solver.version:03d}.md" if event.accepted else None
            self._submit(self._log_step, event.step, metrics, skill, state.solver.text)
        elif isinstance(event, OuterRoundEvent):
            metrics = {"generator_version": float(event.generator_version),
                       "audit.structural_records": float(event.structural_records),
                       "audit.contrastive_records": float(event.contrastive_records),
                       **{f"audit.delta.{k}": float(v) for k, v in event.deltas.items()}}
            if event.accepted is not None:
                metrics["generator_accepted"] = float(event.accepted)
            decision = event.model_dump(mode="json")
            skill = f"skills/generator/v{state.generator.version:03d}.md" if event.accepted else None
            self._submit(self._log_round, event.round, state.next_step, metrics, decision, skill,
                         state.generator.text)
        elif isinstance(event, InnerStepFailedEvent | OuterRoundFailedEvent):
            self._submit(self._log_metrics, {"failed_steps": float(state.failed_steps)}, state.next_step)
        if isinstance(event, FinishEvent | StoppedEvent):  # a budget stop is followed by its finish event
            self._submit(self._log_metrics, {}, state.next_step)  # the closing usage
            if isinstance(event, FinishEvent):
                self._submit(self._log_finish)
            self.close("FAILED" if isinstance(event, StoppedEvent) else "FINISHED")

    def close(self, status: str = "FINISHED") -> None:
        """Wait for pending logging and end the MLflow run (once; later calls do nothing)."""
        if self._closed:
            return
        self._closed = True
        self._pool.shutdown(wait=True)
        if not self._failed:
            self._guard(lambda: self.client.set_terminated(self.run_id, status=status))

    # ---- on the worker thread ----------------------------------------------------------------------
    def _submit(self, fn: Callable[..., None], *args: Any) -> None:
        if not self._closed and not self._failed:
            self._pool.submit(self._guard, lambda: fn(*args))

    def _guard(self, fn: Callable[[], None]) -> None:
        if self._failed:
            return
        try:
            fn()
        except Exception as exc:
            self._failed = True
            print(f"decoevo: MLflow tracking stopped ({type(exc).__name__}: {exc}); the run goes on",
                  file=sys.stderr)

    def _seed_usage(self) -> None:
        """A resumed run's usage so far, from its ledger (read-only)."""
        from .rundir import RunReader

        try:
            total = (RunReader(self.run_dir).ledger() or {}).get("total") or {}
        except Exception:
            return
        with self._lock:
            self.usage["calls_paid"] = int(total.get("calls", 0))
            self.usage["calls_cached"] = int(total.get("cache_hits", 0))
            self.usage["tokens_paid"] = int(total.get("prompt_tokens", 0)) + int(total.get("completion_tokens", 0))

    def _log_metrics(self, metrics: dict[str, float], step: int) -> None:
        from mlflow.entities import Metric

        with self._lock:
            metrics = {**metrics, **{f"usage.{k}": float(v) for k, v in self.usage.items()}}
        stamp = int(time.time() * 1000)
        self.client.log_batch(self.run_id, metrics=[Metric(k, v, stamp, step) for k, v in metrics.items()])

    def _log_start(self, solver: str, generator: str, solver_v: int, generator_v: int) -> None:
        from mlflow.entities import Param, RunTag

        from .rundir import RunReader

        reader = RunReader(self.run_dir)
        config = reader.config_dict()
        if self._new:  # a continued MLflow run has them already
            params = [Param(k, mask_secrets(v)) for k, v in flatten(config).items()]
            for i in range(0, len(params), _BATCH):
                self.client.log_batch(self.run_id, params=params[i:i + _BATCH])
            self._text(solver, f"skills/solver/v{solver_v:03d}.md")
            self._text(generator, f"skills/generator/v{generator_v:03d}.md")
            if reader.has(PROVENANCE):
                self.client.log_artifact(self.run_id, str(self.run_dir / PROVENANCE))
        tags = {"decoevo.method": config.get("method"), "decoevo.seed": config.get("seed")}
        self.client.log_batch(self.run_id, tags=[RunTag(k, str(v)) for k, v in tags.items() if v is not None])

    def _log_step(self, step: int, metrics: dict[str, float], skill: str | None, text: str) -> None:
        self._log_metrics(metrics, step)
        if skill is not None:
            self._text(text, skill)

    def _log_round(self, index: int, step: int, metrics: dict[str, float], decision: dict[str, Any],
                   skill: str | None, text: str) -> None:
        self._log_metrics(metrics, step)
        self._text(json.dumps(decision, indent=1), f"decisions/round_{index:03d}.json")
        if skill is not None:
            self._text(text, skill)

    def _text(self, text: str, artifact: str) -> None:
        self.client.log_text(self.run_id, mask_secrets(text), artifact)  # a store outside the run: no secret in it

    def _log_finish(self) -> None:
        for rel in (FINAL_SKILL, SUMMARY):
            if (self.run_dir / rel).is_file():
                self.client.log_artifact(self.run_id, str(self.run_dir / rel))


def export_tracking(kind: str | None, uri: str | None, root: Path | str = ".") -> None:
    """`decoevo sweep --track`: checked here, then handed to every cell through the DECOEVO_* environment
    the sweep forwards (also to Ray cells on other machines), where `tracker_from_env` picks it up. The
    store defaults to `default_store(root)`, root being the sweep directory."""
    if make_tracker(kind, uri) is not None:
        os.environ[TRACK_ENV] = str(kind)
        uri = resolve_uri(uri, root)
        Path(root).mkdir(parents=True, exist_ok=True)
        os.environ[TRACK_URI_ENV] = uri
        ensure_experiment(uri)


def ensure_experiment(uri: str, name: str | None = None) -> str:
    """Make the store and the experiment before a sweep's cells start: cells that each made them at once
    could race on the database's creation, or leave two experiments of one name, splitting the sweep."""
    client = open_client(uri)
    name = name or os.environ.get("MLFLOW_EXPERIMENT_NAME") or "decoevo"
    try:
        found = client.get_experiment_by_name(name)
        return str(found.experiment_id) if found is not None else create_experiment(client, name)
    except Exception as exc:  # before the sweep starts: a wrong URI is the user's to fix
        raise UserError(store_problem(uri, exc)) from None


def tracked_run(client: Any, experiment_ids: list[str], run_dir: Path) -> str | None:
    """The id of the MLflow run tagged with `run_dir`, or None."""
    path = str(run_dir)
    if "'" in path:  # cannot be quoted in MLflow's filter language
        return None
    runs = client.search_runs(experiment_ids, filter_string=f"tags.`{RUN_DIR_TAG}` = '{path}'", max_results=1)
    return str(runs[0].info.run_id) if runs else None


#: the numbers of an evaluation record (`eval/<name>.json`) that become metrics
EVAL_METRICS = ("score", "n_graded", "n_ungraded", "f1", "precision", "recall", "n_questions")


def log_evaluation(run_dir: Path | str, record: Mapping[str, Any], uri: str | None = None) -> bool:
    """Log an evaluation's scores (`eval.<name>.score`, ...) and its record to the MLflow run of
    `run_dir`, when the run was tracked: in `uri`, $DECOEVO_TRACK_URI (a sweep's cells),
    $MLFLOW_TRACKING_URI or a default store in one of the three directories above the run. Never fails the
    evaluation: True when logged; a store that refuses costs a line on stderr."""
    run_dir = Path(run_dir).resolve()
    uri = uri or os.environ.get(TRACK_URI_ENV) or os.environ.get("MLFLOW_TRACKING_URI")
    if uri is None:  # the default store beside the runs: RUNS/mlflow.db, or a sweep's SWEEP/mlflow.db
        roots = [p for p in run_dir.parents[:3] if (p / STORE_FILE).is_file()]
        if not roots:
            return False  # an untracked run: nothing to do
        uri = default_store(roots[0])
    try:
        import mlflow  # noqa: F401
    except ImportError:
        return False
    try:
        client = open_client(uri)
        experiments = [e.experiment_id for e in client.search_experiments()]
        run_id = tracked_run(client, experiments, run_dir) if experiments else None
        if run_id is None:
            return False
        from mlflow.entities import Metric, RunTag

        from .evaluation.independence import tracking_tags

        name = str(record.get("name") or "test")
        version, shipped = record.get("skill_version"), record.get("shipped_version")
        if isinstance(version, int) and isinstance(shipped, int) and version != shipped:
            name = f"{name}.v{version:03d}"  # another skill than the shipped one: its own metrics, never eval.test
        stamp = int(time.time() * 1000)
        metrics = [Metric(f"eval.{name}.{key}", float(record[key]), stamp, 0) for key in EVAL_METRICS
                   if isinstance(record.get(key), int | float) and not isinstance(record.get(key), bool)]
        # the grader's labels beside its scores: a self-graded score is not an independent result
        tags = [RunTag(f"eval.{name}.{key}", value) for key, value in tracking_tags(record).items()]
        client.log_batch(run_id, metrics=metrics, tags=tags)
        client.log_text(run_id, json.dumps(dict(record), indent=1, default=str),
                        str(record.get("file") or f"eval/{name}.json"))
    except Exception as exc:
        print(f"decoevo: evaluation not logged to MLflow ({exc})", file=sys.stderr)
        return False
    return True


def tracker_from_env() -> Callable[[Path], MlflowTracker] | None:
    return make_tracker(os.environ.get(TRACK_ENV) or None, os.environ.get(TRACK_URI_ENV) or None)


def make_tracker(kind: str | None, uri: str | None) -> Callable[[Path], MlflowTracker] | None:
    """What `--track`/`--track-uri` ask for: a factory of one tracker per run directory, or None."""
    if kind is None:
        if uri is not None:
            raise UserError("--track-uri needs --track mlflow")
        return None
    if kind not in TRACKERS:
        raise UserError(f"--track {kind!r}: choose one of: {', '.join(TRACKERS)}")
    for given in (uri, os.environ.get("MLFLOW_TRACKING_URI")):  # a tracking server's credentials stay unprinted
        if given:
            register_url_secrets(given)
    return lambda run_dir: MlflowTracker(run_dir, tracking_uri=uri)
