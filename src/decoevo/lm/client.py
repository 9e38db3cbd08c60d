"""The one async model interface every role uses.

`LM.complete` routes a role to its model, answers from the content-addressed cache when it can,
bounds in-flight requests per backend, retries transient faults with backoff, validates structured
output with bounded repair, and records everything in the usage ledger. It returns a value or raises
a typed `LMError`; it never invents one.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, replace
from typing import TypeVar, overload

from pydantic import BaseModel

from .backend import Backend
from .cache import RequestCache, default_cache_path, request_key
from .config import LMConfig, ModelSpec
from .errors import FailureCategory, InfrastructureError, LMError, ParseError, RefusalError, RetryableError
from .ledger import UsageLedger
from .retry import RetryPolicy
from .structured import looks_like_refusal, parse_structured, repair_messages, schema_for
from .types import BackendRequest, CallResult, Completion, GenParams, Message, checked_completion

T = TypeVar("T", bound=BaseModel)


@dataclass(frozen=True)
class CallRecord:
    """One answered request, as seen by `on_call` observers (the run directory's call log)."""

    role: str
    model: str
    key: str
    cached: bool
    prompt_tokens: int
    completion_tokens: int


class BudgetExceeded(Exception):
    """Raised before a paid call that would exceed the run's budget; runs stop cleanly on it."""


@dataclass(frozen=True)
class Budget:
    max_calls: int | None = None
    max_tokens: int | None = None

    def check(self, ledger: UsageLedger) -> None:
        if self.max_calls is None and self.max_tokens is None:
            return  # no limit: skip summing the ledger before every paid call
        # Answers inherited from other runs' caches count: the budget is what this run would cost alone.
        total = ledger.total()
        if self.max_calls is not None and total.effective_calls >= self.max_calls:
            raise BudgetExceeded(f"call budget reached: {total.effective_calls} of {self.max_calls} calls used")
        if self.max_tokens is not None and total.effective_tokens >= self.max_tokens:
            raise BudgetExceeded(f"token budget reached: {total.effective_tokens} of {self.max_tokens} tokens used")


def repair_params(params: GenParams, repair: int) -> GenParams:
    """Parameters for repair number `repair` (1-based). A deterministic model asked the same thing
    twice answers the same way, so later repairs sample a little and use a distinct sample index."""
    return replace(
        params,
        temperature=params.temperature if repair == 1 else max(params.temperature, 0.3),
        sample_index=params.sample_index + 1000 * repair,
    )


def make_backend(spec: ModelSpec) -> Backend:
    if spec.backend == "local":
        from .local import LocalBackend

        return LocalBackend(spec)
    from .openai_backend import OpenAIBackend

    return OpenAIBackend(spec)


class LM:
    def __init__(
        self,
        config: LMConfig | None = None,
        *,
        backends: dict[str, Backend] | None = None,
        cache: RequestCache | None = None,
        ledger: UsageLedger | None = None,
        budget: Budget | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        on_call: Callable[[CallRecord], None] | None = None,
    ) -> None:
        self.config = config or LMConfig()
        self._backends: dict[str, Backend] = dict(backends or {})
        self._semaphores: dict[str, asyncio.Semaphore] = {}
        if cache is None and self.config.use_cache:
            cache = RequestCache(self.config.cache_path or default_cache_path())
        self.cache = cache if self.config.use_cache else None
        self.ledger = ledger or UsageLedger()
        self.budget = budget or Budget()
        self._sleep = sleep
        self.on_call = on_call
        self._inflight: dict[str, asyncio.Future[Completion]] = {}
        # Request keys this run has obtained (paid, or inherited once); restored on resume.
        self.own_keys: set[str] = set()

    # ---- routing -------------------------------------------------------------------------------
    def backend(self, model_name: str) -> Backend:
        if model_name not in self._backends:
            self._backends[model_name] = make_backend(self.config.models[model_name])
        return self._backends[model_name]

    def model_for(self, role: str) -> str:
        return self.config.model_for(role)

    def _retry_policy(self, model_name: str) -> RetryPolicy:
        spec = self.config.models.get(model_name)
        if spec is None:
            return RetryPolicy()
        return RetryPolicy(spec.max_retries, spec.backoff_base_s, spec.backoff_cap_s)

    def _semaphore(self, model_name: str, backend: Backend) -> asyncio.Semaphore:
        if model_name not in self._semaphores:
            self._semaphores[model_name] = asyncio.Semaphore(max(1, backend.max_concurrency))
        return self._semaphores[model_name]

    # ---- the interface ---------------------------------------------------------------------------
    @overload
    async def complete(
        self, messages: Iterable[Message], *, role: str, schema: type[T], params: GenParams | None = None
    ) -> CallResult: ...
    @overload
    async def complete(
        self, messages: Iterable[Message], *, role: str, schema: None = None, params: GenParams | None = None
    ) -> CallResult: ...

    async def complete(
        self,
        messages: Iterable[Message],
        *,
        role: str,
        schema: type[BaseModel] | None = None,
        params: GenParams | None = None,
    ) -> CallResult:
        params = params or GenParams()
        original = tuple(messages)
        model_name = self.model_for(role)
        backend = self.backend(model_name)
        json_schema = schema_for(schema) if schema is not None else None
        msgs, call_params = original, params
        prompt_tokens = completion_tokens = 0
        all_cached = True
        started = time.monotonic()
        last_text, problem = "", ""
        keys: list[str] = []
        for attempt in range(self.config.max_repairs + 1):
            request = BackendRequest(model=model_name, messages=msgs, params=call_params, json_schema=json_schema)
            keys.append(request_key(backend.identity, request))
            completion, cached = await self._fetch(backend, model_name, role, request, keys[-1])
            all_cached &= cached
            if not cached:
                prompt_tokens += completion.prompt_tokens
                completion_tokens += completion.completion_tokens
            result = CallResult(
                text=completion.text,
                cached=all_cached,
                prompt_tokens=prompt_tokens,
                completion_tokens=completion_tokens,
                latency_s=time.monotonic() - started,
                attempts=attempt + 1,
            )
            if schema is None:
                return result
            try:
                value = parse_structured(completion.text, schema)
            except ValueError as exc:
                last_text, problem = completion.text, str(exc)
                if completion.finish_reason == "length":
                    problem += " (the reply was cut off at the token limit; keep every field short)"
                if attempt < self.config.max_repairs:
                    if not cached:  # a replayed repair was counted when it was paid for
                        self.ledger.record_repair(role, model_name)
                    msgs = repair_messages(original, completion.text, problem, json_schema or {})
                    call_params = repair_params(params, attempt + 1)
                continue
            return replace(result, value=value)
        error: LMError
        if looks_like_refusal(last_text):
            error = RefusalError(f"{role}: the model declined: {last_text[:200]!r}", role=role, model=model_name)
        else:
            error = ParseError(
                f"{role}: output still invalid after {self.config.max_repairs} repair(s): {problem}",
                raw=last_text,
                role=role,
                model=model_name,
            )
        self.ledger.record_failure(role, model_name, error.category)
        # Forget the unusable answers: replaying them would fail this call again in every later run and
        # after resume, though the cause (a garbled transfer, a sampling accident) may have passed.
        if self.cache is not None:
            self.cache.delete(keys)
        raise error

    async def structured(
        self, messages: Iterable[Message], schema: type[T], *, role: str, params: GenParams | None = None
    ) -> T:
        result = await self.complete(messages, role=role, schema=schema, params=params)
        value: T = result.value
        return value

    # ---- cache, coalescing, concurrency, retries ----------------------------------------------
    async def _fetch(
        self, backend: Backend, model_name: str, role: str, request: BackendRequest, key: str
    ) -> tuple[Completion, bool]:
        if self.cache is not None:
            hit = self.cache.get(key)
            if hit is not None:
                self._record_hit(role, model_name, key, hit)
                return hit, True
        pending = self._inflight.get(key)
        if pending is not None:  # the same request is already being paid for: share its answer
            completion = await asyncio.shield(pending)
            self._record_hit(role, model_name, key, None)
            return completion, True
        future: asyncio.Future[Completion] = asyncio.get_running_loop().create_future()
        self._inflight[key] = future
        try:
            completion = await self._call_with_retries(backend, model_name, role, request)
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # mark retrieved: nobody else may be waiting
            raise
        finally:
            self._inflight.pop(key, None)
        future.set_result(completion)
        self.own_keys.add(key)
        if self.cache is not None:
            self.cache.put(key, backend.identity, completion)
        if self.on_call is not None:
            self.on_call(CallRecord(role, model_name, key, False, completion.prompt_tokens,
                                    completion.completion_tokens))
        return completion, False

    def _record_hit(self, role: str, model_name: str, key: str, hit: Completion | None) -> None:
        inherited = None
        if hit is not None and key not in self.own_keys:
            inherited = hit.prompt_tokens + hit.completion_tokens
            self.own_keys.add(key)
        self.ledger.record_hit(role, model_name, inherited)
        if self.on_call is not None:
            self.on_call(CallRecord(role, model_name, key, True, 0, 0))

    async def _call_with_retries(
        self, backend: Backend, model_name: str, role: str, request: BackendRequest
    ) -> Completion:
        policy = self._retry_policy(model_name)
        async with self._semaphore(model_name, backend):
            self.budget.check(self.ledger)  # before paying; cache hits above are never refused
            attempt = 0
            while True:
                started = time.monotonic()
                try:
                    completion = await backend.complete(request)
                    try:
                        completion = checked_completion(completion)
                    except ValueError as exc:  # spend we cannot count must not pass the budget
                        raise InfrastructureError(f"{role}: the server reported unusable usage: {exc}") from None
                except RetryableError as exc:
                    attempt += 1
                    if not policy.should_retry(attempt):
                        self.ledger.record_failure(role, model_name, FailureCategory.INFRASTRUCTURE)
                        raise InfrastructureError(
                            f"{role}: gave up after {attempt - 1} retries: {exc}", role=role, model=model_name
                        ) from exc
                    self.ledger.record_retry(role, model_name)
                    await self._sleep(policy.delay(attempt, exc.retry_after))
                    continue
                except LMError as exc:
                    exc.role, exc.model = exc.role or role, exc.model or model_name
                    self.ledger.record_failure(role, model_name, exc.category)
                    raise
                self.ledger.record_call(
                    role, model_name, completion.prompt_tokens, completion.completion_tokens,
                    time.monotonic() - started,
                )
                return completion

    async def __aenter__(self) -> LM:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Release the backends' connections and workers and the cache handle. Whoever creates an
        LM closes it (`async with LM(...) as lm:`); an HTTP backend left open warns when collected."""
        for backend in self._backends.values():
            await backend.aclose()
        if self.cache is not None:
            self.cache.close()

