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
from dataclasses import replace
from typing import TypeVar, cast, overload

from pydantic import BaseModel

from ..redact import register_environment_secrets
from .backend import Backend
from .budget import Budget, BudgetExceeded, CostHold, InFlight, expected_tokens, in_flight
from .cache import RequestCache, default_cache_path, request_key
from .config import LMConfig, ModelSpec
from .endpoint import EndpointMemory, endpoints_path
from .errors import (
    ConfigError,
    ConnectFailed,
    FailureCategory,
    InfrastructureError,
    LMError,
    RequestTimeout,
    RetryableError,
)
from .journal import RequestJournal, may_be_billed, prompt_token_bound
from .ledger import UsageLedger
from .pricing import Price, price_for
from .ratelimit import AdaptiveLimiter, RateInfo, estimate_tokens
from .retry import RetryPolicy
from .shared_slots import FileSlots, SharedSlots
from .spend import SharedSpend, request_bound
from .structured import parse_structured, repair_messages, schema_for, unusable_reply
from .types import BackendRequest, CallRecord, CallResult, Completion, GenParams, Message, checked_completion

__all__ = ["LM", "Budget", "BudgetExceeded", "CallRecord", "make_backend", "repair_params"]

T = TypeVar("T", bound=BaseModel)


# A first-byte timeout at a busy server (one that answered nothing while the request waited, with other
# requests in flight or another such timeout within BUSY_WINDOW limits) lowers the concurrency and is sent
# again without counting against timeout_retries, up to MAX_BUSY_TIMEOUTS times per request. A one-slot server
# sent 64 requests spent every queued one's limits and kept generating the abandoned ones, and the run failed;
# a hung server is still left after a bounded wait.
MAX_BUSY_TIMEOUTS = 6
BUSY_WINDOW = 2.0

# A lease on a request (another process pays, this one waits) outlives any single request with its
# retries; a holder that dies on this host is noticed at once, one on another host when its lease expires.
LEASE_S = 900.0
LEASE_POLL_S = 0.05


def repair_params(params: GenParams, repair: int) -> GenParams:
    """Parameters for repair number `repair` (1-based). A deterministic model asked the same thing
    twice answers the same way, so later repairs sample a little and use a distinct sample index."""
    return replace(
        params,
        temperature=params.temperature if repair == 1 else max(params.temperature, 0.3),
        sample_index=params.sample_index + 1000 * repair,
    )


