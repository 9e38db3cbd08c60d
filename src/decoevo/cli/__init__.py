"""The command line (`decoevo ...`): one module per command over the library, and what only a terminal
needs: consoles and the error boundary (common, boundary), tables that fit (display), progress bars
(run_progress, sweep_progress), settings layering (settings), what a run shipped (shipped). The library
never imports this package; a sweep cell's child process is its `sweep_cell` module.

`decoevo` runs `entry.main`; the Typer app (`app`, in main.py) is imported when first asked for, so the
entry point answers `--help` and `--version` without Typer (cli/entry.py)."""

from __future__ import annotations

TYPE_CHECKING = False  # not `typing`'s: `decoevo --version` would import it for this alone
if TYPE_CHECKING:
    from typing import Any

    from .main import app

__all__ = ["app"]


def __getattr__(name: str) -> Any:
    if name == "app":
        from .main import app

        return app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
