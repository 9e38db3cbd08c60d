"""`decoevo sweep`: a grid of runs (methods × seeds × benchmarks) with matched seeds and splits, run by
child processes on this machine or by Ray tasks on a cluster; finished cells are never rerun.

    spec.py       the sweep YAML (validated; errors name the file and key)
    plan.py       one validated run configuration per cell, in dependency order; what a cell still needs
    steps.py      post-run steps (`decoevo eval` ...), each done when its output file exists
    cell.py       one cell in a child process (decoevo.cli.sweep_cell: train or resume, then the post-run steps)
    executors.py  local child processes, or Ray tasks
    runner.py     the scheduler: slots, dependencies, SWEEP/status.json; a `SweepObserver` is told each change
"""

from .plan import Cell, plan
from .runner import run_sweep
from .spec import SweepSpec, build_spec, load_spec

__all__ = ["Cell", "SweepSpec", "build_spec", "load_spec", "plan", "run_sweep"]
