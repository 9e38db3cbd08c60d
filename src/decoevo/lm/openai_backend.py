"""Any OpenAI-compatible server (vLLM, Ollama, SGLang, llama.cpp server, OpenAI): one POST to
`{base_url}/chat/completions` per request, over a pool of keep-alive connections.

Why not the openai SDK: the backend uses one endpoint with our own retry loop, so the SDK only added
per-request cost. Its request layer plus httpx's pure-Python HTTP/1.1 stack used about 2 ms of CPU per
call, and at 64 requests in flight on one event loop that CPU time became queueing. aiohttp came next
(~0.3 ms a call); the direct path is now our own `http1` client (less again, and no aiohttp import before
a run's first call: docs/performance.md, round nine). A request through a proxy goes over aiohttp
(`proxied.py`), imported only then.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import urllib.parse
import urllib.request
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import pydantic_core

from .. import __version__
from ..redact import redact_url
from .backend_secrets import Redactor
from .bounded_body import ACCEPT_ENCODING, MAX_REPLY_BYTES
from .config import ModelSpec
from .endpoint import (
    STRUCTURED_LADDER,
    EndpointMemory,
    EndpointProfile,
    fix_for_rejection,
    hint_for_status,
    rejected_structured,
    schema_instruction,
    server_schema,
    with_instruction,
)
from .errors import (
    ConnectFailed,
    CredentialError,
    InfrastructureError,
    LMError,
    RefusalError,
    RequestTimeout,
    RetryableError,
)
from .http1 import Client, ConnectError, ConnectTimeout, TransportError
from .ratelimit import RateInfo
from .reply import completion_from_message
from .retry import parse_retry_after
from .timeouts import Exchange, LimitReached, default_first_byte_s, progress_of, request_timeouts, within
from .types import BackendRequest, Completion, GenParams

if TYPE_CHECKING:
    from .proxied import ProxiedClient

TIMEOUT_FIX = {
    "connect": "is the server up and reachable? (connect_timeout_s)",
    "first_byte": "the server answered no request in that time; if it is just slow, raise first_byte_timeout_s "
                  "or lower min_tokens_per_s",
    "total": "the reply did not finish in time; raise timeout_s if the server is slow",
}


def env_proxy(url: str) -> str | None:
    """The proxy that HTTP(S)_PROXY / NO_PROXY give for `url`, or None. It is looked up once per
    backend: aiohttp's `trust_env` looks it up again on every request, which costs more CPU than
    the request itself."""
    host = urllib.parse.urlsplit(url).hostname
    if host and urllib.request.proxy_bypass(host):
        return None
    return urllib.request.getproxies().get(urllib.parse.urlsplit(url).scheme)


def request_headers(api_key: str) -> dict[str, str]:
    headers = {
        "Authorization": f"Bearer {api_key}",
        "Content-Type": "application/json",
        "Accept": "application/json",
        "User-Agent": f"decoevo/{__version__}",
    }
    # The same optional OpenAI account headers the official client sends when these are set.
    for env, header in (("OPENAI_ORG_ID", "OpenAI-Organization"), ("OPENAI_PROJECT_ID", "OpenAI-Project")):
        if os.environ.get(env):
            headers[header] = os.environ[env]
    return headers


def error_message(body: bytes) -> str:
    """The server's own explanation from an error body: OpenAI's `{"error": {"message": ...}}`, a
    plain `{"detail"|"message": ...}`, or the start of the raw text."""
    try:
        data = json.loads(body)
    except ValueError:
        return body[:300].decode("utf-8", "replace").strip()
    if isinstance(data, dict):
        err = data.get("error")
        for value in (err.get("message") if isinstance(err, dict) else err, data.get("detail"), data.get("message")):
            if isinstance(value, str) and value:
                return value[:300]
    return json.dumps(data)[:300]


# Compact UTF-8, made once (json.dumps with options makes a new encoder on every call).
_BODY_TEXT = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def body_bytes(body: dict[str, Any]) -> bytes:
    """A request body as compact UTF-8 JSON: the standard library's text for the same value (a float may be
    spelt otherwise: 1e-05 as 0.00001), by pydantic-core's encoder, ~5x faster on a long prompt. As before, a
    non-finite number (only the sampling parameters at the top are floats) is refused, and a lone surrogate
    is an encoding error."""
    for value in body.values():
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"out of range float values are not JSON compliant: {value!r}")
    try:
        return pydantic_core.to_json(body)
    except pydantic_core.PydanticSerializationError:  # a lone surrogate: the standard library's own error
        return _BODY_TEXT.encode(body).encode("utf-8")


def parse_json(raw: bytes) -> Any:
    """`json.loads` of a reply body, by pydantic-core's parser (~3x faster) where it reads it; what it refuses
    (a byte-order mark, UTF-16, an escaped lone surrogate, malformed text) goes to `json.loads`, which reads it
    or raises its own error."""
    try:
        return pydantic_core.from_json(raw)
    except ValueError:
        return json.loads(raw)

#: requests in flight when the spec leaves `max_concurrency` unset: what one serving process takes in a batch
SERVER_CONCURRENCY = 64


def accepts_min_p(base_url: str | None) -> bool:
    """vLLM, SGLang and llama.cpp servers take `min_p`; OpenAI's own API refuses unknown sampling
    parameters, so it is left out there (the request then samples without it)."""
    return "api.openai.com" not in (base_url or "")


@dataclass(frozen=True)
class Reply:
    """One HTTP answer, as far as this backend reads it."""

    status: int
    body: bytes
    retry_after: float | None
    rate: RateInfo | None
    service_s: float = 0.0  # from the request's anchor (`timeouts.Exchange`) to the reply's start


class OpenAIBackend:
    """One client (`http1.Client`, or `proxied.ProxiedClient` through a proxy) per event loop, keeping at most
    `max_concurrency` idle keep-alive connections (the LM's semaphore admits no more requests than that).
    Call `aclose` (`LM.aclose`) to release the connections; the next request on another loop opens a new
    client."""

    def __init__(self, spec: ModelSpec, memory: EndpointMemory | None = None) -> None:
        assert spec.base_url is not None  # guaranteed by ModelSpec validation
        self.spec = spec
        self.identity = spec.identity()
        self.max_concurrency = spec.max_concurrency or SERVER_CONCURRENCY
        self._url = spec.base_url.rstrip("/") + "/chat/completions"
        self._headers = request_headers(spec.read_api_key())
        self._proxy = env_proxy(self._url)
        # The one place errors leave this backend: each message is cleaned of the key, the headers'
        # values and URL credentials (including a proxy's) before anything can log it.
        self._redactor = Redactor.for_request(self._headers, [self._proxy or ""])
        self._where = redact_url(spec.base_url)
        self._session: Client | ProxiedClient | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closed_on: asyncio.AbstractEventLoop | None = None  # the loop `aclose` ran on
        self._memory = memory or EndpointMemory(None)
        self.profile = EndpointProfile.initial(spec, self._memory.get(self.identity))
        self._negotiation: tuple[asyncio.AbstractEventLoop, asyncio.Lock] | None = None
        parts = urllib.parse.urlsplit(self._url)
        self._target = parts.path + (f"?{parts.query}" if parts.query else "")
        # the client bounds only connecting; the first-byte and total limits are `timeouts.within`'s, which
        # does not count waiting behind this endpoint's other requests
        self._progress = progress_of(self._url)

    def _http(self) -> Client | ProxiedClient:
        loop = asyncio.get_running_loop()
        if self._closed_on is loop:  # a request a Ctrl-C left starting after the close: never sent, and no
            raise asyncio.CancelledError("the backend was closed")  # new client left unclosed
        if self._session is None or self._loop is not loop:
            # A client's connections belong to the loop they were made on; a new loop (another asyncio.run)
            # gets its own.
            headers = {"Accept-Encoding": ACCEPT_ENCODING, **self._headers}
            timeout = self.spec.connect_timeout_s
            if self._proxy:
                from .proxied import ProxiedClient  # aiohttp: only a run through a proxy imports it

                self._session = ProxiedClient(self._url, self._proxy, headers, connect_timeout_s=timeout,
                                              max_idle=self.max_concurrency, limit=MAX_REPLY_BYTES, where=self._where)
            else:
                self._session = Client(self._url, headers, connect_timeout_s=timeout, max_idle=self.max_concurrency,
                                       limit=MAX_REPLY_BYTES, where=self._where)
            self._loop = loop
        return self._session

    def _body(self, request: BackendRequest, profile: EndpointProfile | None = None) -> bytes:
        profile = profile or self.profile  # the endpoint's current profile unless negotiation tries another
        messages = list(request.messages)
        mode = profile.structured or STRUCTURED_LADDER[0]
        schema = server_schema(request.json_schema) if request.json_schema is not None else None
        if schema is not None and mode == "none":  # no response_format: the schema goes in the prompt
            messages = with_instruction(messages, schema_instruction(schema))
        body: dict[str, Any] = {"model": self.spec.model, "messages": [m.as_dict() for m in messages]}
        if profile.temperature:
            body["temperature"] = request.params.temperature
        body[profile.token_param] = request.params.max_tokens
        body["seed"] = request.params.effective_seed()
        if request.params.min_p is not None and accepts_min_p(self.spec.base_url):
            body["min_p"] = request.params.min_p
        if self.spec.reasoning_effort is not None:
            body["reasoning_effort"] = self.spec.reasoning_effort
        if schema is not None and mode == "json_object":
            # llama.cpp's python server turns a schema given this way into a grammar; others ignore it.
            body["response_format"] = {"type": "json_object", "schema": schema}
        elif schema is not None and mode == "json_schema":
            body["response_format"] = {"type": "json_schema",
                                       "json_schema": {"name": "output", "schema": schema, "strict": False}}
        # Compact UTF-8, what the openai SDK sent (tests/test_faults.py draws faults by body hash).
        return body_bytes(body)

    async def complete(self, request: BackendRequest) -> Completion:
        try:
            if request.json_schema is not None and self.profile.structured is None:
                async with self._negotiation_lock():  # one probe at a time; the others then use its answer
                    if self.profile.structured is None:  # still unknown: this request is the probe
                        return await self._complete(request)
                # Learned while this one waited: send it at once. Sending it under the lock made every
                # structured request queued behind the first probe go one at a time (a run's first wave).
            return await self._complete(request)
        except LMError as exc:
            error = self._redactor.error(exc)
        except Exception as exc:  # an unexpected client failure: its text may quote our headers
            error = InfrastructureError(self._redactor.text(f"request to {self._where} failed: "
                                                            f"{type(exc).__name__}: {exc}"))
        raise error from None

    def _negotiation_lock(self) -> asyncio.Lock:
        loop = asyncio.get_running_loop()
        if self._negotiation is None or self._negotiation[0] is not loop:
            self._negotiation = (loop, asyncio.Lock())
        return self._negotiation[1]

    async def _complete(self, request: BackendRequest) -> Completion:
        """Send the request as the endpoint's profile says; a refusal that names a setting we may change
        (the token limit's name, temperature, the structured-output form) is fixed and sent again at
        once, and what worked is remembered for the endpoint."""
        profile = self.profile
        negotiating = request.json_schema is not None and profile.structured is None
        if negotiating:
            profile = replace(profile, structured=STRUCTURED_LADDER[0])
        # A 5xx may be a passing fault: json_schema is given up only after two in a row (a false downgrade
        # there would cost every later call its schema); the lower forms after one.
        server_errors = 0
        for _ in range(8):  # bounded: each pass changes the profile, and there are few changes to make
            reply = await self._post(request, profile)
            status, raw = reply.status, reply.body
            if 200 <= status < 300:
                completion = self._decoded(raw, request)
                self._progress.observe(reply.service_s, default_first_byte_s(self.spec, completion.completion_tokens))
                if reply.rate is not None:
                    completion = replace(completion, rate=reply.rate)
                if profile != self.profile:
                    self._learn(profile)
                return completion
            message = error_message(raw)
            fix = fix_for_rejection(profile, self.spec, message) if status in (400, 422) else None
            if fix is not None:
                profile = fix.profile
                continue
            if negotiating and rejected_structured(status, message):
                rung = STRUCTURED_LADDER.index(profile.structured or STRUCTURED_LADDER[0])
                server_errors = server_errors + 1 if status >= 500 else 2
                if server_errors < (2 if rung == 0 else 1):
                    continue
                if rung + 1 < len(STRUCTURED_LADDER):
                    profile, server_errors = replace(profile, structured=STRUCTURED_LADDER[rung + 1]), 0
                    continue
            raise self._status_error(reply, negotiated=negotiating)
        raise InfrastructureError(f"{self._where} kept refusing the request after every change decoevo can make: "
                                  f"{error_message(raw)}")

    def _learn(self, profile: EndpointProfile) -> None:
        self.profile = profile
        self._memory.remember(self.identity, profile)

    async def _post(self, request: BackendRequest, profile: EndpointProfile) -> Reply:
        where, max_tokens = self._where, request.params.max_tokens
        exchange = Exchange(self._progress)
        try:
            reply = await within(self._exchange(request, profile, exchange),
                                 lambda: request_timeouts(self.spec, max_tokens, self._progress.stretch()), exchange)
        except LimitReached as exc:
            self._progress.timed_out(exchange.started)
            limits = exc.limits
            raise RequestTimeout(f"{limits.describe(exc.which)} at {where} for max_tokens={max_tokens}; "
                                 f"{TIMEOUT_FIX[exc.which]}", which=exc.which,
                                 limit_s=limits.total_s if exc.which == "total" else limits.first_byte_s,
                                 quiet=self._progress.last <= exchange.anchor()) from None
        except ConnectTimeout as exc:
            raise RequestTimeout(f"connect timeout ({self.spec.connect_timeout_s:.1f}s) at {where}; "
                                 f"{TIMEOUT_FIX['connect']}", which="connect",
                                 limit_s=self.spec.connect_timeout_s) from exc
        except ConnectError as exc:
            raise ConnectFailed(f"cannot connect to {where}: {exc}") from exc
        except TransportError as exc:  # dropped connection, truncated transfer, bad framing
            raise RetryableError(f"connection to {where} failed: {exc}", may_be_billed=True) from exc
        self._progress.answered()
        return reply

    async def _exchange(self, request: BackendRequest, profile: EndpointProfile, exchange: Exchange) -> Reply:
        response = await self._http().request("POST", self._target, self._body(request, profile), exchange.heard)
        headers = response.headers
        return Reply(response.status, response.body, parse_retry_after(headers.get("Retry-After")),
                     RateInfo.from_headers(headers), exchange.service_s())

    def _decoded(self, raw: bytes, request: BackendRequest) -> Completion:
        try:
            # Every string of the body masked before any field is read: a server may echo the key anywhere.
            return self._completion(self._redactor.body(parse_json(raw)), request.params)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:  # a body we cannot decode
            raise RetryableError(f"malformed response body from {self._where}: {exc!r}", may_be_billed=True) from exc

    def _status_error(self, reply: Reply, *, negotiated: bool = False) -> InfrastructureError:
        status, retry_after, where, message = reply.status, reply.retry_after, self._where, error_message(reply.body)
        tried = f" (after trying structured output as {', '.join(STRUCTURED_LADDER)})" if negotiated else ""
        if status == 429 and ("quota" in message.lower() or "billing" in message.lower()):
            # OpenAI's insufficient_quota: no wait makes it pass, so it is not retried.
            return InfrastructureError(f"HTTP 429 from {where}: {message}. The account's quota or credit is used "
                                       "up: check its plan and billing; retrying will not help.")
        if status == 429:
            return RetryableError(f"rate limited (429) by {where}", retry_after=retry_after, throttled=True,
                                  rate=reply.rate)
        if status >= 500 or status in (408, 409):
            return RetryableError(f"server error {status} from {where}: {message}{tried}", retry_after=retry_after,
                                  rate=reply.rate)
        hint = hint_for_status(status, message, self.spec, where)
        if status in (401, 403):
            return CredentialError(f"credentials refused (HTTP {status}) by {where}: {message.rstrip('.')}. {hint}")
        return InfrastructureError(f"HTTP {status} from {where}: {message}{tried}. {hint}".rstrip())

    def _completion(self, body: dict[str, Any], params: GenParams) -> Completion:
        choices = body.get("choices")
        if not choices:
            raise RetryableError(f"response from {self._where} has no choices", may_be_billed=True)
        choice = choices[0]
        message = choice.get("message") or {}
        refusal = message.get("refusal")
        if refusal:
            raise RefusalError(f"model refused: {refusal}")
        usage = body.get("usage") or {}
        return completion_from_message(message, usage, choice.get("finish_reason") or "stop", params.max_tokens,
                                       whole_content=params.whole_content)

    async def aclose(self) -> None:
        self._closed_on = asyncio.get_running_loop()  # another loop (a later asyncio.run) may use it again
        if self._session is not None and self._loop is self._closed_on:
            await self._session.aclose()
        self._session = None
