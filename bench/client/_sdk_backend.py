"""The openai backend as it was before the aiohttp transport: the official SDK's low-level `post` on
its httpx2 client, one pool per 8 connections. bench/client/lm_overhead.py runs it as the `sdk` variant, the
baseline for the before/after ratio in one run. Needs `openai` (the `bench` extra)."""

from __future__ import annotations

import json
from typing import Any

import openai

from decoevo.lm.config import ModelSpec
from decoevo.lm.errors import InfrastructureError, RefusalError, RetryableError
from decoevo.lm.retry import parse_retry_after
from decoevo.lm.types import BackendRequest, Completion

#: connections per pooled HTTP client; more concurrency gets more clients (see `_http_client`)
POOL_SIZE = 8


def _http_client(spec: ModelSpec, connections: int) -> Any:
    """An HTTP client of the kind the installed SDK is built on (httpx2 for openai>=3, httpx before):
    handing openai>=3 a legacy `httpx` client costs O(connections^2) per request in httpcore's pool
    bookkeeping, which at 64 connections used more CPU than the requests themselves."""
    limits = type(openai.DEFAULT_CONNECTION_LIMITS)(max_connections=connections,
                                                   max_keepalive_connections=connections)
    return openai.DefaultAsyncHttpxClient(limits=limits, timeout=spec.timeout_s or 120.0, follow_redirects=False)


class SDKBackend:
    """One SDK client per `POOL_SIZE` allowed in-flight requests; each request goes to the least
    busy one. A connection pool scans all its connections (probing each idle socket) on every
    request and every response, so one pool of 64 connections spent more CPU on bookkeeping than on
    HTTP; pools of 8 keep that cost flat as `max_concurrency` grows (bench/client/lm_overhead.py)."""

    def __init__(self, spec: ModelSpec) -> None:
        assert spec.base_url is not None  # guaranteed by ModelSpec validation
        self.spec = spec
        self.identity = spec.identity()
        self.max_concurrency = spec.max_concurrency
        api_key = spec.read_api_key()
        sizes = [POOL_SIZE] * (spec.max_concurrency // POOL_SIZE)
        if spec.max_concurrency % POOL_SIZE:
            sizes.append(spec.max_concurrency % POOL_SIZE)
        self._clients = [
            openai.AsyncOpenAI(
                base_url=spec.base_url,
                api_key=api_key,
                max_retries=0,  # our retry loop owns retries, so each one is counted in the ledger
                timeout=spec.timeout_s or 120.0,
                http_client=_http_client(spec, size),
            )
            for size in sizes
        ]
        self._capacity = sizes
        self._busy = [0] * len(sizes)

    def _pick(self) -> int:
        """The client with the most free connections."""
        return max(range(len(self._clients)), key=lambda i: self._capacity[i] - self._busy[i])

    def _response_format(self, schema: dict[str, Any] | None) -> dict[str, Any] | None:
        if schema is None or self.spec.structured_output == "none":
            return None
        if self.spec.structured_output == "json_object":
            # llama.cpp's python server turns a schema given this way into a grammar; others ignore it.
            return {"type": "json_object", "schema": schema}
        return {"type": "json_schema", "json_schema": {"name": "output", "schema": schema, "strict": False}}

    async def complete(self, request: BackendRequest) -> Completion:
        kwargs: dict[str, Any] = {
            "model": self.spec.model,
            "messages": [m.as_dict() for m in request.messages],
            "temperature": request.params.temperature,
            "max_tokens": request.params.max_tokens,
            "seed": request.params.effective_seed(),
        }
        fmt = self._response_format(request.json_schema)
        if fmt is not None:
            kwargs["response_format"] = fmt
        try:
            # The SDK's low-level POST: same URL, headers, auth and error classes as
            # `chat.completions.create`, without its per-call parameter transform and response model
            # construction, which cost more CPU than the HTTP exchange itself (bench/client/lm_overhead.py).
            index = self._pick()
            self._busy[index] += 1
            try:
                raw = await self._clients[index].post("/chat/completions", body=kwargs, cast_to=bytes)
            finally:
                self._busy[index] -= 1
        except openai.RateLimitError as exc:
            raise RetryableError(
                f"rate limited (429) by {self.spec.base_url}",
                retry_after=parse_retry_after(exc.response.headers.get("retry-after")),
            ) from exc
        except openai.APITimeoutError as exc:
            raise RetryableError(f"timed out after {self.spec.timeout_s}s at {self.spec.base_url}") from exc
        except openai.APIConnectionError as exc:
            raise RetryableError(f"cannot connect to {self.spec.base_url}: {exc}") from exc
        except openai.APIStatusError as exc:
            status = exc.status_code
            if status >= 500 or status in (408, 409):
                raise RetryableError(
                    f"server error {status} from {self.spec.base_url}",
                    retry_after=parse_retry_after(exc.response.headers.get("retry-after")),
                ) from exc
            hint = ""
            if status == 404:
                hint = f" Is the model name '{self.spec.model}' served there? Check GET {self.spec.base_url}/models."
            elif status in (401, 403):
                hint = f" Check the API key in ${self.spec.api_key_env} or api_key_file."
            raise InfrastructureError(f"HTTP {status} from {self.spec.base_url}: {exc.message}.{hint}") from exc
        try:
            return self._completion(json.loads(raw))
        except (ValueError, KeyError, TypeError, AttributeError) as exc:  # a body we cannot decode
            raise RetryableError(f"malformed response body from {self.spec.base_url}: {exc!r}") from exc

    def _completion(self, body: dict[str, Any]) -> Completion:
        choices = body.get("choices")
        if not choices:
            raise RetryableError(f"response from {self.spec.base_url} has no choices")
        choice = choices[0]
        message = choice.get("message") or {}
        refusal = message.get("refusal")
        if refusal:
            raise RefusalError(f"model refused: {refusal}")
        content = message.get("content")
        if content is not None and not isinstance(content, str):
            raise TypeError(f"message content is {type(content).__name__}, not a string")
        usage = body.get("usage") or {}
        return Completion(
            text=content or "",
            prompt_tokens=int(usage.get("prompt_tokens") or 0),
            completion_tokens=int(usage.get("completion_tokens") or 0),
            finish_reason=choice.get("finish_reason") or "stop",
        )

    async def aclose(self) -> None:
        for client in self._clients:
            await client.close()
