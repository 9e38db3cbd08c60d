"""Where `decoevo eval` wrote a run's grading: one file per evaluation, solver version and grader
(eval/<name>-v<NNN>-<grader>-<prompt>.json, docs/evaluation-files.md)."""

from __future__ import annotations

from pathlib import Path


def results(run: Path, name: str = "test", *, failed: bool = False) -> list[Path]:
    folder = run / "eval" / "failed" if failed else run / "eval"
    return sorted(folder.glob(f"{name}-v[0-9][0-9][0-9]-*.json"))


def result_file(run: Path, name: str = "test", *, failed: bool = False) -> Path:
    """The run's one grading `name` (a test that graded once, with one grader)."""
    found = results(run, name, failed=failed)
    assert len(found) == 1, f"expected one {name} grading under {run / 'eval'}, found {found}"
    return found[0]


def has_result(run: Path, name: str = "test", *, failed: bool = False) -> bool:
    return bool(results(run, name, failed=failed))
