"""A fake provider that enforces a requests-per-minute limit the way hosted APIs do: a bucket holding one
second's worth of requests, refilled continuously; a request that finds it empty gets a 429 with
Retry-After, and every reply carries x-ratelimit-remaining-requests / x-ratelimit-reset-requests."""

from __future__ import annotations

import threading
import time
from typing import Any

from .fake_openai import Reply


class RateLimitedResponder:
    def __init__(self, requests_per_minute: float, *, delay_s: float = 0.0, content: str = "ok") -> None:
        self.rate = requests_per_minute / 60.0
        self.capacity = max(1.0, self.rate)
        self.level = self.capacity
        self.delay_s = delay_s
        self.content = content
        self.served = 0
        self.throttled = 0
        self.first: float | None = None
        self.last: float | None = None
        self._at = time.monotonic()
        self._lock = threading.Lock()

    def __call__(self, body: dict[str, Any], n: int) -> Reply:
        with self._lock:
            now = time.monotonic()
            self.level = min(self.capacity, self.level + (now - self._at) * self.rate)
            self._at = now
            if self.level < 1.0:
                self.throttled += 1
                wait = (1.0 - self.level) / self.rate
                return Reply(status=429, headers={"Retry-After": f"{wait:.3f}", **self._headers(0, wait)})
            self.level -= 1.0
            self.served += 1
            self.first = self.first if self.first is not None else now
            self.last = now
            return Reply(content=self.content, delay_s=self.delay_s,
                         headers=self._headers(int(self.level), (1.0 - self.level % 1.0) / self.rate))

    def _headers(self, remaining: int, reset_s: float) -> dict[str, str]:
        return {"x-ratelimit-limit-requests": str(int(self.rate * 60)),
                "x-ratelimit-remaining-requests": str(remaining), "x-ratelimit-reset-requests": f"{reset_s:.3f}s"}

    def served_per_minute(self) -> float:
        """The rate requests were admitted at, between the first and the last one served."""
        if self.first is None or self.last is None or self.served < 2:
            return 0.0
        return (self.served - 1) / (self.last - self.first) * 60.0
