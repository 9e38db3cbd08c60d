"""`--model PROVIDER/MODEL`, the convention of Inspect, LiteLLM and promptfoo: a provider with an
OpenAI-compatible API, its address and the variable holding its key. A pure lookup: `resolve_model_flag`
turns the --model/--base-url pair into the served model it names, or a `ConfigError` that says what to pass.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .errors import ConfigError


@dataclass(frozen=True)
class Provider:
    base_url: str
    api_key_env: str


# Providers whose chat API is OpenAI-compatible at a fixed address (their documented base URLs).
PROVIDERS: dict[str, Provider] = {
    "openai": Provider("https://api.openai.com/v1", "OPENAI_API_KEY"),
    "openrouter": Provider("https://openrouter.ai/api/v1", "OPENROUTER_API_KEY"),
    "groq": Provider("https://api.groq.com/openai/v1", "GROQ_API_KEY"),
    "deepseek": Provider("https://api.deepseek.com/v1", "DEEPSEEK_API_KEY"),
    "together": Provider("https://api.together.xyz/v1", "TOGETHER_API_KEY"),
}


@dataclass(frozen=True)
class ServedModel:
    """A model at a server: its name there, the server, and the key's variable (None: the configured one)."""

    model: str
    base_url: str
    api_key_env: str | None = None
    provider: str | None = None


def looks_like_gguf(model: str) -> bool:
    return model.lower().endswith(".gguf") or Path(model).expanduser().is_file()


def resolve_model_flag(model: str | None, base_url: str | None) -> ServedModel | None:
    """What `--model` names when no server of the configuration serves it: None for a GGUF file (or no
    --model); with --base-url, that server's model as named; `PROVIDER/MODEL` a provider's model.
    A bare name without --base-url, or an unknown provider, is a ConfigError saying what to pass."""
    if not model:
        return None
    if base_url:
        return ServedModel(model, base_url)
    if looks_like_gguf(model):
        return None
    known = ", ".join(f"{p}/" for p in PROVIDERS)
    prefix, slash, name = model.partition("/")
    if slash and prefix in PROVIDERS and name:
        provider = PROVIDERS[prefix]
        return ServedModel(name, provider.base_url, provider.api_key_env, prefix)
    if slash:
        raise ConfigError(f"--model {model}: decoevo knows no provider '{prefix}' (it knows {known}); for any other "
                          f"OpenAI-compatible server pass --base-url URL --model NAME")
    raise ConfigError(f"--model {model} is not a GGUF file; for a served model pass --base-url URL (an "
                      f"OpenAI-compatible server, e.g. http://127.0.0.1:8000/v1), or a provider's model "
                      f"(e.g. --model openai/{model} with OPENAI_API_KEY set)")
