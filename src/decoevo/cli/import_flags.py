"""The model an imported promptfoo config names, as the flags `decoevo run` would have been given for it.

Used only when the user chose no model (no --model, --base-url, a --config file's `lm` or `--set lm...`):
the file's provider becomes `--base-url URL --model NAME` (the same path as typed flags, so the preset,
the key check and the server check treat it alike), its key variable and max_tokens `--set` items. What
is not used is said, in the one line that says what was.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ..engine.config import MAX_TOKENS
from ..engine.resume_config import leaves
from ..interop.imported import Imported
from .settings import RunFlags, parse_sets

MIN_SOLVE_TOKENS = 16  # hyper.max_tokens_solve's own lower bound


def _user_chose_model(flags: RunFlags) -> str | None:
    """What the user gave that names the model (None: nothing)."""
    if flags.model or flags.base_url:
        return "--model/--base-url"
    if flags.config_file is not None:
        from ..userfiles import load_yaml_mapping

        if "lm" in load_yaml_mapping(flags.config_file):
            return f"{flags.config_file}'s lm section"
    if any(k == "lm" or k.startswith("lm.") for k in leaves(parse_sets(flags.sets))):
        return "--set lm..."
    return None


def flags_with_imported_model(flags: RunFlags, imported: Imported) -> tuple[RunFlags, str | None]:
    """`flags` with the file's model in them when the user chose none, and the line saying so (None:
    the file names no model; the summary already said why)."""
    model = imported.model
    if model is None:
        return flags, None
    chosen = _user_chose_model(flags)
    if chosen is not None:
        return flags, f"providers: {model.provider} not used: {chosen} given"
    sets = list(flags.sets)
    parts = [f"model: {model.model} at {model.base_url} (from providers: {model.provider}"
             + (f"; key from ${model.api_key_env}" if model.api_key_env else "") + ")"]
    if model.api_key_env:
        sets.append(f"lm.models.default.api_key_env='{model.api_key_env}'")  # an identifier: quoted, stays text
    user_set = leaves(parse_sets(flags.sets))
    if model.max_tokens is not None:
        if "hyper.max_tokens_solve" in user_set:
            parts.append(f"max_tokens {model.max_tokens} not used: --set hyper.max_tokens_solve given")
        elif MIN_SOLVE_TOKENS <= model.max_tokens <= MAX_TOKENS:
            sets.append(f"hyper.max_tokens_solve={model.max_tokens}")
            parts.append(f"max_tokens {model.max_tokens} -> hyper.max_tokens_solve")
        else:
            parts.append(f"max_tokens {model.max_tokens} not used: decoevo's solver takes "
                         f"{MIN_SOLVE_TOKENS}..{MAX_TOKENS}")
    if model.temperature is not None:
        parts.append(f"temperature {model.temperature:g} not used: decoevo answers at 0 and samples its "
                     "solver's rollouts at hyper.rollout_temperature")
    out: Any = replace(flags, model=model.model, base_url=model.base_url, sets=tuple(sets))
    return out, "; ".join(parts)
