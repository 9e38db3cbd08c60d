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


async def probe_call(config: LMConfig | None = None) -> tuple[DoctorAnswer, float, LM]:
    lm = LM(config or LMConfig())
    messages = [
        Message("system", "You answer geography questions. Reply with a JSON object."),
        Message("user", "What is the capital city of France? Give the city name in the field capital "
                        "and your confidence between 0 and 1 in the field confidence."),
    ]
    started = time.monotonic()
    try:
        answer = await lm.structured(messages, DoctorAnswer, role="doctor", params=GenParams(max_tokens=64))
    finally:
        await lm.aclose()  # the ledger stays readable
    return answer, time.monotonic() - started, lm


def run_probe(config: LMConfig | None = None) -> tuple[DoctorAnswer, float, LM]:
    return asyncio.run(probe_call(config))
