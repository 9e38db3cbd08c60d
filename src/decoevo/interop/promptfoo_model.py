"""The model a promptfoo config's `providers:` names, as decoevo's OpenAI-compatible backend calls it, or
one line saying why decoevo cannot call it.

promptfoo's `openai:chat:MODEL` (and `openai:MODEL`) with `config.apiBaseUrl` (or `apiHost`) is any
OpenAI-compatible server; `ollama:chat:MODEL` is Ollama's; `openrouter:`, `groq:` and `deepseek:` are the
providers decoevo knows by name. Everything else (HTTP, Python, JavaScript, exec providers, a completion
or embedding API) is promptfoo's own to run. A key written in the file (`apiKey`) is never copied: the key
comes from the variable promptfoo reads (`apiKeyEnvar`, else the provider's own).
"""

from __future__ import annotations

import math
import re
from typing import Any
from urllib.parse import urlsplit

from ..lm.providers import PROVIDERS
from .imported import ImportedModel

IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
OLLAMA = "http://localhost:11434/v1"
OPENAI_APIS = ("chat", "completion", "embedding", "embeddings", "responses", "assistant", "realtime")


class NotCallable(Exception):
    """Why decoevo cannot call the provider a config names (one line, shown to the user)."""


def _entries(raw: Any) -> list[tuple[str, dict[str, Any]]]:
    """The providers as (id, options): a string, a list of strings, `{id, config}` mappings or
    `{ID: options}` mappings."""
    items = raw if isinstance(raw, list) else [raw]
    out: list[tuple[str, dict[str, Any]]] = []
    for item in items:
        if isinstance(item, str):
            out.append((item, {}))
        elif isinstance(item, dict) and isinstance(item.get("id"), str):
            out.append((item["id"], item))
        elif isinstance(item, dict) and len(item) == 1 and isinstance(next(iter(item)), str):
            pid, options = next(iter(item.items()))
            out.append((pid, options if isinstance(options, dict) else {}))
        else:
            raise NotCallable("an entry is neither a provider id nor a mapping with one")
    return out


def _url(value: Any, field: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise NotCallable(f"{field} is not text")
    if "{{" in value or "{%" in value:
        raise NotCallable(f"{field} is a template promptfoo renders; pass --base-url")
    if any(not c.isprintable() or c.isspace() for c in value):
        raise NotCallable(f"{field} holds spaces or control characters")
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise NotCallable(f"{field} is not an http(s) address")
    if parts.username or parts.password:
        raise NotCallable(f"{field} carries credentials; decoevo takes keys from a variable only")
    return value.rstrip("/")


def _number(config: dict[str, Any], key: str) -> float | None:
    value = config.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise NotCallable(f"config.{key} is not a number")
    return float(value)


def _model(pid: str, options: dict[str, Any]) -> ImportedModel:
    config = options.get("config") or {}
    if not isinstance(config, dict):
        raise NotCallable("its config is not a mapping")
    kind, _, rest = pid.partition(":")
    api_key_env: str | None = None
    if kind == "openai":
        head, _, tail = rest.partition(":")
        api, model = (head, tail) if head in OPENAI_APIS else ("chat", rest)
        if api != "chat":
            raise NotCallable(f"openai:{api} is not a chat API; decoevo calls chat completions")
        if "apiBaseUrl" in config:
            base = _url(config["apiBaseUrl"], "config.apiBaseUrl")
        elif "apiHost" in config:
            base = _url(f"https://{config['apiHost']}/v1", "config.apiHost")
        else:
            base = PROVIDERS["openai"].base_url
        api_key_env = "OPENAI_API_KEY"
    elif kind == "ollama":
        api, _, model = rest.partition(":") if rest.startswith(("chat:", "completion:")) else ("chat", "", rest)
        if api != "chat":
            raise NotCallable(f"ollama:{api} is not a chat API; decoevo calls chat completions")
        base = _url(config["apiBaseUrl"], "config.apiBaseUrl") + "/v1" if "apiBaseUrl" in config else OLLAMA
    elif kind in ("openrouter", "groq", "deepseek"):
        model, base, api_key_env = rest, PROVIDERS[kind].base_url, PROVIDERS[kind].api_key_env
    else:
        raise NotCallable(f"'{kind}' is a provider kind promptfoo runs itself; decoevo calls OpenAI-compatible "
                          "chat servers (openai:chat:MODEL with config.apiBaseUrl)")
    if not model.strip() or any(not c.isprintable() for c in model):
        raise NotCallable("it names no model")
    if "apiKeyEnvar" in config:
        name = config["apiKeyEnvar"]
        if not isinstance(name, str) or not IDENTIFIER.match(name):
            raise NotCallable("config.apiKeyEnvar is not a variable name")
        api_key_env = name
    temperature = _number(config, "temperature")
    max_tokens = _number(config, "max_tokens")
    if max_tokens is not None and (max_tokens != int(max_tokens) or max_tokens < 1):
        raise NotCallable("config.max_tokens is not a positive whole number")
    return ImportedModel(provider=pid, model=model, base_url=base, api_key_env=api_key_env,
                         temperature=temperature, max_tokens=int(max_tokens) if max_tokens is not None else None)


def imported_model(raw: Any) -> tuple[ImportedModel | None, str | None]:
    """The model `providers:` names (the first, when it lists several) and a line about it: why it
    cannot be used, or what else the block held (None: nothing to say)."""
    if raw is None:
        return None, "providers: none in the file; decoevo uses --base-url/--model (or its embedded model)"
    if isinstance(raw, str) and raw.startswith("file://"):
        return None, "providers: a file:// reference decoevo does not read; pass --base-url/--model"
    try:
        entries = _entries(raw)
    except NotCallable as exc:
        return None, f"providers: cannot use the block: {exc}; pass --base-url/--model"
    if not entries:
        return None, "providers: the list is empty; decoevo uses --base-url/--model (or its embedded model)"
    pid = entries[0][0]
    try:
        model = _model(pid, entries[0][1])
    except NotCallable as exc:
        return None, f"providers: cannot use {_short(pid)}: {exc}; pass --base-url/--model"
    note = None
    if len(entries) > 1:
        note = (f"providers: {len(entries)} listed; decoevo runs one model, the first "
                f"({_short(pid)}); the others are kept for the export")
    return model, note


def _short(text: str) -> str:
    one = " ".join(str(text).split())
    return repr(one[:80] + ("..." if len(one) > 80 else ""))
