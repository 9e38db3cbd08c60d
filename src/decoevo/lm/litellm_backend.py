"""Providers without an OpenAI-compatible endpoint (Anthropic, Gemini, Bedrock, Azure deployments,
Ollama's native API, ...) through LiteLLM (`pip install 'decoevo[litellm]'`). Model strings are
LiteLLM's: `anthropic/claude-…`, `gemini/gemini-…`, `bedrock/…`, `azure/DEPLOYMENT`, `ollama/…`.

Only the wire call is LiteLLM's: the request cache, the ledger, retries and backoff, rate limits,
fail-closed parsing and the empty-reply and reasoning rules stay ours (LiteLLM's own retries are off).
LiteLLM's errors carry an HTTP status, which is mapped like the openai backend's; every message leaves
through the same redactor. The openai backend (its own HTTP client, lm/http1.py) stays the fast path for
OpenAI-compatible servers.
"""

from __future__ import annotations

import json
import os
from dataclasses import replace
from typing import Any

from ..redact import redact_url
from .backend_secrets import Redactor
from .bounded_body import MAX_REPLY_BYTES as OPENAI_MAX_REPLY_BYTES
from .config import ModelSpec
from .endpoint import credential_hint, hint_for_status, is_local, schema_instruction, server_schema, with_instruction
from .errors import (
    ConfigError,
    CredentialError,
    InfrastructureError,
    LMError,
    OversizedReply,
    RequestTimeout,
    RetryableError,
)
from .reply import completion_from_message
from .retry import parse_retry_after
from .timeouts import Exchange, LimitReached, Timeouts, progress_of, request_timeouts, within
from .types import BackendRequest, Completion

#: LiteLLM's own timeout: only a backstop behind ours, which does not count a queue at the server
BACKSTOP_TIMEOUT_S = 3600.0
#: The most bytes of one reply accepted, as the openai backend's ceiling (lm/bounded_body.py). That backend
#: stops *reading* there; this one cannot: LiteLLM reads each reply whole through HTTP clients it makes per
#: provider (its aiohttp transport hands the body to httpx, which inflates a compressed body a chunk at a time
#: without a ceiling and keeps all of it), and no public hook reaches that read for every provider. So here a
#: reply past the ceiling is refused once read (OversizedReply, not retried): it never reaches the parser, the
#: request cache, the transcripts or the run directory. Memory while it is read is LiteLLM's; for a server you
#: do not trust, use the openai backend (any OpenAI-compatible server), whose read is bounded.
MAX_REPLY_BYTES = OPENAI_MAX_REPLY_BYTES


def load_litellm() -> Any:
    # LiteLLM fetches catalogs (its cost map, Anthropic's beta headers) from the internet unless told to use
    # the copies it ships; decoevo talks to the configured provider only. Set these to "false" to allow it.
    for name in ("LITELLM_LOCAL_MODEL_COST_MAP", "LITELLM_LOCAL_ANTHROPIC_BETA_HEADERS", "LITELLM_OFFLINE_MODE"):
        os.environ.setdefault(name, "True")
    try:
        import litellm
    except ImportError as exc:
        raise ConfigError("backend 'litellm' needs LiteLLM: pip install 'decoevo[litellm]'") from exc
    litellm.telemetry = False
    litellm.suppress_debug_info = True
    return litellm


def api_key(spec: ModelSpec, provider_has_key: bool = True) -> str | None:
    """The key to pass, or None to let LiteLLM read the provider's own variable (ANTHROPIC_API_KEY, ...):
    the openai default `api_key_env` would hand an OpenAI key to another provider. A server on this
    machine needs none: without any key it gets a placeholder, not LiteLLM's "missing credentials"."""
    if spec.api_key_file or "api_key_env" in spec.model_fields_set:
        key = spec.read_api_key()
        if key != "not-needed":
            return key
    elif provider_has_key:
        return None
    return "not-needed" if is_local(spec.base_url) else None


