"""The decoevo command line."""

from __future__ import annotations

import sys

import typer
from rich.console import Console
from rich.table import Table

from .lm import LMConfig, LMError, ModelSpec
from .lm.errors import ConfigError

app = typer.Typer(add_completion=False, no_args_is_help=True, help=__doc__)
console = Console()
err_console = Console(stderr=True)


@app.callback()
def _root() -> None:
    """decoevo: evolve an LLM feature's system prompt against rubric judges, and the rubric generator safely."""


def fail(message: str) -> None:
    """Print a one-paragraph error and exit 2, with no traceback."""
    err_console.print(f"[bold red]error:[/] {message}")
    raise typer.Exit(2)


def model_config_from_flags(model: str | None, base_url: str | None, no_cache: bool) -> LMConfig:
    try:
        spec = ModelSpec(backend="openai", model=model or "default", base_url=base_url) if base_url else (
            ModelSpec(gguf_path=model) if model and model.endswith(".gguf") else ModelSpec())
        return LMConfig(models={"default": spec}, use_cache=not no_cache)
    except ValueError as exc:
        fail(str(exc))
        raise  # unreachable; keeps type checkers content


@app.command()
def doctor(
    model: str = typer.Option(None, help="A GGUF path (local) or a model name served at --base-url."),
    base_url: str = typer.Option(None, help="An OpenAI-compatible server, e.g. http://127.0.0.1:8000/v1"),
    no_cache: bool = typer.Option(False, "--no-cache", help="Bypass the request cache."),
) -> None:
    """Show the available backends, load the default model and make one structured call."""
    from .doctor import backend_statuses, run_probe

    table = Table(title="decoevo backends")
    for col in ("backend", "available", "detail"):
        table.add_column(col)
    for status in backend_statuses():
        table.add_row(status.name, "yes" if status.available else "no", status.detail)
    console.print(table)
    config = model_config_from_flags(model, base_url, no_cache)
    with console.status("loading the model and making one structured call"):
        try:
            answer, seconds, lm = run_probe(config)
        except (LMError, ConfigError) as exc:
            fail(f"the probe call failed ({getattr(exc, 'category', 'config')}): {exc}")
            return
    console.print(f"structured call OK in {seconds:.1f}s -> {answer.model_dump()}")
    console.print(lm.ledger.table())


def main() -> None:  # pragma: no cover
    sys.exit(app())
