"""What an OpenAI-compatible endpoint accepts, learned from its answers and remembered.

Servers differ in three ways that matter here: how a JSON schema may be sent (OpenAI and vLLM take
`json_schema`; llama-cpp-python's server answers it with a 500 and wants `json_object` + `schema`; some
accept neither), which name the token limit has (reasoning models want `max_completion_tokens`), and
whether `temperature` is allowed at all (o-series and GPT-5 refuse it). What a user set in ModelSpec wins;
what is left on "auto" is learned from the first refusal and kept per endpoint, in this process and in
`endpoints.json` next to the request cache, so a second process does not pay for the probe again.
"""

from __future__ import annotations

import json
import os
import re
import threading
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from .config import ModelSpec
from .memory import read_entries, write_entries
from .structured import without_length_caps
from .types import Message

StructuredMode = Literal["json_schema", "json_object", "none"]
#: the order a structured call tries; each later mode asks less of the server
STRUCTURED_LADDER: tuple[StructuredMode, ...] = ("json_schema", "json_object", "none")

_REASONING_MODEL = re.compile(r"^(o\d|gpt-5)", re.IGNORECASE)


def is_reasoning_model(model: str) -> bool:
    """OpenAI's reasoning models by name (o1, o3-mini, o4-mini, gpt-5, gpt-5-mini, ...)."""
    return bool(_REASONING_MODEL.match(model.rsplit("/", 1)[-1]))


@dataclass(frozen=True)
class EndpointProfile:
    """How requests to one endpoint are written. `structured` None: not yet negotiated."""

    structured: StructuredMode | None = None
    token_param: Literal["max_tokens", "max_completion_tokens"] = "max_tokens"
    temperature: bool = True

    @classmethod
    def initial(cls, spec: ModelSpec, learned: dict[str, Any] | None = None) -> EndpointProfile:
        learned = learned or {}
        reasoning = is_reasoning_model(spec.model)
        structured = spec.structured_output if spec.structured_output != "auto" else learned.get("structured")
        if spec.token_limit_param != "auto":
            token_param = spec.token_limit_param
        else:
            token_param = learned.get("token_param") or ("max_completion_tokens" if reasoning else "max_tokens")
        temperature = spec.send_temperature if spec.send_temperature is not None else \
            learned.get("temperature", not reasoning)
        return cls(structured if structured in STRUCTURED_LADDER else None, token_param, bool(temperature))


@dataclass(frozen=True)
class Fix:
    """A change to the profile that a 4xx asked for, and what to tell the user."""

    profile: EndpointProfile
    note: str


def fix_for_rejection(profile: EndpointProfile, spec: ModelSpec, message: str) -> Fix | None:
    """The profile change that a 400's message asks for, when it is one we can make and the user left
    that setting on auto; None otherwise."""
    text = message.lower()
    refused = any(w in text for w in ("not supported", "unsupported", "does not support", "not allowed",
                                      "unrecognized", "unknown", "invalid", "only the default", "instead"))
    if not refused:
        return None
    if ("max_tokens" in text and profile.token_param == "max_tokens" and spec.token_limit_param == "auto"
            and "max_completion_tokens" in text):
        return Fix(replace(profile, token_param="max_completion_tokens"), "sent max_completion_tokens")
    if "temperature" in text and profile.temperature and spec.send_temperature is None:
        return Fix(replace(profile, temperature=False), "left temperature out")
    return None


def rejected_structured(status: int, message: str) -> bool:
    """Whether a failed structured request may have failed *because* of its response_format: a 400 that
    names it or the schema, or a 500 (llama-cpp-python's server raises on `json_schema`)."""
    if status >= 500:
        return True
    text = message.lower()
    return status in (400, 422) and any(w in text for w in ("response_format", "json_schema", "schema",
                                                             "json_object", "structured"))


LOCAL_HOSTS = frozenset({"localhost", "127.0.0.1", "::1", "0.0.0.0"})


def is_local(url: str | None) -> bool:
    """Whether `url` is a server on this machine (which needs no API key)."""
    host = urlsplit(url or "").hostname or ""
    return host in LOCAL_HOSTS or host.startswith("127.")