def provider_variables(litellm: Any, spec: ModelSpec) -> tuple[str, ...]:
    """The variables LiteLLM looks for this model's key in that are unset (empty: none needed, or set)."""
    try:
        found = litellm.validate_environment(spec.model, api_base=spec.base_url)
    except Exception:  # an unknown provider: LiteLLM's own error says more at the first request
        return ()
    return tuple(str(v) for v in found.get("missing_keys") or ())


class LiteLLMBackend:
    def __init__(self, spec: ModelSpec) -> None:
        self.spec = spec
        self.identity = spec.identity()
        self.max_concurrency = spec.max_concurrency or 64  # as the openai backend: what a serving process batches
        self._litellm = load_litellm()
        explicit = bool(spec.api_key_file) or "api_key_env" in spec.model_fields_set
        self._variables = () if explicit else provider_variables(self._litellm, spec)
        self._key = api_key(spec, provider_has_key=not self._variables)
        self._redactor = Redactor(frozenset(k for k in (self._key,) if k and len(k) >= 8))
        self._where = redact_url(spec.base_url) if spec.base_url else spec.model.split("/", 1)[0]
        self._progress = progress_of(f"litellm:{spec.base_url or spec.model.split('/', 1)[0]}")
        # Providers differ in structured output; LiteLLM translates json_schema where it can. A server that
        # refuses it gets the schema in the prompt (validated after decoding), remembered for this process.
        self.structured = spec.structured_output if spec.structured_output != "auto" else "json_schema"

    def _kwargs(self, request: BackendRequest) -> dict[str, Any]:
        messages = list(request.messages)
        schema = server_schema(request.json_schema) if request.json_schema is not None else None
        kwargs: dict[str, Any] = {
            "model": self.spec.model,
            "temperature": request.params.temperature,
            "max_tokens": request.params.max_tokens,
            "seed": request.params.effective_seed(),
            # ours (`_call`) counts from the endpoint's latest answer; LiteLLM's, from sending, is a backstop
            "timeout": BACKSTOP_TIMEOUT_S,
            "num_retries": 0,  # ours retry, with the ledger counting
            "drop_params": True,  # a provider without seed (or temperature) gets the rest
        }
        if schema is not None and self.structured == "none":
            messages = with_instruction(messages, schema_instruction(schema))
        elif schema is not None and self.structured == "json_object":
            kwargs["response_format"] = {"type": "json_object"}
            messages = with_instruction(messages, schema_instruction(schema))
        elif schema is not None:
            kwargs["response_format"] = {"type": "json_schema",
                                         "json_schema": {"name": "output", "schema": schema, "strict": False}}
        kwargs["messages"] = [m.as_dict() for m in messages]
        if self.spec.base_url:
            kwargs["api_base"] = self.spec.base_url
        if self._key:
            kwargs["api_key"] = self._key
        if self.spec.reasoning_effort is not None:
            kwargs["reasoning_effort"] = self.spec.reasoning_effort
        return kwargs

    def _missing_key(self) -> CredentialError | None:
        """A provider on another machine that needs a key and has none: said before any request."""
        if self._key is not None or is_local(self.spec.base_url) or not self._variables:
            return None
        return CredentialError(f"no API key for {self.spec.model}: "
                               f"{credential_hint(self.spec, self._variables)}")

    async def complete(self, request: BackendRequest) -> Completion:
        missing = self._missing_key()
        if missing is not None:
            raise missing
        try:
            return await self._complete(request)
        except LMError as exc:
            error = self._redactor.error(exc)
        except Exception as exc:
            error = self._redactor.error(self._translate(exc))
        raise error from None

    async def _complete(self, request: BackendRequest) -> Completion:
        try:
            response, service_s = await self._call(request)
        except Exception as exc:
            status = getattr(exc, "status_code", None)
            structured_refused = request.json_schema is not None and self.structured != "none" and \
                self.spec.structured_output == "auto" and status in (400, 422, 500) and \
                any(w in str(exc).lower() for w in ("response_format", "schema", "json"))
            if not structured_refused:
                raise
            self.structured = "none"
            response, service_s = await self._call(request)
        raw = response.model_dump() if hasattr(response, "model_dump") else dict(response)
        size = len(json.dumps(raw, ensure_ascii=False, default=str).encode("utf-8", "replace"))
        if size > MAX_REPLY_BYTES:
            raise OversizedReply(f"the reply from {self._where} holds {size:,} bytes, past the {MAX_REPLY_BYTES:,} "
                                 "a reply may have: a broken or misconfigured server; it was not used (the openai "
                                 "backend stops reading a reply at that size; LiteLLM reads it whole)")
        body = self._redactor.body(raw)
        choices = body.get("choices") or []
        if not choices:
            raise RetryableError(f"response from {self._where} has no choices")
        choice = choices[0]
        try:
            completion = completion_from_message(choice.get("message") or {}, body.get("usage") or {},
                                                 choice.get("finish_reason") or "stop", request.params.max_tokens,
                                                 whole_content=request.params.whole_content)
        except (ValueError, TypeError) as exc:
            raise RetryableError(f"malformed response from {self._where}: {exc}", may_be_billed=True) from exc
        # how slow the endpoint is against the default limit for an answer of this length
        self._progress.observe(service_s, request_timeouts(self.spec, completion.completion_tokens).total_s)
        return completion

    async def _call(self, request: BackendRequest) -> tuple[Any, float]:
        """LiteLLM's call within the total limit, counted as the openai backend counts it: from the latest
        answer this endpoint gave to another request (a queue at a server with few slots does not count).
        Returns the response and its service time."""
        max_tokens = request.params.max_tokens
        exchange = Exchange(self._progress)

        def limits() -> Timeouts:
            found = request_timeouts(self.spec, max_tokens, self._progress.stretch())
            return replace(found, first_byte_s=found.total_s)  # the reply is seen only when it is whole

        try:
            response = await within(self._litellm.acompletion(**self._kwargs(request)), limits, exchange)
        except LimitReached as exc:
            self._progress.timed_out(exchange.started)
            raise RequestTimeout(f"{exc.limits.describe('total')} at {self._where} for max_tokens={max_tokens}",
                                 which="total", limit_s=exc.limits.total_s) from None
        self._progress.answered()
        return response, exchange.service_s()

    def _translate(self, exc: Exception) -> LMError:
        """LiteLLM's exception as ours: transient ones retryable, the rest with the fix to make."""
        name, status = type(exc).__name__, getattr(exc, "status_code", None)
        message = str(exc)[:500]
        where = self._where
        if "Timeout" in name:
            return RequestTimeout(f"total timeout at {where}: {message}", which="total",
                                  limit_s=self.spec.timeout_s)
        response = getattr(exc, "response", None)
        headers = getattr(response, "headers", None) or {}
        retry_after = parse_retry_after(headers.get("retry-after")) if hasattr(headers, "get") else None
        if (status == 429 or "RateLimit" in name) and "quota" in message.lower():
            return InfrastructureError(f"HTTP 429 from {where}: {message}. The account's quota or credit is used "
                                       "up: check its plan and billing; retrying will not help.")
        if status == 429 or "RateLimit" in name:
            return RetryableError(f"rate limited (429) by {where}: {message}", retry_after=retry_after,
                                  throttled=True)
        if status in (401, 403) or "Authentication" in name or "PermissionDenied" in name or \
                "missing credentials" in message.lower():
            hint = credential_hint(self.spec, self._variables)
            return CredentialError(f"credentials refused ({name}, HTTP {status}) by {where}: {message}. {hint}")
        if "Connection" in name or status is None or status >= 500 or status in (408, 409):
            return RetryableError(f"{name} from {where}: {message}", retry_after=retry_after)
        hint = hint_for_status(status, message, self.spec, where)
        return InfrastructureError(f"HTTP {status} from {where}: {message}. {hint}".rstrip())

    async def aclose(self) -> None:
        return None
