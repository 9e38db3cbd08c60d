"""What a run against a server settles before its first paid call: the preset it starts from when none
was given (sizes for the model that answers), and whether the server serves the model it names."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError
from ..lm import LMConfig

EMBEDDED_PRESET = "quick"  # sized for the embedded 135M model on two cores
SERVER_PRESET = "default"  # room for a capable model's answers (the server token limits, engine/config.py)


@dataclass(frozen=True)
class PresetChoice:
    name: str
    reason: str | None  # None: the user named it


def choose_preset(given: str | None, served: bool) -> PresetChoice:
    """The preset a run starts from: the one given, else `default` for a model behind a server (the
    `quick` sizes cut a capable model's answers: 120 tokens) and `quick` for the embedded model."""
    if given is not None:
        return PresetChoice(given, None)
    if served:
        return PresetChoice(SERVER_PRESET, "the model is served: answers get a capable model's token limits; "
                                           "--preset quick for the embedded model's sizes")
    return PresetChoice(EMBEDDED_PRESET, "the embedded model; against a server --preset default or paper")


def default_is_served(lm: Any) -> bool:
    """Whether a configuration's `lm` section (a mapping, unvalidated) serves its default model."""
    models = lm.get("models") if isinstance(lm, dict) else None
    default = models.get("default") if isinstance(models, dict) else None
    return isinstance(default, dict) and default.get("backend") in ("openai", "litellm")


@dataclass(frozen=True)
class Unlisted:
    name: str  # the key in lm.models
    model: str
    base_url: str
    served_ids: tuple[str, ...]


def unlisted_models(identities: list[Any]) -> list[Unlisted]:
    """The configured models a server's `/models` list does not hold. A server that lists nothing, or whose
    list cannot be read, is not judged here: a failing server fails on the first call."""
    return [Unlisted(i.name, i.model, str(i.base_url), tuple(i.served_ids)) for i in identities
            if i.backend == "openai" and i.served is None and i.served_ids]


def unlisted_message(found: Unlisted) -> str:
    shown = ", ".join(found.served_ids)
    which = "--model" if found.name == "default" else f"lm.models.{found.name}.model"
    return (f"{which} {found.model}: the server at {found.base_url} does not serve it (GET /models lists: "
            f"{shown}); name one of those, or pass --any-model for a server that answers any name")


def check_served(lm: LMConfig, allow_unlisted: bool, identities: list[Any] | None = None) -> None:
    """Refuse a model the server does not list, before any call is paid (`--any-model`: a
    server that ignores the name, e.g. llama.cpp's, serving one model whatever is asked).
    `identities`: the models' `/models` entries when already read."""
    if allow_unlisted or not any(spec.backend == "openai" for spec in lm.models.values()):
        return
    from ..engine.provenance import model_identities

    unlisted = unlisted_models(identities if identities is not None else model_identities(lm))
    if unlisted:
        raise ConfigError(unlisted_message(unlisted[0]))


def check_keys(lm: LMConfig, environ: Mapping[str, str]) -> None:
    """A provider's API (`--model openai/...`, or its address in a config) with no key set is refused
    before any call: it would answer 401 to each. Other servers may need no key, and are not judged."""
    from ..lm.providers import PROVIDERS

    needs = {p.base_url.rstrip("/") for p in PROVIDERS.values()}
    for name, spec in lm.models.items():
        if (spec.backend == "openai" and spec.base_url and spec.base_url.rstrip("/") in needs
                and not spec.api_key_file and not environ.get(spec.api_key_env)):
            which = "--model" if name == "default" else f"lm.models.{name}"
            raise ConfigError(f"{which} {spec.model} at {spec.base_url} needs an API key: set ${spec.api_key_env} "
                              f"(or lm.models.{name}.api_key_file)")
