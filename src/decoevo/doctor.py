"""`decoevo doctor`: what backends this machine has, and one real structured call on the default."""

from __future__ import annotations

import asyncio
import importlib.metadata
import time
from dataclasses import dataclass

from pydantic import BaseModel, Field

from .lm import LM, GenParams, LMConfig, Message


class DoctorAnswer(BaseModel):
    """The probe's output schema: small enough for a 135M model, strict enough to test validation."""

    capital: str = Field(max_length=60)
    confidence: float = Field(ge=0.0, le=1.0)


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
        from .lm.local import default_gguf_path

        gguf = str(default_gguf_path())
    except Exception as exc:  # report, do not crash: this is a diagnostic
        gguf = f"missing ({exc})"
    out.append(BackendStatus(
        "local", llama is not None and not gguf.startswith("missing"),
        f"llama-cpp-python {llama or 'not installed'}; default GGUF: {gguf}",
    ))
    http = _version("aiohttp")
    out.append(BackendStatus("openai", http is not None,
                             f"aiohttp {http or 'not installed'}; any OpenAI-compatible base_url"))
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
