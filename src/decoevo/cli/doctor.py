"""`decoevo doctor`: what backends this machine has, and one real structured call on the default."""

from __future__ import annotations

import asyncio
import importlib.metadata
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from ..lm import LM, GenParams, LMConfig, LMError, Message
from ..lm.capacity import DoctorAnswer
from .boundary import failure_label
from .common import AllowUnlistedOption, BaseUrlOption, ModelOption, NoCacheOption, console, fail, guarded
from .display import show_table
from .endpoint import check_keys, check_served


@dataclass(frozen=True)
class BackendStatus:
    name: str
    available: bool
    detail: str


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def backend_statuses() -> list[BackendStatus]:
    out = []
    llama = _version("llama-cpp-python")
    try:
        from ..lm.local import default_gguf_path

        gguf = str(default_gguf_path())
    except Exception as exc:  # report, do not crash: this is a diagnostic
        gguf = f"missing ({exc})"
    out.append(BackendStatus(
        "local", llama is not None and not gguf.startswith("missing"),
        f"llama-cpp-python {llama or 'not installed'}; default GGUF: {gguf}",
    ))
    # the direct path is decoevo's own client (lm/http1.py); aiohttp carries requests through a proxy
    http = _version("aiohttp")
    out.append(BackendStatus("openai", True, "built in (through a proxy: aiohttp "
                             f"{http or 'not installed'}); any OpenAI-compatible base_url"))
    return out


def endpoint_lines(lm: LM) -> list[str]:
    """How the default model's endpoint is spoken to, as negotiated by the probe (openai backend only)."""
    backend = lm.backend(lm.model_for("doctor"))
    profile = getattr(backend, "profile", None)
    if profile is None:
        return []
    spec = lm.config.models[lm.model_for("doctor")]
    how = "set in the config" if spec.structured_output != "auto" else "negotiated"
    where = f", remembered in {lm.cache.path.with_name('endpoints.json')}" if lm.cache is not None else ""
    return [
        f"structured output: {profile.structured or 'not negotiated yet'} ({how}{where})",
        f"token limit sent as: {profile.token_param}; temperature: {'sent' if profile.temperature else 'left out'}"
        + (f"; reasoning_effort: {spec.reasoning_effort}" if spec.reasoning_effort else ""),
    ]


def served_lines(identities: list[Any]) -> list[str]:
    """What each server's `GET /models` lists (an OpenAI-compatible server), or why it could not be read."""
    out = []
    for identity in identities:
        if identity.backend != "openai":
            continue
        listed = ", ".join(identity.served_ids) if identity.served_ids else None
        out.append(f"model {identity.name}: {identity.base_url} serves: {listed}" if listed else
                   f"model {identity.name}: {identity.base_url} lists no models ({identity.error or 'empty list'})")
    return out


def capacity_lines(name: str, spec: Any, config: LMConfig) -> list[str]:
    """What a served model's server can take (its slots, its structured-output speed) and the settings that
    fit it (`server_fit.advice`); measured afresh here, and remembered for the runs that follow."""
    from ..lm.capacity import free_to_probe
    from .server_fit import advice, server_capacity

    if not free_to_probe(spec):  # the embedded model, or a provider's API: no slots, and probes are paid
        return []

    with console.status(f"{name}: measuring what the server takes at once and how fast structured output is"):
        try:
            capacity = server_capacity(spec, config, doctor=True)
        except (LMError, OSError) as exc:
            return [f"model {name}: its capacity could not be measured ({str(exc).rstrip('.')})"]
    return advice(name, spec, capacity)


async def probe_call(config: LMConfig | None = None, max_tokens: int = 64) -> tuple[DoctorAnswer, float, LM]:
    lm = LM(config or LMConfig())
    messages = [
        Message("system", "You answer geography questions. Reply with a JSON object."),
        Message("user", "What is the capital city of France? Give the city name in the field capital "
                        "and your confidence between 0 and 1 in the field confidence."),
    ]
    started = time.monotonic()
    try:
        answer = await lm.structured(messages, DoctorAnswer, role="doctor", params=GenParams(max_tokens=max_tokens))
    finally:
        await lm.aclose()  # the ledger stays readable
    return answer, time.monotonic() - started, lm


def run_probe(config: LMConfig | None = None, max_tokens: int = 64) -> tuple[DoctorAnswer, float, LM]:
    return asyncio.run(probe_call(config, max_tokens))


@guarded
def doctor(
    model: str = ModelOption,
    base_url: str = BaseUrlOption,
    no_cache: bool = NoCacheOption,
    structured_output: str = typer.Option(None, help="auto (the default: negotiate), json_schema, json_object or "
                                          "none."),
    reasoning_effort: str = typer.Option(None, help="For reasoning models: none, minimal, low, medium, high."),
    api_key_env: str = typer.Option(None, help="The environment variable holding the API key."),
    max_tokens: int = typer.Option(None, min=1, help="Token limit of the probe (default 64; 1024 for a server)."),
    config_file: Path = typer.Option(None, "--config", "-c", help="Check the models of this run configuration "
                                     "(its lm section: a LiteLLM backend, a configured endpoint)."),
    set_: list[str] = typer.Option([], "--set", help="Override a model setting: an lm.* key, as for run."),
    allow_unlisted_model: bool = AllowUnlistedOption,
) -> None:
    """Show the available backends, load the default model and make one structured call."""
    from ..errors import ConfigError
    from .settings import doctor_lm_config

    table = Table(title="decoevo backends")
    for col in ("backend", "available", "detail"):
        table.add_column(col)
    for status in backend_statuses():
        table.add_row(status.name, "yes" if status.available else "no", status.detail)
    show_table(console, table)
    settings = {k: v for k, v in (("structured_output", structured_output), ("reasoning_effort", reasoning_effort),
                                  ("api_key_env", api_key_env)) if v is not None}
    config = doctor_lm_config(config_file=config_file, sets=set_, model=model, base_url=base_url, no_cache=no_cache,
                              settings=settings)
    from ..engine.provenance import model_identities  # the servers' /models lists

    check_keys(config, os.environ)
    identities = model_identities(config)
    for line in served_lines(identities):
        console.print(line, highlight=False)
    check_served(config, allow_unlisted_model, identities)
    for name, spec in config.models.items():  # each configured model (a role map's judge too)
        one = config.model_copy(update={"models": {"default": spec}, "roles": {}})
        probe_tokens = max_tokens or (64 if spec.backend == "local" else 1024)
        label = f"model {name} ({spec.backend}: {spec.model})" if len(config.models) > 1 else "structured call"
        with console.status(f"{name}: loading the model and making one structured call"):
            try:
                answer, seconds, lm = run_probe(one, probe_tokens)
            except (LMError, ConfigError) as exc:
                label = failure_label(exc) if isinstance(exc, LMError) else "config"
                fail(f"the probe call failed ({label}) for model '{name}': {exc}")
        console.print(f"{label} OK in {seconds:.1f}s -> {answer.model_dump()}", highlight=False)
        for line in endpoint_lines(lm):
            console.print(line, highlight=False)
        for line in capacity_lines(name, spec, one):
            console.print(line, highlight=False)
        show_table(console, lm.ledger.table(), keys=2)