def has_key(spec: ModelSpec) -> bool:
    """Whether the spec's key is there: its api_key_file, or a non-empty $api_key_env."""
    return bool(spec.api_key_file) or bool(os.environ.get(spec.api_key_env))


def credential_hint(spec: ModelSpec, variables: tuple[str, ...] = ()) -> str:
    """What to set after a 401/403 or a missing key. `variables`: the provider's own variables, when the
    key is left to LiteLLM to find."""
    if spec.api_key_file:
        return f"Check the API key in api_key_file {spec.api_key_file}, and that it may use '{spec.model}'."
    names = variables or (spec.api_key_env,)
    if not any(os.environ.get(name) for name in names):
        either = " or ".join(f"${name}" for name in names)
        return (f"No API key was found: set {either} (or point lm.models.NAME.api_key_env at the variable "
                "that holds it, or set api_key_file).")
    return f"Check the API key in ${names[0]} (or api_key_file), and that it may use '{spec.model}'."


def hint_for_status(status: int, message: str, spec: ModelSpec, where: str) -> str:
    """The fix to suggest for a 4xx that cannot be fixed automatically."""
    text = message.lower()
    if status in (401, 403):
        return credential_hint(spec)
    if status == 404:
        return f"Is the model name '{spec.model}' served there? Check GET {where}/models (base_url ends in /v1)."
    if status == 413 or any(w in text for w in ("context length", "context_length", "too long", "maximum context")):
        return "The prompt plus max_tokens exceed what the model takes: lower max_tokens or use a model with " \
               "a longer context."
    if "reasoning_effort" in text or "reasoning effort" in text:
        return "This model takes no reasoning_effort (or not that value): remove or change reasoning_effort."
    if "max_tokens" in text or "max_completion_tokens" in text:
        return "Set token_limit_param (max_tokens or max_completion_tokens) for this model, or lower max_tokens."
    if "temperature" in text:
        return "Set send_temperature: false for this model."
    if "response_format" in text or "schema" in text:
        return "Set structured_output to json_object or none for this model."
    if status in (400, 422):
        return "The server refused a parameter decoevo sends (model, messages, temperature, max_tokens, seed, " \
               "response_format); its message above names it."
    return ""


class EndpointMemory:
    """Learned profiles by endpoint, in `path` (JSON) when given. Writes replace the file atomically; two
    processes that learn at once both write a valid file, and either answer is right."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._data: dict[str, dict[str, Any]] = self._read()

    def _read(self) -> dict[str, dict[str, Any]]:
        return read_entries(self.path)

    def get(self, endpoint: str) -> dict[str, Any]:
        return dict(self._data.get(endpoint, {}))

    def remember(self, endpoint: str, profile: EndpointProfile) -> None:
        with self._lock:
            self._data = {**self._read(), endpoint: asdict(profile)}
            if self.path is not None:
                write_entries(self.path, self._data)


def endpoints_path(cache_path: Path) -> Path:
    return cache_path.with_name("endpoints.json")


def schema_instruction(schema: dict[str, Any]) -> str:
    """What a server that takes no schema is told instead (the answer is validated after decoding)."""
    return ("Reply with one JSON object only, no prose and no code fence, that follows this JSON schema:\n"
            + json.dumps(schema, ensure_ascii=False))


def with_instruction(messages: list[Message], instruction: str) -> list[Message]:
    """`messages` with `instruction` added to the system message (or as one, first)."""
    if messages and messages[0].role == "system":
        return [Message("system", f"{messages[0].content}\n\n{instruction}"), *messages[1:]]
    return [Message("system", instruction), *messages]


_SERVER_SCHEMAS: dict[int, tuple[dict[str, Any], Any]] = {}


def server_schema(schema: dict[str, Any]) -> Any:
    """`structured.without_length_caps(schema)`, built once per schema object: role schemas are shared, read-only
    objects (`structured.schema_for`), so the id is stable; the entry keeps the object alive to keep it so."""
    found = _SERVER_SCHEMAS.get(id(schema))
    if found is None or found[0] is not schema:
        if len(_SERVER_SCHEMAS) > 1024:
            _SERVER_SCHEMAS.clear()
        found = _SERVER_SCHEMAS[id(schema)] = (schema, without_length_caps(schema))
    return found[1]
