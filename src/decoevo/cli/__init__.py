"""The command line (`decoevo ...`): one module per command over the library, and what only a terminal
needs: consoles and the error boundary (common, boundary), tables that fit (display), progress bars
(run_progress, sweep_progress), settings layering (settings), what a run shipped (shipped). The library
never imports this package; a sweep cell's child process is its `sweep_cell` module."""

from .main import app, main

__all__ = ["app", "main"]
