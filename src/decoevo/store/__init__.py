"""The run directory: one readable folder per run, append-only logs, resume."""

from .run_dir import RunDir

__all__ = ["RunDir"]
