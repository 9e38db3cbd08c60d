"""Any OpenAI-compatible server (vLLM, Ollama, SGLang, llama.cpp server, OpenAI): one POST to
`{base_url}/chat/completions` per request, over an aiohttp connection pool.

Why aiohttp and not the openai SDK: the backend uses one endpoint with our own retry loop, so the
SDK only added per-request cost. Its request layer plus httpx's pure-Python HTTP/1.1 stack used about
2 ms of CPU per call, and at 64 requests in flight on one event loop that CPU time became queueing.
The orchestrator then measured 17 % over the ideal wall time. aiohttp parses HTTP in C and uses about
0.3 ms per call (bench/lm_overhead.py, docs/performance.md).
"""

from __future__ import annotations

import asyncio
import json
import os
import urllib.parse
import urllib.request
from typing import Any

import aiohttp

from .. import __version__
from .config import ModelSpec
from .errors import InfrastructureError, LMError, RefusalError, RetryableError
from .redact import Redactor, redact_url
from .retry import parse_retry_after
from .types import BackendRequest, Completion, usage_count


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


def accepts_min_p(base_url: str | None) -> bool:
    """vLLM, SGLang and llama.cpp servers take `min_p`; OpenAI's own API refuses unknown sampling
    parameters, so it is left out there (the request then samples without it)."""
    return "api.openai.com" not in (base_url or "")


class OpenAIBackend:
    """One aiohttp session per event loop, with a pool of `max_concurrency` keep-alive connections
    (the LM's semaphore admits no more requests than that). Call `aclose` (`LM.aclose`) to release
    the connections; the next request opens a new session."""

    def __init__(self, spec: ModelSpec) -> None:
        assert spec.base_url is not None  # guaranteed by ModelSpec validation
        self.spec = spec
        self.identity = spec.identity()
        self.max_concurrency = spec.max_concurrency
        self._url = spec.base_url.rstrip("/") + "/chat/completions"
        self._headers = request_headers(spec.read_api_key())
        self._proxy = env_proxy(self._url)
        # The one place errors leave this backend: each message is cleaned of the key, the headers'
        # values and URL credentials (including a proxy's) before anything can log it.
        self._redactor = Redactor.for_request(self._headers, [self._proxy or ""])
        self._where = redact_url(spec.base_url)
        self._session: aiohttp.ClientSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def _http(self) -> aiohttp.ClientSession:
        loop = asyncio.get_running_loop()
        if self._session is None or self._session.closed or self._loop is not loop:
            # A session belongs to the loop it was made on; a new loop (another asyncio.run) gets its own.
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=self.max_concurrency),
                headers=self._headers,
                timeout=aiohttp.ClientTimeout(total=self.spec.timeout_s),
            )
            self._loop = loop
        return self._session

    def _response_format(self, schema: dict[str, Any] | None) -> dict[str, Any] | None:
        if schema is None or self.spec.structured_output == "none":
            return None
        if self.spec.structured_output == "json_object":
            # llama.cpp's python server turns a schema given this way into a grammar; others ignore it.
            return {"type": "json_object", "schema": schema}
        return {"type": "json_schema", "json_schema": {"name": "output", "schema": schema, "strict": False}}

    def _body(self, request: BackendRequest) -> bytes:
        body: dict[str, Any] = {
            "model": self.spec.model,
            "messages": [m.as_dict() for m in request.messages],
            "temperature": request.params.temperature,
            "max_tokens": request.params.max_tokens,
            "seed": request.params.effective_seed(),
        }
        if request.params.min_p is not None and accepts_min_p(self.spec.base_url):
            body["min_p"] = request.params.min_p
        fmt = self._response_format(request.json_schema)
        if fmt is not None:
            body["response_format"] = fmt
        # Compact UTF-8, byte for byte what the openai SDK sent (tests/test_faults.py draws faults by body hash).
        return json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode("utf-8")

    async def complete(self, request: BackendRequest) -> Completion:
        try:
            return await self._complete(request)
        except LMError as exc:
            error = self._redactor.error(exc)
        except Exception as exc:  # an unexpected client failure: its text may quote our headers
            error = InfrastructureError(self._redactor.text(f"request to {self._where} failed: "
                                                            f"{type(exc).__name__}: {exc}"))
        raise error from None

    async def _complete(self, request: BackendRequest) -> Completion:
        where = self._where
        try:
            async with self._http().post(self._url, data=self._body(request), proxy=self._proxy,
                                         allow_redirects=False) as response:
                status, raw = response.status, await response.read()
                retry_after = parse_retry_after(response.headers.get("Retry-After"))
        except TimeoutError as exc:  # aiohttp's timeouts subclass it
            raise RetryableError(f"timed out after {self.spec.timeout_s}s at {where}") from exc
        except aiohttp.ClientConnectorError as exc:
            raise RetryableError(f"cannot connect to {where}: {exc}") from exc
        except aiohttp.ClientError as exc:  # dropped connection, truncated transfer, bad framing
            raise RetryableError(f"connection to {where} failed: {exc!r}") from exc
        if not 200 <= status < 300:
            raise self._status_error(status, raw, retry_after)
        try:
            return self._completion(json.loads(raw))
        except (ValueError, KeyError, TypeError, AttributeError) as exc:  # a body we cannot decode
            raise RetryableError(f"malformed response body from {where}: {exc!r}") from exc

    def _status_error(self, status: int, body: bytes, retry_after: float | None) -> InfrastructureError:
        where = self._where
        if status == 429:
            return RetryableError(f"rate limited (429) by {where}", retry_after=retry_after)
        if status >= 500 or status in (408, 409):
            return RetryableError(f"server error {status} from {where}", retry_after=retry_after)
        hint = ""
        if status == 404:
            hint = f" Is the model name '{self.spec.model}' served there? Check GET {where}/models."
        elif status in (401, 403):
            hint = f" Check the API key in ${self.spec.api_key_env} or api_key_file."
        return InfrastructureError(f"HTTP {status} from {where}: {error_message(body)}.{hint}")

    def _completion(self, body: dict[str, Any]) -> Completion:
        choices = body.get("choices")
        if not choices:
            raise RetryableError(f"response from {self._where} has no choices")
        choice = choices[0]
        message = choice.get("message") or {}
        refusal = message.get("refusal")
        if refusal:
            raise RefusalError(f"model refused: {refusal}")
        content = message.get("content")
        if content is not None and not isinstance(content, str):
            raise TypeError(f"message content is {type(content).__name__}, not a string")
        if content and self._redactor.secrets:  # a server that echoes the key must not get it cached
            content = self._redactor.secret_values(content)
        usage = body.get("usage") or {}
        return Completion(
            text=content or "",
            prompt_tokens=usage_count(usage, "prompt_tokens"),  # a ValueError: a malformed body
            completion_tokens=usage_count(usage, "completion_tokens"),
            finish_reason=choice.get("finish_reason") or "stop",
        )

    async def aclose(self) -> None:
        if self._session is not None and self._loop is asyncio.get_running_loop():
            await self._session.close()
        self._session = None
