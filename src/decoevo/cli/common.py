"""What the command modules share: the consoles, `fail` (one line, an exit code), the command boundary,
output files (-o) and the options several commands take."""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import NoReturn

import typer
from rich.cells import cell_len
from rich.console import Console
from rich.markup import escape

from ..redact import redact
from .boundary import command_boundary, printable, run_guarded, shortened

console = Console(log_path=False)
err_console = Console(stderr=True)


def columns_now() -> int | None:
    """COLUMNS as the environment says now (None when unset or not a width)."""
    columns = os.environ.get("COLUMNS", "").strip()
    return int(columns) if columns.isdigit() and int(columns) > 0 else None


def current_width(console: Console) -> int:
    """COLUMNS as it is now, else the console's width: a console made at import keeps the COLUMNS of then
    (the module-level consoles are made when a command's module is first imported, in a library's process
    perhaps long before)."""
    return columns_now() or console.width


def wrap_message(text: str, width: int) -> list[str]:
    """`text` cut into lines at most `width` cells wide, at spaces outside backticks: a quoted command
    (`decoevo resume runs/x`) is never split, so a copied one still runs. A span wider than `width`
    keeps a line of its own (the terminal folds it, and copying gives it whole). A paragraph with an odd
    number of backticks quotes nothing (it would glue the rest of the text together)."""
    lines: list[str] = []
    for paragraph in text.split("\n"):
        quoting = paragraph.count("`") % 2 == 0
        atoms: list[str] = []
        for word in paragraph.split(" "):
            if quoting and atoms and atoms[-1].count("`") % 2:
                atoms[-1] += " " + word  # inside `...`: no break here
            else:
                atoms.append(word)
        line = ""
        for atom in atoms:
            if line and cell_len(line) + 1 + cell_len(atom) > width:
                lines.append(line)
                line = atom
            else:
                line = f"{line} {atom}" if line else atom
        lines.append(line)
    return lines


def _print_labelled(label: str, style: str, message: str) -> None:
    # wrapped here, printed with soft_wrap: Rich's own wrapping breaks at any space, inside commands too
    lines = wrap_message(f"{label} {printable(shortened(message))}", max(current_width(err_console), 20))
    body = "\n".join(escape(line) for line in lines)[len(label):]  # escape: keep the message's [..]
    err_console.print(f"[{style}]{label}[/]{body}", highlight=False, soft_wrap=True)


def fail(message: str, code: int = 2) -> NoReturn:
    """Print a one-paragraph error and exit (2 for bad input or configuration), with no traceback."""
    _print_labelled("error:", "bold red", redact(message))
    raise typer.Exit(code)


def warn(message: str) -> None:
    _print_labelled("warning:", "yellow", message)


def note(message: str) -> None:
    _print_labelled("note:", "cyan", message)


guarded = command_boundary(fail)  # every command's body: any failure is one line, never a traceback


def guard(fn: object, *args: object) -> None:
    """Any failure becomes a one-paragraph message and exit 2 for input, configuration or state."""
    run_guarded(lambda: fn(*args), fail)  # type: ignore[operator]


def check_output(output: Path, replaced: bool = False) -> None:
    """A user-named output file (-o): its directory is made; a path that cannot be a file is one line.
    `replaced`: the file is written atomically (a new file renamed over it), so a device or a pipe
    there would be replaced, not written to."""
    if output.is_dir():
        fail(f"-o {output}: is a directory; name a file")
    if replaced and output.exists() and not output.is_file():
        fail(f"-o {output}: is not a regular file; name a file")
    try:
        output.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        fail(f"-o {output}: cannot create its directory ({exc.strerror or exc})")


def write_output(output: Path, text: str) -> None:
    if output.is_symlink():  # written in place, a link's target (any file the link names) would be overwritten
        fail(f"-o {output}: is a symbolic link (to {output.resolve()}); decoevo does not write through a link: "
             "name the file itself, or remove the link")
    check_output(output)
    try:
        fd = os.open(output, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as exc:
        fail(f"-o {output}: cannot write ({exc.strerror or exc})")


JsonOption = typer.Option(
    False, "--json", help="Print JSON on stdout (one object per line) instead of text; progress goes to stderr."
)
ConfigOption = typer.Option(None, "--config", "-c", help="A YAML run configuration (every key: `decoevo config`).")
SetOption = typer.Option([], "--set", help="Override any config key: --set hyper.epsilon=0.02")
TrackOption = typer.Option(
    None, "--track", help="Log the run to an experiment tracker: mlflow (pip install 'decoevo\\[mlflow]')."
)
TrackUriOption = typer.Option(None, "--track-uri", help="The tracker's URI (default: $MLFLOW_TRACKING_URI, "
                              "else sqlite:///RUNS/mlflow.db beside the runs).")
BenchmarkOption = typer.Option(
    None,
    "--benchmark",
    help="A fetched public benchmark, NAME[:split] (e.g. healthbench:hard); see `decoevo data list`.",
)
ModelOption = typer.Option(None, help="A GGUF path (embedded), a model name served at --base-url, or "
                           "PROVIDER/NAME (openai, openrouter, groq, deepseek, together; the key in "
                           "PROVIDER_API_KEY).")
AllowUnlistedOption = typer.Option(False, "--any-model", help="Run even though the server's /models "
                                   "does not list --model (a server that answers any name).")
LimitOption = typer.Option(None, help="Use only the first N questions of the data (sorted by id).")
ConcurrencyOption = typer.Option(None, help="Questions processed at once (hyper.concurrency).")
BaseUrlOption = typer.Option(None, help="An OpenAI-compatible server, e.g. http://127.0.0.1:8000/v1")
NoCacheOption = typer.Option(False, "--no-cache", help="Bypass the request cache.")
StepsOption = typer.Option(None, help="Inner-loop steps T.")
def _positive_cost(value: float | None) -> float | None:
    # typer can say only `x>=0` in the help, and a cap of $0 stops before the first call: refused here, so
    # the help and the check say the same ("more than 0")
    if value is not None and not (math.isfinite(value) and value > 0):
        raise typer.BadParameter(f"{value:g}: the cap is a number of US dollars more than 0")
    return value


MaxCost = typer.Option(
    None,
    "--max-cost",
    callback=_positive_cost,
    help="Stop cleanly after this many US dollars, more than 0 (paid + "
    "inherited); every model needs a price (input/output_price_per_mtok, or LiteLLM's map).",
)
