"""A run's pre-flight against its servers, and `decoevo doctor`'s lines about them: how many requests each
server generates at once and whether schema-constrained replies are slow there (`lm.capacity`), turned into
settings or advice.

A run sets only what cannot change its results: `max_concurrency` to the server's slots (when the user left it
unset), and `min_tokens_per_s` to the measured constrained speed (when the user left it unset and that speed is
slow: the default timeouts would end every long structured reply). Switching structured output off changes the
requests, so it is advised in one line, never done unasked.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..lm import LMConfig, LMError, ModelSpec
from ..lm.capacity import (
    SLOT_SOURCES,
    Capacity,
    CapacityMemory,
    DoctorAnswer,
    capacity_path,
    free_to_probe,
    measure_slots,
    measure_structured,
    read_slots,
)
from ..lm.endpoint import EndpointMemory, endpoints_path
from ..lm.structured import schema_for

STATED = frozenset(SLOT_SOURCES.values())
#: the measured constrained speed a run's timeouts are sized to: some margin below what the probe saw
SPEED_MARGIN = 0.8


async def _capacity(spec: ModelSpec, cache_path: Path | None, *, slots: bool) -> Capacity:
    """The slots `spec`'s server states; with `slots`, measured when it states none."""
    stated = await read_slots(spec)
    if stated is not None or not slots:
        return stated or Capacity()
    async with _backend(spec, cache_path) as backend:
        return await measure_slots(backend, spec)


@asynccontextmanager
async def _backend(spec: ModelSpec, cache_path: Path | None) -> AsyncIterator[Any]:
    """A backend of its own for the probes (the endpoint's learned structured form read and kept)."""
    from ..lm.openai_backend import OpenAIBackend

    backend = OpenAIBackend(spec, EndpointMemory(endpoints_path(cache_path) if cache_path is not None else None))
    try:
        yield backend
    finally:
        await backend.aclose()


def _cache_path(lm: LMConfig) -> Path | None:
    if not lm.use_cache:
        return None
    from ..lm.cache import default_cache_path

    return Path(lm.cache_path) if lm.cache_path else default_cache_path()


def server_capacity(spec: ModelSpec, lm: LMConfig, *, doctor: bool) -> Capacity:
    """What `spec`'s server can take; nothing at a paid provider (`capacity.free_to_probe`). The slots a server
    states are read each time. `doctor` measures what it does not state (slots, structured speed) afresh; a run
    times structured output only at a server that states its slots (llama.cpp's), once per endpoint
    (remembered in capacity.json next to the request cache)."""
    cache = _cache_path(lm)
    memory = CapacityMemory(capacity_path(cache) if cache is not None else None)
    free = free_to_probe(spec)
    if not free:  # a provider's API has no slots to read, and its requests are paid
        return Capacity()
    remembered = None if doctor else memory.get(spec.identity())
    if remembered is not None:
        return _merged(asyncio.run(_capacity(spec, cache, slots=False)), remembered)
    stated = asyncio.run(_capacity(spec, cache, slots=doctor))
    if not (doctor or stated.slots_source in STATED):
        return stated
    found = asyncio.run(_measured_speed(spec, cache, stated))
    memory.remember(spec.identity(), found)
    return found


async def _measured_speed(spec: ModelSpec, cache_path: Path | None, found: Capacity) -> Capacity:
    async with _backend(spec, cache_path) as backend:
        plain, structured, mode = await measure_structured(backend, spec, schema_for(DoctorAnswer))
    return replace(found, plain_tps=round(plain, 2), structured_tps=round(structured, 2), structured_mode=mode)


def _merged(stated: Capacity, remembered: Capacity) -> Capacity:
    """The slots the server states now (when it states any) with the speeds remembered."""
    if stated.slots is None:
        return remembered
    return Capacity(stated.slots, stated.slots_source, False, remembered.plain_tps, remembered.structured_tps,
                    remembered.structured_mode)


