"""`decoevo`'s entry point (the console script and `python -m decoevo`).

`decoevo`, `decoevo --help` and `decoevo --version` are answered here without importing Typer (about a third
of what `--help` cost, and most of `--version`: bench/client/startup.py): the root help is drawn by
cli/roothelp.py from cli/commands.py's data, byte for byte as the Typer app draws it (tests/test_startup.py
compares the two in fresh processes). Any other command line, or one Typer would treat otherwise (shell
completion, `TYPER_USE_RICH`), goes to the Typer app in cli/main.py."""

from __future__ import annotations

import os
import sys
from types import ModuleType


def main() -> None:
    args = sys.argv[1:]
    if args in ([], ["--help"], ["--version"]) and not _typer_specific():
        if args == ["--version"]:
            from .. import __version__

            print(f"decoevo {__version__}", flush=True)
            sys.exit(0)
        from .roothelp import draw_root

        draw_root(program_name())
        if args:  # Click echoes what its formatter holds after the help, empty here: one more line
            print(flush=True)
        sys.exit(0 if args else 2)  # no arguments: the help, as a usage error (Typer's no_args_is_help)
    from .main import app

    sys.exit(app())


def _typer_specific() -> bool:
    """Settings under which Typer answers otherwise: shell completion (`_<PROG>_COMPLETE`) or its plain help."""
    return "TYPER_USE_RICH" in os.environ or any(k.startswith("_") and k.endswith("_COMPLETE") for k in os.environ)


def program_name(path: str | None = None, main_module: ModuleType | None = None) -> str:
    """The name the usage line shows, found as Click finds it (`click.utils._detect_program_name`): the script's
    file name, or `python -m PACKAGE` when run as a module."""
    main_module = main_module or sys.modules["__main__"]
    path = path or sys.argv[0]
    package = getattr(main_module, "__package__", None)
    if not package:  # a file or an entry point was run
        return os.path.basename(path)
    name = os.path.splitext(os.path.basename(path))[0]
    module = package if name == "__main__" else f"{package}.{name}"
    return f"python -m {module.lstrip('.')}"
