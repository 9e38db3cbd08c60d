"""What a run against a server settles before its first paid call: the preset it starts from when none
was given (sizes for the model that answers: `presets.choose_preset`), whether the server serves the model
it names (`engine.served`, shared with the API), and whether a provider's key is set."""

from __future__ import annotations

from collections.abc import Mapping

from ..engine.served import check_served
from ..errors import ConfigError
from ..lm import LMConfig
from ..presets import EMBEDDED_PRESET, SERVER_PRESET, PresetChoice, choose_preset, default_is_served

__all__ = ["EMBEDDED_PRESET", "SERVER_PRESET", "PresetChoice", "check_keys", "check_served", "choose_preset",
           "default_is_served", "with_smaller_preset"]


def with_smaller_preset(message: str, preset: str) -> str:
    """A too-small question file's refusal, with the other way out when the run started from a larger
    preset than `quick` (a served run's `default` needs 24 questions): quick's splits, named with their size."""
    from ..presets import PRESETS

    if preset == EMBEDDED_PRESET:
        return message
    needs = sum(PRESETS[EMBEDDED_PRESET]["splits"].values())
    return (f"{message}; or start from --preset {EMBEDDED_PRESET} (its splits take {needs} questions, its "
            f"answers at most {PRESETS[EMBEDDED_PRESET]['hyper']['max_tokens_solve']} tokens)")


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
