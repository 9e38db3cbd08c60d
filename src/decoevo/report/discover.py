"""Which run directories the report covers: each argument is a run directory or a sweep directory
(SWEEP/runs/<benchmark>/<method>-s<seed>/, docs/evaluation-files.md)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..rundir import RunReadError
from ..rundir.files import read_json


class ReportInputError(ValueError):
    """An argument that is no run or sweep directory, or no run at all: the report cannot be made."""


@dataclass(frozen=True)
class RunLocation:
    path: Path
    name: str  # "<benchmark>/<cell>" inside a sweep, else the directory name
    sweep: Path | None
    benchmark: str | None  # the sweep's folder for it


@dataclass(frozen=True)
class SweepInfo:
    path: Path
    n_runs: int
    status_counts: Mapping[str, int]  # from status.json: done, failed, pending, running
    failed: tuple[tuple[str, str], ...]  # (cell, error message)
    note: str | None = None  # why status.json could not be used


def _is_run(path: Path) -> bool:
    return (path / "config.yaml").is_file()


def _cells(data: Any) -> dict[str, Any] | None:
    """status.json's per-cell entries: {cell: "done"} or {cell: {"status": ..., "error": ...}}, possibly
    under a "cells" key."""
    if isinstance(data, dict) and isinstance(data.get("cells"), dict | list):
        data = data["cells"]
    if isinstance(data, list):
        named = {str(c.get("cell") or c.get("run") or c.get("name") or i): c for i, c in enumerate(data)
                 if isinstance(c, dict)}
        return named if len(named) == len(data) else None
    return data if isinstance(data, dict) else None


def _sweep_status(sweep: Path, n_runs: int) -> SweepInfo:
    path = sweep / "status.json"
    if not path.is_file():
        return SweepInfo(sweep, n_runs, {}, (), note="no status.json")
    try:
        cells = _cells(read_json(path))  # the run directory's own JSON parser, so one message per fault
    except RunReadError as e:
        return SweepInfo(sweep, n_runs, {}, (), note=str(e))
    if cells is None:
        return SweepInfo(sweep, n_runs, {}, (), note=f"{path}: not a mapping of cells to their status")
    counts: Counter[str] = Counter()
    failed = []
    for cell, entry in cells.items():
        # `decoevo sweep` writes {"state": ...} per cell (sweep/status.py); "status" is accepted too
        status = (entry.get("state") or entry.get("status")) if isinstance(entry, dict) else entry
        status = str(status) if status is not None else "unknown"
        counts[status] += 1
        if status == "failed":
            error = entry.get("error") if isinstance(entry, dict) else None
            failed.append((str(cell), str(error or "no message")))
    return SweepInfo(sweep, n_runs, dict(sorted(counts.items())), tuple(failed))


def discover(paths: Iterable[Path | str]) -> tuple[list[RunLocation], list[SweepInfo]]:
    """Expand the arguments to run directories, in the order given; a directory named twice counts once.
    Raises ReportInputError for an argument that is neither a run nor a sweep."""
    runs: list[RunLocation] = []
    sweeps: list[SweepInfo] = []
    seen: set[Path] = set()

    def add(loc: RunLocation) -> None:
        key = loc.path.resolve()
        if key not in seen:
            seen.add(key)
            runs.append(loc)

    for arg in paths:
        path = Path(arg)
        if not path.is_dir():
            raise ReportInputError(f"{path}: no such directory")
        if _is_run(path):
            add(RunLocation(path, path.name, None, None))
        elif (path / "runs").is_dir():
            cells = sorted(c for c in (path / "runs").glob("*/*") if _is_run(c))
            for cell in cells:
                add(RunLocation(cell, f"{cell.parent.name}/{cell.name}", path, cell.parent.name))
            sweeps.append(_sweep_status(path, len(cells)))
        else:
            raise ReportInputError(f"{path}: neither a run directory (no config.yaml) nor a sweep directory "
                                   "(no runs/ folder)")
    return runs, sweeps
