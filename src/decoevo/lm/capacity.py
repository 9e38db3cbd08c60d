"""What a served model can take: how many requests it generates at once (its slots), and whether a
schema-constrained reply is much slower there than a plain one.

A run once sent 64 requests at a time to llama-cpp-python's one-slot server. The queued requests spent
their first-byte limits waiting, the server went on generating the ones their client had given up on, and
a schema-constrained reply came at 1.3 tokens/s against 36 for a plain one (a grammar checked against every
token of the vocabulary). The run died at its first step. So before a run (and in `decoevo doctor`):

- slots: llama.cpp's server says them (`GET /props`: `total_slots`; `GET /slots`: one entry per slot);
  llama-cpp-python's server names itself in `GET /openapi.json` and has one. Otherwise `decoevo doctor`
  measures them: one short plain request alone, then `PROBE_WIDTH` at once; a server that
  answers the batch in about `PROBE_WIDTH` times the single request's time generates one at a time.
- structured speed: one short plain and one short schema-constrained request, timed; constrained below
  `1/SLOW_FACTOR` of the plain speed (and below `SLOW_BELOW_TPS`) is slow.

Measuring sends a few short requests, so only a server that looks free to ask is measured (not a known paid
provider, no price set). A run's pre-flight reads the stated slots (three GETs that touch no model) and times
structured output only at a llama.cpp server (where grammars are slow); what it measured is remembered per
endpoint (`capacity.json` next to the request cache). `decoevo doctor` measures afresh.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from .config import ModelSpec
from .memory import read_entries, write_entries
from .providers import PROVIDERS
from .types import BackendRequest, GenParams, Message

#: requests sent at once to measure slots: enough to tell one slot from several, few enough to be cheap
PROBE_WIDTH = 4
#: a constrained reply this many times slower per token than a plain one is "slow"
SLOW_FACTOR = 4.0
#: the probes' token limit: long enough for a speed, short enough for a slow server (~20 s at 1.3 tokens/s)
PROBE_TOKENS = 24
GET_TIMEOUT_S = 5.0
#: a lone short request answered faster than this leaves slots unmeasured (see `measure_slots`)
MEASURABLE_S = 0.05
#: constrained decoding slower than this (tokens/s) is slow in absolute terms too: below the default speed
#: the timeouts assume (`ModelSpec.min_tokens_per_s`, 25)
SLOW_BELOW_TPS = 20.0

_ASK = (Message("user", "What is the capital city of France? Answer with the city and your confidence "
                        "between 0 and 1, then one sentence about the city."),)


class DoctorAnswer(BaseModel):
    """`decoevo doctor`'s probe schema, also the constrained probe's here: small enough for a 135M model, strict
    enough to test validation."""

    model_config = ConfigDict(defer_build=True)  # its validator is built at first use, not at import

    capital: str = Field(max_length=60)
    confidence: float = Field(ge=0.0, le=1.0)


@dataclass(frozen=True)
class Capacity:
    """What was found about one endpoint. `slots` None: not known; `slots_at_least`: the measurement saw
    no queueing up to `slots`, so there may be more. Speeds are completion tokens per second."""

    slots: int | None = None
    slots_source: str = "unknown"  # "llama.cpp /props", "llama.cpp /slots", "measured"
    slots_at_least: bool = False
    plain_tps: float | None = None
    structured_tps: float | None = None
    structured_mode: str | None = None  # how the constrained probe was sent (json_schema, json_object, none)

    @property
    def structured_slow(self) -> bool:
        return (self.plain_tps is not None and self.structured_tps is not None
                and self.structured_tps * SLOW_FACTOR < self.plain_tps and self.structured_tps < SLOW_BELOW_TPS)

    def describe_slots(self) -> str:
        if self.slots is None:
            why = self.slots_source if self.slots_source.startswith("not measured") else \
                "the server states none and they were not measured"
            return f"slots: unknown ({why})"
        more = " or more" if self.slots_at_least else ""
        return f"slots: {self.slots}{more} ({self.slots_source}): requests it generates at once"

    def describe_speed(self) -> str | None:
        if self.plain_tps is None or self.structured_tps is None:
            return None
        verdict = "slow" if self.structured_slow else "fine"
        return (f"structured output: {verdict} here, {self.structured_tps:.1f} tokens/s schema-constrained "
                f"({self.structured_mode}) against {self.plain_tps:.1f} plain")


def server_root(base_url: str) -> str:
    """The server's own address: `base_url` without its API prefix (`/v1`), where llama.cpp serves `/props`."""
    url = base_url.rstrip("/")
    return url[: -len("/v1")] if url.endswith("/v1") else url


def free_to_probe(spec: ModelSpec) -> bool:
    """Whether a run may send probe requests unasked: a server of the user's own, not a paid provider."""
    if spec.backend != "openai" or not spec.base_url:
        return False
    if spec.input_price_per_mtok or spec.output_price_per_mtok:
        return False
    return spec.base_url.rstrip("/") not in {p.base_url.rstrip("/") for p in PROVIDERS.values()}


