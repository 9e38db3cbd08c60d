"""Dollars per call: a model's price per million input and output tokens, from its ModelSpec (which
overrides everything, per model), else from the price table of `genai-prices` (a dependency: its table
ships with the package, dated by its version, and is read offline; it never updates itself unless asked),
matched on the provider of the model's `base_url` and its name, else, when LiteLLM is installed, from
LiteLLM's published cost map (read as a file: importing litellm takes seconds). A server the table does
not know (a local vLLM, the simulator) is not priced by its model's name: a self-hosted "gpt-4o" is not
OpenAI's. The embedded model runs on this machine and costs nothing; an unpriced server model has no
cost (None), which a dollar budget refuses rather than counting as free."""

from __future__ import annotations

import functools
import importlib.util
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .config import ModelSpec

_COST_MAP_FILE = "model_prices_and_context_window_backup.json"


@dataclass(frozen=True)
class Price:
    input_per_mtok: float  # USD per 1,000,000 prompt tokens
    output_per_mtok: float  # USD per 1,000,000 completion tokens
    source: str = "config"

    def cost(self, prompt_tokens: float, completion_tokens: float) -> float:
        return (prompt_tokens * self.input_per_mtok + completion_tokens * self.output_per_mtok) / 1e6


FREE = Price(0.0, 0.0, "local")


@functools.lru_cache(maxsize=1)
def litellm_cost_map() -> dict[str, Any]:
    """LiteLLM's cost map when the package is installed, else {}."""
    spec = importlib.util.find_spec("litellm")
    if spec is None or not spec.submodule_search_locations:
        return {}
    path = Path(next(iter(spec.submodule_search_locations))) / _COST_MAP_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def price_from_cost_map(model: str, cost_map: dict[str, Any]) -> Price | None:
    """The map's price for `model` (as given, or without a provider prefix such as `openai/`)."""
    for name in (model, model.split("/", 1)[-1]):
        entry = cost_map.get(name)
        if isinstance(entry, dict):
            inp, out = entry.get("input_cost_per_token"), entry.get("output_cost_per_token")
            if isinstance(inp, int | float) and isinstance(out, int | float):
                return Price(inp * 1e6, out * 1e6, "litellm")
    return None


_PROBE_TOKENS = 1000  # priced per 1,000 tokens and scaled: a million would cross long-context price tiers


@functools.lru_cache(maxsize=64)
def price_from_table(backend: str, model: str, base_url: str | None) -> Price | None:
    """genai-prices' price of `model` at the provider `base_url` names (openai backend), or at the
    provider its `provider/` prefix names (litellm backend); None when the table has no such provider
    and model, or the package is missing."""
    if backend == "openai" and (not base_url or _names_no_provider(base_url)):
        return None  # decided before importing the table: that costs ~0.3 s of CPU at a run's start
    try:
        from genai_prices import Usage, calc_price
    except ImportError:
        return None
    provider: str | None = None
    if backend == "litellm" and "/" in model:
        provider, model = model.split("/", 1)
    elif backend == "litellm":
        provider = "openai"  # LiteLLM's default provider for a bare model name
    try:
        usage = Usage(input_tokens=_PROBE_TOKENS, output_tokens=_PROBE_TOKENS)
        calc = (calc_price(usage, model_ref=model, provider_id=provider) if provider is not None
                else calc_price(usage, model_ref=model, provider_api_url=base_url))
    except (LookupError, ValueError):
        return None
    scale = 1e6 / _PROBE_TOKENS
    return Price(float(calc.input_price) * scale, float(calc.output_price) * scale, f"genai-prices {_version()}")


def _names_no_provider(base_url: str) -> bool:
    """A server named by `localhost` or an IP address: the table finds a provider by its API's domain, so it
    has none for such a server (a local vLLM, the toy world, the simulator)."""
    import ipaddress
    from urllib.parse import urlsplit

    try:
        host = urlsplit(base_url).hostname or ""
    except ValueError:
        return False
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("genai-prices")
    except PackageNotFoundError:
        return "?"


def price_for(spec: ModelSpec, cost_map: dict[str, Any] | None = None) -> Price | None:
    if spec.input_price_per_mtok is not None or spec.output_price_per_mtok is not None:
        return Price(spec.input_price_per_mtok or 0.0, spec.output_price_per_mtok or 0.0)
    if spec.backend == "local":
        return FREE
    table = price_from_table(spec.backend, spec.model, spec.base_url)
    if table is not None:
        return table
    return price_from_cost_map(spec.model, litellm_cost_map() if cost_map is None else cost_map)


def cost_of_models(models: Mapping[str, ModelSpec | None]) -> Callable[[str, int, int], float]:
    """Dollars of a call recorded under a model name, at that model's price; a name not in `models` (or
    without a spec) at the dearest of their prices, never at $0 (a count that must not be lifted); an
    unpriced model at $0 (its dollars are unknown, as the plan says)."""
    prices = {name: price_for(spec) for name, spec in models.items() if spec is not None}
    dearest = max((p for p in prices.values() if p is not None),
                  key=lambda p: p.input_per_mtok + p.output_per_mtok, default=None)

    def cost(model: str, prompt_tokens: int, completion_tokens: int) -> float:
        price = prices.get(model, dearest)  # a known unpriced model: None, $0
        return price.cost(prompt_tokens, completion_tokens) if price is not None else 0.0

    return cost
