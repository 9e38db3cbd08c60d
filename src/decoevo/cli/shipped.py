"""What a run ships, said where the user looks: the last lines of `run`/`resume` and `export`'s warnings."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

from ..analysis.discrimination import discrimination_warnings
from ..rundir import RunReader, RunReadError
from ..rundir.evalfiles import short_model_name
from ..rundir.records import CHECKPOINT, SPLITS, Summary


def shipped_line(summary: Summary | None) -> str:
    """One line: the improved or the initial solver skill, and why (summary.json's `final_solver`)."""
    if summary is None or not summary.final_solver:
        return "shipped: unknown (the run wrote no summary)"
    kind, _, why = summary.final_solver.partition(": ")
    if kind == "improved":
        return f"shipped: the improved solver skill; {why}"
    return f"shipped: the INITIAL solver skill, unchanged; {why}"


_SIZE = re.compile(r"(?<![a-z0-9])(\d+(?:\.\d+)?)\s*([mb])(?![a-z])", re.IGNORECASE)
TINY_PARAMS = 1e9  # under a billion parameters a model follows a rubric too loosely to grade by it
_EMBEDDED = "smollm2-135m-instruct-q4_1"  # the label of the embedded default (ModelSpec's)


def model_params(name: str) -> float | None:
    """Parameters as a model's name states them (`SmolLM2-135M`, `qwen2.5-0.5b`); None when it does not."""
    found = _SIZE.findall(name)
    if not found:
        return None
    number, unit = found[-1]
    return float(number) * (1e6 if unit.lower() == "m" else 1e9)


def self_judged_tiny(config: dict[str, Any]) -> str | None:
    """The model that judged during the run when it is the solver model itself and tiny (its name says
    under TINY_PARAMS parameters): then "improved" means "this model liked it more", little else."""
    def mapping(value: Any) -> dict[str, Any]:
        return value if isinstance(value, dict) else {}

    lm = mapping(config.get("lm"))
    models, roles = mapping(lm.get("models")), mapping(lm.get("roles"))

    def label(role: str) -> str:
        spec = models.get(str(roles.get(role, "default")), models.get("default"))
        return str(spec.get("model") or _EMBEDDED) if isinstance(spec, dict) else _EMBEDDED

    judge = label("judge")
    params = model_params(judge)
    return judge if judge == label("solve") and params is not None and params < TINY_PARAMS else None


def self_judge_note(run_dir: Path) -> str | None:
    """One line for a run judged by its own tiny solver model; None otherwise (or unreadable config)."""
    try:
        judge = self_judged_tiny(RunReader(run_dir).config_dict())
    except RunReadError:
        return None
    if judge is None:
        return None
    return (f"note: the judge was the solver model itself, {short_model_name(judge)}, a model too small to grade "
            "by a rubric; its scores (and so what was accepted) say little: check the skill, and grade it with a "
            "larger --grader-model")


def closing_lines(run_dir: Path) -> list[str]:
    """The run's last lines: what shipped, why, where, and the next commands, each on a line of its own
    under a comment saying what it does (a command line is printed unwrapped, so it copies whole), and each
    one that works on this run: `compare` (first) only when the run holds out a test split, the split it
    compares on by default, and ships a rewritten skill (else `eval`, which grades the one it ships)."""
    reader = RunReader(run_dir)
    summary = reader.summary()
    ended = "" if summary is None or summary.run_status == "finished" else f" (stopped early: {summary.stopped})"
    run = shlex.quote(str(run_dir))
    note = self_judge_note(run_dir)
    lines = [
        shipped_line(summary) + ended,
        *([note] if note else []),
        f"the skill: {run_dir / 'final_solver_skill.md'}; everything else: {run_dir} (summary.json, "
        "events.jsonl, candidates/)",
        "next:",
    ]
    try:
        test = len(reader.split_ids().get("test", ())) if reader.has(SPLITS) else 0
    except RunReadError:  # a damaged splits.json: suggest nothing that would fail on it
        test = 0
    initial = summary is not None and summary.solver_version == 0
    if test and not initial:  # the question every user asks first: is the shipped skill better than mine, and where?
        lines += [f"  # your initial vs the shipped skill on its {test} test question(s), per question;",
                  "  # add --grader-model MODEL for an independent grader (without it: self-graded)",
                  f"  decoevo compare {run}"]
    elif test:  # it ships the initial skill: a comparison would set a skill against itself; its grade says more
        lines += [f"  # grades the skill it ships (your initial one) on its {test} test question(s);",
                  "  # add --grader-model MODEL for an independent grader (without it: self-graded)",
                  f"  decoevo eval {run}"]
    lines += ["  # prints the skill", f"  decoevo export {run}",
              "  # writes report.html: the run on one page", f"  decoevo report {run}"]
    return lines


def unfinished_warning(run_dir: Path, what: str) -> str | None:
    """For a run killed, still running or stopped: `what` (e.g. "this grades") the solver skill of its last
    checkpoint, not a finished run's."""
    reader = RunReader(run_dir)
    if not (reader.exists() or reader.has(CHECKPOINT) or reader.versions("solver")):
        return None  # not a run at all (nothing a run writes): the command itself says so, not "resume it"
    status = reader.status()
    if status not in ("incomplete", "stopped"):
        return None
    checkpoint = reader.checkpoint()
    steps = checkpoint.state.get("next_step") if checkpoint else None
    where = (
        "the last skill it saved (it never reached a checkpoint)"
        if checkpoint is None
        else f"its last checkpoint ({steps} step(s) done)"
        if isinstance(steps, int)
        else "its last checkpoint"
    )
    return (f"{run_dir} is unfinished ({'killed or still running' if status == 'incomplete' else status}"
            f"); {what} the solver skill at {where}; `decoevo resume {run_dir}` continues it")


def export_warnings(run_dir: Path) -> list[str]:
    """Why the skill `export` prints may not be what the user expects: the run shipped its initial skill,
    or it never finished (killed or stopped), or it never reached a checkpoint."""
    reader = RunReader(run_dir)
    unfinished = unfinished_warning(run_dir, "this is")
    warnings = [unfinished] if unfinished else []
    summary = reader.summary()
    if summary is not None and summary.run_status == "budget_stop":
        warnings.append(
            f"{run_dir} stopped at its budget before its last step ({summary.stopped}); this is the skill it had then"
        )
    version = summary.solver_version if summary is not None else reader.final_skill("solver").version
    if summary is not None and summary.final_solver and not summary.final_solver.startswith("improved"):
        warnings.append(f"{run_dir} shipped its initial solver skill: {summary.final_solver.partition(': ')[2]}")
    elif summary is None and version == 0:
        warnings.append(f"{run_dir}: this is the initial solver skill (no rewrite accepted so far)")
    note = self_judge_note(run_dir)
    if note:
        warnings.append(note.removeprefix("note: "))
    return warnings + discrimination_warnings(run_dir)  # the skill was chosen, and is scored, by this judge
