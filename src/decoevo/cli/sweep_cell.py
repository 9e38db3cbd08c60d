"""The cell process: `python -m decoevo.cli.sweep_cell`, a CellRequest as JSON on stdin (see `cell.execute_cell`).

It runs the cell and leaves its outcome in RUN/.sweep-outcome.json for the process that started it;
the exit code is 0 for a finished cell and 1 for a failed one.
"""

from __future__ import annotations

import os
import sys
import time
import traceback
from pathlib import Path

from ..fileio import atomic_write_text
from ..redact import redact
from ..sweep.cell import LOG_FILE, OUTCOME_FILE, CellOutcome, CellRequest
from .boundary import failure_label


def run_cell(request: CellRequest) -> CellOutcome:
    """Train the cell's run if it is not finished, then run its missing post-run steps. Failures become
    an outcome with a one-paragraph error; the traceback of an unexpected one goes to the log."""
    from ..errors import UserError
    from ..lm import BudgetExceeded, LMError
    from ..sweep.plan import cap_stopped
    from ..sweep.steps import StepFailed

    started = time.monotonic()
    run_dir = Path(request.run_dir)
    trained, steps_run = "none", []
    try:
        trained = _train(request, run_dir)
        if cap_stopped(run_dir):  # grading a run cut short would be kept once training continues
            raise BudgetExceeded("training stopped at the experiment's cost cap; it continues when the cap is raised")
        steps_run = _post_steps(request, run_dir)
        error = None
    except UserError as exc:
        error = str(exc)
    except LMError as exc:
        error = f"a model call failed ({failure_label(exc)}): {exc}; the run resumes from its last step next time"
    except StepFailed as exc:
        error = str(exc)
    except BudgetExceeded as exc:  # the experiment's cap, met in a post-run step: it runs again next time
        error = f"{exc}; the step runs again when the cap is raised"
    except Exception as exc:
        print(redact("".join(traceback.format_exception(exc))), file=sys.stderr, flush=True)
        error = f"{type(exc).__name__}: {exc} (traceback in {run_dir / LOG_FILE})"
    if error:
        error = redact(error)  # the cell's log, its outcome and the sweep's status.json keep it
        print(f"cell failed: {error}", flush=True)
    return CellOutcome(cell_id=request.cell_id, ok=error is None, trained=trained, steps_run=steps_run, error=error,
                       seconds=round(time.monotonic() - started, 3), host=os.uname().nodename)


def _train(request: CellRequest, run_dir: Path) -> str:
    from rich.console import Console

    from ..engine.config import RunConfig, load_config
    from ..sweep.plan import cap_stopped, with_threads
    from ..tracking import tracker_from_env
    from .run_progress import run_with_progress

    if (run_dir / "summary.json").is_file() and not cap_stopped(run_dir):
        print("training: finished earlier", flush=True)
        return "none"
    resume = (run_dir / "config.yaml").is_file()
    if resume:  # `decoevo resume`: the stored configuration, with this machine's thread count
        stored = load_config(run_dir / "config.yaml").model_dump(mode="json")
        config = RunConfig.model_validate(with_threads(stored, request.threads))
    else:
        config = RunConfig.model_validate(with_threads(request.config, request.threads))
    tracker = tracker_from_env()  # `decoevo sweep --track`
    callbacks = [tracker(run_dir)] if tracker is not None else []
    try:
        run_with_progress(config, run_dir, resume=resume, console=Console(), callbacks=callbacks)
    finally:
        for callback in callbacks:
            callback.close("FAILED")  # nothing if the run ended and closed it
    return "resume" if resume else "new"


def _post_steps(request: CellRequest, run_dir: Path) -> list[str]:
    from ..sweep.eval_cap import run_cap
    from ..sweep.steps import pending_steps, run_step

    done: list[str] = []
    pending = pending_steps(run_dir, request.evaluate)
    if not pending:
        return done
    with run_cap(run_dir):  # the run's --max-cost holds over its grading too
        for name in pending:
            print(f"post-run step: {name}", flush=True)
            run_step(name, run_dir)
            done.append(name)
    return done


def main() -> int:
    request = CellRequest.model_validate_json(sys.stdin.buffer.read())
    outcome = run_cell(request)
    path = Path(request.run_dir) / OUTCOME_FILE
    atomic_write_text(path, outcome.model_dump_json())
    return 0 if outcome.ok else 1


if __name__ == "__main__":  # pragma: no cover - run as a child process by execute_cell
    sys.exit(main())
