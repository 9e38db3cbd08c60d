"""SWEEP/status.json: the state of every cell of the current plan, rewritten atomically on each change.

Only the sweep driver writes it (the cells report back to the driver), so there is one writer.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from ..fileio import atomic_write_text
from .plan import Cell

State = Literal["pending", "running", "done", "failed"]
STATUS_FILE = "status.json"


class CellStatus(BaseModel):
    model_config = ConfigDict(extra="forbid")

    benchmark: str
    method: str
    seed: int
    run_dir: str  # relative to the sweep directory
    depends_on: list[str]
    state: State = "pending"
    action: str | None = None  # skip | evaluate | resume | new, as planned when the cell started
    error: str | None = None
    host: str | None = None
    seconds: float | None = None
    updated: float | None = None


class StatusBook:
    def __init__(self, sweep_dir: Path, cells: list[Cell]) -> None:
        self.path = sweep_dir / STATUS_FILE
        self.cells: dict[str, CellStatus] = {
            c.id: CellStatus(benchmark=c.benchmark, method=c.method, seed=c.seed,
                             run_dir=str(c.run_dir(Path("."))), depends_on=list(c.depends_on)) for c in cells}
        self.write()

    def set(self, cell_id: str, state: State, **fields: Any) -> None:
        self.cells[cell_id] = self.cells[cell_id].model_copy(update={"state": state, "updated": time.time(),
                                                                    **fields})
        self.write()

    def counts(self) -> dict[str, int]:
        out = {s: 0 for s in ("pending", "running", "done", "failed")}
        for c in self.cells.values():
            out[c.state] += 1
        return out

    def failed(self) -> dict[str, CellStatus]:
        return {k: c for k, c in self.cells.items() if c.state == "failed"}

    def write(self) -> None:
        doc = {"updated": time.time(), "counts": self.counts(),
               "cells": {k: c.model_dump() for k, c in self.cells.items()}}
        atomic_write_text(self.path, json.dumps(doc, indent=2) + "\n", fsync=False)