def _flag(name: str, key: str, value: object) -> str:
    return f"--set lm.models.{name}.{key}={value}"


def advice(name: str, spec: ModelSpec, capacity: Capacity) -> list[str]:
    """One line per finding, each with the setting it concerns (doctor: nothing is changed)."""
    lines = [f"model {name}: {capacity.describe_slots()}"]
    if capacity.slots is not None and not capacity.slots_at_least:
        if spec.max_concurrency is None:
            lines.append(f"model {name}: a run sends at most {capacity.slots} request(s) at a time there (not 64: "
                         "the others would queue and spend their timeouts); it sets max_concurrency itself")
        elif spec.max_concurrency > capacity.slots:
            lines.append(f"model {name}: max_concurrency {spec.max_concurrency} queues requests at the server; "
                         f"{_flag(name, 'max_concurrency', capacity.slots)}")
    speed = capacity.describe_speed()
    if speed is not None:
        lines.append(f"model {name}: {speed}")
        if capacity.structured_slow and spec.structured_output != "none":
            lines.append(f"model {name}: a run sizes its timeouts to that speed; for speed, "
                         f"{_flag(name, 'structured_output', 'none')} (the schema goes in the prompt and each reply "
                         "is validated after decoding; a small model may need more repairs)")
    return lines


def fitted(name: str, spec: ModelSpec, capacity: Capacity) -> tuple[ModelSpec, list[str]]:
    """`spec` with the result-neutral settings the server's capacity calls for, and a line for each."""
    update: dict[str, Any] = {}
    lines = []
    if capacity.slots is not None and not capacity.slots_at_least and spec.max_concurrency is None:
        update["max_concurrency"] = capacity.slots
        lines.append(f"server: model {name} generates {capacity.slots} request(s) at once "
                     f"({capacity.slots_source}); sending at most {capacity.slots} at a time "
                     f"(lm.models.{name}.max_concurrency)")
    if capacity.structured_slow and spec.structured_output != "none":
        assert capacity.structured_tps is not None and capacity.plain_tps is not None
        speed = round(max(0.1, capacity.structured_tps * SPEED_MARGIN), 2)
        if "min_tokens_per_s" not in spec.model_fields_set and speed < spec.min_tokens_per_s:
            update["min_tokens_per_s"] = speed
            sized = f"; timeouts sized to {speed:g} tokens/s (lm.models.{name}.min_tokens_per_s)"
        else:
            sized = ""
        lines.append(f"server: model {name}'s schema-constrained replies are slow ({capacity.structured_tps:.1f} "
                     f"tokens/s against {capacity.plain_tps:.1f} plain){sized}; for speed, "
                     f"{_flag(name, 'structured_output', 'none')}")
    return (spec.model_copy(update=update) if update else spec), lines


def fit_to_servers(lm: LMConfig, say: Callable[[str], None]) -> LMConfig:
    """The run's pre-flight: each served model's capacity found and applied (`fitted`); a server that cannot
    be measured is said so, and the run goes on with its settings as they are. The configuration's files (an API
    key file) are checked first, as the run checks them, so a bad one is named before a probe reads it."""
    from ..userfiles import check_lm_files

    check_lm_files(lm)
    models = dict(lm.models)
    for name, spec in lm.models.items():
        if spec.backend != "openai" or not spec.base_url:
            continue
        if spec.max_concurrency is not None and "min_tokens_per_s" in spec.model_fields_set:
            continue  # nothing left to fit (a resumed run's recorded settings)
        try:
            capacity = server_capacity(spec, lm, doctor=False)
        except (LMError, OSError) as exc:
            say(f"server: model {name}: its capacity could not be measured ({str(exc).rstrip('.')}); "
                "going on with the configured concurrency")
            continue
        models[name], lines = fitted(name, spec, capacity)
        for line in lines:
            say(line)
    return lm.model_copy(update={"models": models}) if models != lm.models else lm
