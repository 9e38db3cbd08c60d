"""Dollars per call: a model's price per million input and output tokens, from its ModelSpec or, when
LiteLLM is installed, from LiteLLM's published cost map (read as a file: importing litellm takes seconds).
The embedded model runs on this machine and costs nothing; an unpriced server model has no cost (None),
which a dollar budget refuses rather than counting as free."""

from __future__ import annotations

import functools
import importlib.util
import json
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

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
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


def price_for(spec: ModelSpec, cost_map: dict[str, Any] | None = None) -> Price | None:
    if spec.input_price_per_mtok is not None or spec.output_price_per_mtok is not None:
        return Price(spec.input_price_per_mtok or 0.0, spec.output_price_per_mtok or 0.0)
    if spec.backend == "local":
        return FREE
    return price_from_cost_map(spec.model, litellm_cost_map() if cost_map is None else cost_map)
