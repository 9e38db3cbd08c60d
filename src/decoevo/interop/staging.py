"""An imported file's inputs written into a new run directory, so the run (and its resume, eval and export)
reads decoevo's own files: RUN/questions.jsonl, RUN/task_spec.txt, and the prompt as the initial skill.
RUN/import.json keeps what the file held that the run does not use (promptfoo's `providers` and
`defaultTest`, verbatim) and the account of what was read, for an export from the run alone."""

from __future__ import annotations

import shutil
from pathlib import Path

from ..engine.config import RunConfig
from ..fileio import atomic_write_text
from ..rundir import RunWriter
from ..rundir.records import CALLS, CHECKPOINT, QUESTIONS
from .imported import Imported

TASK_SPEC = "task_spec.txt"
IMPORT = "import.json"


def staged_config(config: RunConfig, imported: Imported, run_dir: Path) -> RunConfig:
    """Write the imported questions (and task specification) into `run_dir`; the configuration reading them.
    What the user set keeps its value: a task_spec file, an initial solver skill, a task family, a limit."""
    # the user's questions verbatim (atomic_write_text makes the folder, which a pilot may have made already)
    atomic_write_text(run_dir / QUESTIONS, imported.jsonl())
    # decoevo's own record, written as the run's other JSON records are (masked, never through a link);
    # `kept` is plain JSON already (importfiles.plain: no NaN, text keys)
    RunWriter(run_dir).write_json(IMPORT, {"source": imported.source, "format": imported.format,
                                           "account": imported.account(), "kept": imported.kept})
    data = {"path": str((run_dir / QUESTIONS).resolve()), "format": "jsonl"}
    spec = imported.task_spec()
    if config.data.task_spec is None and spec is not None:
        atomic_write_text(run_dir / TASK_SPEC, spec + "\n")
        data["task_spec"] = str((run_dir / TASK_SPEC).resolve())
    new_data = config.data.model_copy(update=data)
    update: dict[str, object] = {"data": new_data}
    if not config.initial_solver_skill and imported.skill:
        update["initial_solver_skill"] = imported.skill
    return config.model_copy(update=update)


def discard_unstarted(run_dir: Path) -> None:
    """Remove a run directory made for an import when the run saved nothing (no checkpoint, no answered
    call), as a failed new run leaves none; one that got further is kept for `decoevo resume`."""
    if run_dir.is_dir() and not saved_anything(run_dir):
        shutil.rmtree(run_dir, ignore_errors=True)


def saved_anything(run_dir: Path) -> bool:
    """Whether a run got far enough to be resumed: a checkpoint or an answered call."""
    return any((run_dir / f).exists() for f in (CHECKPOINT, CALLS))
