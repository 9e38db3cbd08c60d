"""The cell process: `python -m decoevo.sweep.worker`, a CellRequest as JSON on stdin (see `cell.execute_cell`).

It runs the cell and leaves its outcome in RUN/.sweep-outcome.json for the process that started it;
the exit code is 0 for a finished cell and 1 for a failed one.
"""

from __future__ import annotations

import sys
from pathlib import Path

from ..fileio import atomic_write_text
from .cell import OUTCOME_FILE, CellRequest, run_cell


def main() -> int:
    request = CellRequest.model_validate_json(sys.stdin.buffer.read())
    outcome = run_cell(request)
    path = Path(request.run_dir) / OUTCOME_FILE
    atomic_write_text(path, outcome.model_dump_json())
    return 0 if outcome.ok else 1


if __name__ == "__main__":  # pragma: no cover - run as a child process by execute_cell
    sys.exit(main())