def _slots_from(path: str, data: Any) -> int | None:
    if path == "/props" and isinstance(data, dict):
        total = data.get("total_slots")
        return total if isinstance(total, int) and not isinstance(total, bool) and total >= 1 else None
    if path == "/slots" and isinstance(data, list) and data:
        return len(data)
    if path == "/openapi.json" and isinstance(data, dict):  # llama-cpp-python's server: one model lock
        info = data.get("info")
        title = info.get("title") if isinstance(info, dict) else None
        return 1 if isinstance(title, str) and "llama.cpp Python API" in title else None
    return None


SLOT_SOURCES = {"/props": "llama.cpp's /props", "/slots": "llama.cpp's /slots",
                "/openapi.json": "llama-cpp-python's server, which generates one reply at a time"}


async def read_slots(spec: ModelSpec) -> Capacity | None:
    """The slots the server states: llama.cpp's `/props` (`total_slots`), else its `/slots`; llama-cpp-python's
    server states none, but names itself in its `/openapi.json` and always has one. None: nothing found."""
    import urllib.parse

    from .errors import LMError
    from .http1 import Client, HTTPFailure
    from .openai_backend import request_headers

    assert spec.base_url is not None
    root = server_root(spec.base_url)
    prefix = urllib.parse.urlsplit(root).path
    # the run's own HTTP client (no aiohttp before a run's first call); never through a proxy, as before
    http = Client(root, request_headers(spec.read_api_key()), connect_timeout_s=GET_TIMEOUT_S, max_idle=1,
                  limit=1 << 20, where=root)
    try:
        for path in SLOT_SOURCES:
            try:
                async with asyncio.timeout(GET_TIMEOUT_S):
                    response = await http.request("GET", prefix + path)
                if response.status != 200:
                    continue
                data = json.loads(response.body)
            except (TimeoutError, HTTPFailure, LMError, ValueError):
                continue
            slots = _slots_from(path, data)
            if slots is not None:
                return Capacity(slots=slots, slots_source=SLOT_SOURCES[path])
    finally:
        await http.aclose()
    return None


async def _timed(backend: Any, request: BackendRequest) -> tuple[float, int]:
    started = time.monotonic()
    completion = await backend.complete(request)
    return time.monotonic() - started, completion.completion_tokens


def _request(spec: ModelSpec, index: int, schema: dict[str, Any] | None = None,
             max_tokens: int = PROBE_TOKENS) -> BackendRequest:
    # distinct sample indices: a server that caches answers must still generate each probe
    params = GenParams(temperature=0.0, max_tokens=max_tokens, sample_index=index, seed=int(time.time()) % 100_000)
    return BackendRequest(model=spec.model, messages=_ASK, params=params, json_schema=schema)


async def measure_slots(backend: Any, spec: ModelSpec) -> Capacity:
    """Slots from timing: one request alone, then `PROBE_WIDTH` at once (short replies). A server that answers
    the lone request faster than `MEASURABLE_S` is not judged: noise would decide, and queueing there costs
    little anyway."""
    alone, _ = await _timed(backend, _request(spec, 1, max_tokens=8))
    if alone < MEASURABLE_S:
        return Capacity(slots_source=f"not measured: it answers a short request in {alone * 1000:.0f} ms")
    started = time.monotonic()
    await asyncio.gather(*(_timed(backend, _request(spec, 2 + i, max_tokens=8)) for i in range(PROBE_WIDTH)))
    together = time.monotonic() - started
    slots = max(1, min(PROBE_WIDTH, round(PROBE_WIDTH * alone / max(together, 1e-9))))
    return Capacity(slots=slots, slots_source="measured", slots_at_least=slots == PROBE_WIDTH)


async def measure_structured(backend: Any, spec: ModelSpec, schema: dict[str, Any]) -> tuple[float, float, str | None]:
    """(plain tokens/s, constrained tokens/s, the structured mode used), from one short request each, the
    constrained one under `schema` (`decoevo doctor`'s probe schema: a city and a confidence). It goes as the
    endpoint's negotiated mode; when none is known yet a first request negotiates it and a second is timed."""
    # A first short request warms the server (a loaded model, its cache of the prompt's prefix): timed first,
    # the plain request measured 4 tokens/s where the constrained one after it measured 32.
    await backend.complete(_request(spec, 9, max_tokens=4))
    plain_s, plain_tokens = await _timed(backend, _request(spec, 10))
    if getattr(backend, "profile", None) is not None and backend.profile.structured is None:
        await backend.complete(_request(spec, 11, schema, max_tokens=4))
    schema_s, schema_tokens = await _timed(backend, _request(spec, 12, schema))
    mode = getattr(getattr(backend, "profile", None), "structured", None)
    return plain_tokens / max(plain_s, 1e-9), schema_tokens / max(schema_s, 1e-9), mode


class CapacityMemory:
    """Measured capacities by endpoint identity, in `path` (JSON) when given: measuring costs requests."""

    def __init__(self, path: Path | None) -> None:
        self.path = path

    def get(self, identity: str) -> Capacity | None:
        entry = read_entries(self.path).get(identity)
        if entry is None:
            return None
        try:
            return Capacity(**entry)
        except TypeError:
            return None

    def remember(self, identity: str, capacity: Capacity) -> None:
        if self.path is not None:  # an unwritable cache directory: measured again next time
            write_entries(self.path, {**read_entries(self.path), identity: asdict(capacity)})


def capacity_path(cache_path: Path) -> Path:
    return cache_path.with_name("capacity.json")