def make_backend(spec: ModelSpec, memory: EndpointMemory | None = None) -> Backend:
    if spec.backend == "local":
        from .local import LocalBackend

        return LocalBackend(spec)
    if spec.backend == "litellm":
        from .litellm_backend import LiteLLMBackend

        return LiteLLMBackend(spec)
    from .openai_backend import OpenAIBackend

    return OpenAIBackend(spec, memory)


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
        register_environment_secrets()  # a provider key a library reads itself is masked like ours
        self._backends: dict[str, Backend] = dict(backends or {})
        self._limiters: dict[str, AdaptiveLimiter] = {}
        # A sweep's cells share each server's concurrency (DECOEVO_SHARED_SLOTS); None outside a sweep.
        self._shared = SharedSlots.from_env()
        self._slot_pools: dict[str, FileSlots | None] = {}
        # An experiment's dollars across its processes, and its cap (DECOEVO_SPEND_FILE); None outside one.
        self._spend = SharedSpend.from_env()
        if cache is None and self.config.use_cache:
            cache = RequestCache(self.config.cache_path or default_cache_path())
        self.cache = cache if self.config.use_cache else None
        self.ledger = ledger or UsageLedger()
        self._sleep = sleep
        self.on_call = on_call
        # What the run should tell its user as it happens (a lowered concurrency); kept in `notices` too.
        self.on_notice: Callable[[str], None] | None = None
        self.notices: list[str] = []
        # Where each paid request is recorded before it is sent (the run directory's request log); None:
        # not recorded, as for an evaluation or a notebook's own LM.
        self.journal: RequestJournal | None = None
        self._inflight: dict[str, asyncio.Future[Completion]] = {}
        self._endpoints: EndpointMemory | None = None
        self._prices: dict[str, Price | None] = {}
        self._paying = 0  # paid calls admitted by the budget and not finished
        self._cost_hold = CostHold()  # budget.max_cost as a hard cap: worst cases of the requests in flight
        self._reached: set[str] = set()  # models that have answered: only their connect failures are retried
        self.budget = budget or Budget()
        # Request keys this run has obtained (paid, or inherited once); restored on resume.
        self.own_keys: set[str] = set()

    @property
    def budget(self) -> Budget:
        return self._budget

    @budget.setter
    def budget(self, budget: Budget) -> None:
        """A cost budget is refused up front when a model has no price: its spend could not be counted."""
        if budget.max_cost is not None:
            unpriced = [name for name in self.config.models if self.price(name) is None]
            if unpriced:
                raise ConfigError(
                    f"a cost budget needs a price for every model; {', '.join(unpriced)} has none: set "
                    "input_price_per_mtok and output_price_per_mtok (USD per 1M tokens), or install "
                    "decoevo[litellm] for LiteLLM's prices of known models")
        self._budget = budget

    def cost_of(self, model_name: str, prompt_tokens: int, completion_tokens: int) -> float | None:
        """What a call of these sizes costs on `model_name` (None: the model has no price)."""
        price = self.price(model_name)
        return price.cost(prompt_tokens, completion_tokens) if price is not None else None

    # ---- routing -------------------------------------------------------------------------------
    def backend(self, model_name: str) -> Backend:
        if model_name not in self._backends:
            if self._endpoints is None:  # what endpoints accept is kept next to the cache, or in memory
                self._endpoints = EndpointMemory(endpoints_path(self.cache.path) if self.cache is not None else None)
            self._backends[model_name] = make_backend(self.config.models[model_name], self._endpoints)
        return self._backends[model_name]

    def model_for(self, role: str) -> str:
        return self.config.model_for(role)

    def _retry_policy(self, model_name: str) -> RetryPolicy:
        spec = self.config.models.get(model_name)
        if spec is None:
            return RetryPolicy()
        return RetryPolicy(spec.max_retries, spec.backoff_base_s, spec.backoff_cap_s)

    def _timeout_retries(self, model_name: str) -> int:
        spec = self.config.models.get(model_name)
        return spec.timeout_retries if spec is not None else 2

    def _limiter(self, model_name: str, backend: Backend) -> AdaptiveLimiter:
        limiter = self._limiters.get(model_name)
        if limiter is None:
            spec = self.config.models.get(model_name)
            rpm, tpm = (spec.requests_per_minute, spec.tokens_per_minute) if spec is not None else (None, None)
            limiter = self._limiters[model_name] = AdaptiveLimiter(backend.max_concurrency, rpm, tpm)
        return limiter

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
        prompt_tokens = completion_tokens = reasoning_tokens = 0
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
                reasoning_tokens += completion.reasoning_tokens
            result = CallResult(
                text=completion.text,
                cached=all_cached,
                prompt_tokens=prompt_tokens,
                completion_tokens=completion_tokens,
                latency_s=time.monotonic() - started,
                attempts=attempt + 1,
                finish_reason=completion.finish_reason,
                truncated=completion.truncated,
                reasoning_tokens=reasoning_tokens,
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
        error = unusable_reply(role, model_name, last_text,
                               f"{role}: output still invalid after {self.config.max_repairs} repair(s): {problem}")
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
                if key not in self.own_keys and self.budget.limited:  # inherited: a cached rerun stops at it
                    self.budget.check(self.ledger, self._in_flight(), hit.prompt_tokens + hit.completion_tokens)
                self._record_hit(role, model_name, key, hit, request, hit.text)
                return hit, True
        pending = self._inflight.get(key)
        if pending is not None:  # the same request is already being paid for: share its answer
            completion = await asyncio.shield(pending)
            self._record_hit(role, model_name, key, None, request, completion.text, truncated=completion.truncated)
            return completion, True
        future: asyncio.Future[Completion] = asyncio.get_running_loop().create_future()
        self._inflight[key] = future
        try:
            completion, elsewhere = await self._pay_once(backend, model_name, role, request, key)
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # mark retrieved: nobody else may be waiting
            raise
        finally:
            self._inflight.pop(key, None)
        future.set_result(completion)
        if elsewhere:  # another process paid for it while this one waited: an inherited answer
            self._record_hit(role, model_name, key, completion, request, completion.text,
                             truncated=completion.truncated)
            return completion, True
        self.own_keys.add(key)
        if self.on_call is not None:
            self.on_call(CallRecord(role, model_name, key, False, completion.prompt_tokens,
                                    completion.completion_tokens, request, completion.text,
                                    truncated=completion.truncated, reasoning_tokens=completion.reasoning_tokens,
                                    cost_usd=self._cost(model_name, completion), request_id=completion.request_id))
        return completion, False

    def _record_hit(self, role: str, model_name: str, key: str, hit: Completion | None,
                    request: BackendRequest, text: str, *, truncated: bool = False) -> None:
        inherited = None
        cost = None
        if hit is not None and key not in self.own_keys:
            inherited = hit.prompt_tokens + hit.completion_tokens
            cost = self._cost(model_name, hit)
            self.own_keys.add(key)
        self.ledger.record_hit(role, model_name, inherited, cost)
        if self.on_call is not None:
            cut = truncated or (hit is not None and hit.truncated)
            self.on_call(CallRecord(role, model_name, key, True, 0, 0, request, text, truncated=cut))

    async def _pay_once(self, backend: Backend, model_name: str, role: str, request: BackendRequest,
                        key: str) -> tuple[Completion, bool]:
        """Pay for `request` and cache the answer, unless another process sharing the cache is already
        paying for the same request: then wait for its answer (True: it came from elsewhere). A lease on
        the key (`RequestCache.claim`) says who pays; it ends with its holder (released, dead or expired)."""
        cache = self.cache
        if cache is None:
            return await self._call_with_retries(backend, model_name, role, request, key), False
        while not cache.claim(key, LEASE_S):
            while cache.held_elsewhere(key):
                await asyncio.sleep(LEASE_POLL_S)
            answer = cache.get(key)
            if answer is not None:
                return answer, True
            # the holder failed or died without an answer: claim it for this process
        stored = False
        try:
            answer = cache.get(key)  # another process may have paid and released since this one looked
            if answer is not None:
                return answer, True
            completion = await self._call_with_retries(backend, model_name, role, request, key)
            # The answer lands as the lease ends, in one transaction: a waiter never finds neither.
            cache.put(key, backend.identity, completion, release=True)
            stored = True
            return completion, False
        finally:
            if not stored:
                cache.release(key)

    async def _call_with_retries(
        self, backend: Backend, model_name: str, role: str, request: BackendRequest, key: str = ""
    ) -> Completion:
        policy = self._retry_policy(model_name)
        limiter = self._limiter(model_name, backend)
        tokens = estimate_tokens(sum(len(m.content) for m in request.messages), request.params.max_tokens)
        attempt = timeouts = busy_timeouts = 0
        reserved = False
        held = 0.0  # this attempt's worst case under budget.max_cost
        try:
            while True:
                self._cost_hold.release(held)  # the last attempt ended: its bill, if any, is in the ledger
                held = 0.0
                admitted_at = await limiter.acquire(tokens)
                if not reserved:
                    try:  # before paying, counting the calls already paying; cache hits are never refused
                        if self.budget.limited:
                            landing = self.budget.land_on_tokens  # the estimate is read only there
                            self.budget.check(self.ledger, self._in_flight(),
                                              expected_tokens(self.ledger, role, model_name, request) if landing
                                              else 0.0)
                    except BudgetExceeded:
                        limiter.release(tokens_reserved=tokens, tokens_used=0)
                        raise
                    self._paying += 1  # no await since the check: no other call passes it meanwhile
                    reserved = True
                try:  # every attempt reserves its worst case under the run's and the experiment's caps
                    # the bound (every message's UTF-8 bytes, the schema's JSON) only where a cap reads it
                    capped = self.budget.max_cost is not None or self._spend is not None
                    worst = self.cost_of(model_name, *request_bound(request)) if capped else None
                    if self.budget.max_cost is not None and worst:
                        held = await self._cost_hold.reserve(self.ledger, self.budget.max_cost, worst)
                    hold = await self._spend.reserve(worst) if self._spend is not None else None
                except BaseException:  # refused at the cap, or cancelled while waiting for room
                    limiter.release(tokens_reserved=tokens, tokens_used=0)
                    raise
                started = time.monotonic()
                sent: str | None = None
                try:
                    answered = False
                    try:
                        if self.journal is not None:  # on disk before the request leaves: a kill now is billed
                            sent = self.journal.sent(key, role, model_name, prompt_token_bound(request),
                                                     request.params.max_tokens)
                        completion = await self._send(backend, model_name, request)
                        answered = True
                        try:
                            completion = checked_completion(completion)
                        except ValueError as exc:  # spend we cannot count must not pass the budget
                            raise InfrastructureError(f"{role}: the server reported unusable usage: {exc}") from None
                    except BaseException as exc:
                        self._unanswered(sent, hold, exc, answered, role, model_name, key, request)
                        raise
                except RetryableError as exc:
                    busy = (isinstance(exc, RequestTimeout) and exc.which == "first_byte" and exc.quiet
                            and busy_timeouts < MAX_BUSY_TIMEOUTS
                            and limiter.busy(BUSY_WINDOW * (exc.limit_s or 0.0)))
                    before = limiter.concurrency
                    limiter.release(tokens_reserved=tokens, tokens_used=None, throttled=exc.throttled,
                                    retry_after=exc.retry_after, rate=cast(RateInfo | None, exc.rate),
                                    admitted_at=admitted_at, busy=busy)
                    if busy:  # the server was busy, not broken: fewer requests at once, and this one again
                        busy_timeouts += 1
                        self.ledger.record_retry(role, model_name)
                        if limiter.concurrency < before:
                            self._notice(f"{model_name}: requests waited past their first-byte limit while the "
                                         f"server was busy; now at most {limiter.concurrency} at a time (the "
                                         "timed-out ones are sent again)")
                        await self._sleep(policy.delay(1))
                        continue
                    attempt += 1
                    timeouts += isinstance(exc, RequestTimeout)
                    if isinstance(exc, ConnectFailed) and model_name not in self._reached:
                        self.ledger.record_failure(role, model_name, FailureCategory.INFRASTRUCTURE)
                        raise InfrastructureError(f"{role}: {exc}", role=role, model=model_name) from exc
                    if isinstance(exc, RequestTimeout) and timeouts > self._timeout_retries(model_name):
                        # A server that keeps timing out is hung or overloaded: waiting out every retry
                        # of max_retries held one call for many minutes.
                        self.ledger.record_failure(role, model_name, FailureCategory.INFRASTRUCTURE)
                        raise InfrastructureError(
                            f"{role}: timed out {timeouts} time(s): {exc} ({exc.hint(model_name)})", role=role,
                            model=model_name) from exc
                    if not policy.should_retry(attempt):
                        self.ledger.record_failure(role, model_name, FailureCategory.INFRASTRUCTURE)
                        raise InfrastructureError(
                            f"{role}: gave up after {attempt - 1} retries: {exc}", role=role, model=model_name
                        ) from exc
                    self.ledger.record_retry(role, model_name)
                    await self._sleep(policy.delay(attempt, exc.retry_after))
                    continue
                except LMError as exc:
                    limiter.release(tokens_reserved=tokens, tokens_used=None)
                    exc.role, exc.model = exc.role or role, exc.model or model_name
                    self.ledger.record_failure(role, model_name, exc.category)
                    raise
                except BaseException:  # cancelled: the slot is free again
                    limiter.release(tokens_reserved=tokens, tokens_used=None)
                    raise
                self._reached.add(model_name)
                used = completion.prompt_tokens + completion.completion_tokens
                limiter.release(tokens_reserved=tokens, tokens_used=used, rate=completion.rate)
                cost = self._cost(model_name, completion)
                self.ledger.record_call(
                    role, model_name, completion.prompt_tokens, completion.completion_tokens,
                    time.monotonic() - started, truncated=completion.truncated,
                    reasoning_tokens=completion.reasoning_tokens, reasoning_chars=completion.reasoning_chars,
                    cost_usd=cost,
                )
                if self._spend is not None:
                    self._spend.settle(hold, cost)
                return completion if sent is None else replace(completion, request_id=sent)
        finally:
            self._cost_hold.release(held)
            if reserved:
                self._paying -= 1

    def _unanswered(self, sent: str | None, hold: str | None, exc: BaseException, answered: bool, role: str,
                    model_name: str, key: str, request: BackendRequest) -> None:
        """Settle a request that brought no usable answer, at the upper bound of its tokens when a provider
        may have charged for it (`journal.may_be_billed`), else at nothing: its write-ahead record, and
        its reservation under the experiment's cap."""
        billed = may_be_billed(exc, answered)
        prompt, out = prompt_token_bound(request), request.params.max_tokens
        cost = self.cost_of(model_name, prompt, out) if billed else 0.0
        if self._spend is not None:
            self._spend.settle(hold, cost)
        if sent is None or self.journal is None:
            return
        if not billed:
            self.journal.settled(sent)
            return
        self.ledger.record_call(role, model_name, prompt, out, 0.0, cost_usd=cost, estimated=True)
        if self.on_call is not None:  # the call log completes the record
            self.on_call(CallRecord(role, model_name, key, False, prompt, out, request, None, cost_usd=cost,
                                    request_id=sent, estimated=True))

    async def _send(self, backend: Backend, model_name: str, request: BackendRequest) -> Completion:
        """The request itself, holding one of its endpoint's shared slots when processes share them."""
        if self._shared is None:
            return await backend.complete(request)
        if model_name not in self._slot_pools:
            self._slot_pools[model_name] = self._slot_pool(self._shared, model_name, backend)
        pool = self._slot_pools[model_name]
        if pool is None:
            return await backend.complete(request)
        slot = await pool.acquire()
        try:
            return await backend.complete(request)
        finally:
            pool.release(slot)

    def _slot_pool(self, shared: SharedSlots, model_name: str, backend: Backend) -> FileSlots | None:
        """A server's pool, keyed by its URL; an embedded model is this process's own and shares nothing."""
        spec = self.config.models.get(model_name)
        if spec is None or spec.backend == "local":
            return None
        endpoint = (spec.base_url or f"{spec.backend}:{spec.model}").rstrip("/")
        return shared.pool(endpoint, backend.max_concurrency)

    def _notice(self, text: str) -> None:
        self.notices.append(text)
        if self.on_notice is not None:
            self.on_notice(text)

    def _in_flight(self) -> InFlight:
        return in_flight(self._paying, self.ledger)

    def price(self, model_name: str) -> Price | None:
        if model_name not in self._prices:
            spec = self.config.models.get(model_name)
            self._prices[model_name] = price_for(spec) if spec is not None else None
        return self._prices[model_name]

    def _cost(self, model_name: str, completion: Completion) -> float | None:
        price = self.price(model_name)
        return price.cost(completion.prompt_tokens, completion.completion_tokens) if price is not None else None

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
        for shared in (self._shared, self._spend):  # their lock files
            if shared is not None:
                shared.close()

