"""Whether a server serves the models a run names: a name its `GET /models` does not list is refused
before the first paid call (a typo or a wrong server would otherwise run to the end on whatever answers).
The command line (`run`, `doctor`) and the API (`optimize`) share this check; they differ only in how the
refusal names the model and the way to allow it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..lm import LMConfig
from ..lm.errors import ConfigError


@dataclass(frozen=True)
class Unlisted:
    name: str  # the key in lm.models
    model: str
    base_url: str
    served_ids: tuple[str, ...]


@dataclass(frozen=True)
class Naming:
    """How a refusal names the default model and the way to run anyway (flags, or the API's arguments)."""

    default_model: str = "--model"
    allow: str = "--any-model"


CLI_NAMING = Naming()
API_NAMING = Naming(default_model="lm.model", allow="allow_unlisted=True")


def unlisted_models(identities: list[Any]) -> list[Unlisted]:
    """The configured models a server's `/models` list does not hold. A server that lists nothing, or whose
    list cannot be read, is not judged here: a failing server fails on the first call."""
    return [Unlisted(i.name, i.model, str(i.base_url), tuple(i.served_ids)) for i in identities
            if i.backend == "openai" and i.served is None and i.served_ids]


def unlisted_message(found: Unlisted, naming: Naming = CLI_NAMING) -> str:
    shown = ", ".join(found.served_ids)
    which = naming.default_model if found.name == "default" else f"lm.models.{found.name}.model"
    return (f"{which} {found.model}: the server at {found.base_url} does not serve it (GET /models lists: "
            f"{shown}); name one of those, or pass {naming.allow} for a server that answers any name")


def check_served(lm: LMConfig, allow_unlisted: bool, identities: list[Any] | None = None,
                 naming: Naming = CLI_NAMING) -> None:
    """Refuse a model the server does not list, before any call is paid (`allow_unlisted`: a server that
    ignores the name, e.g. llama.cpp's, serving one model whatever is asked). `identities`: the models'
    `/models` entries when already read."""
    if allow_unlisted or not any(spec.backend == "openai" for spec in lm.models.values()):
        return
    from .provenance import model_identities

    unlisted = unlisted_models(identities if identities is not None else model_identities(lm))
    if unlisted:
        raise ConfigError(unlisted_message(unlisted[0], naming))
