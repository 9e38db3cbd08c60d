"""Typed failures of a model call. A failure is never turned into a score by anything downstream."""

from __future__ import annotations

from enum import StrEnum

from ..errors import ConfigError

__all__ = ["ConfigError", "FailureCategory", "InfrastructureError", "LMError", "ParseError",
           "RefusalError", "RetryableError"]


class FailureCategory(StrEnum):
    INFRASTRUCTURE = "infrastructure"  # transport, server, timeout, rate limit after retries
    PARSE = "parse"  # output did not validate against the schema after bounded repair
    REFUSAL = "refusal"  # the model declined to answer


class LMError(Exception):
    """Base class; `category` says which ledger column it counts in."""

    category: FailureCategory = FailureCategory.INFRASTRUCTURE

    def __init__(self, message: str, *, role: str = "", model: str = "") -> None:
        super().__init__(message)
        self.role = role
        self.model = model


class InfrastructureError(LMError):
    category = FailureCategory.INFRASTRUCTURE


class ParseError(LMError):
    category = FailureCategory.PARSE

    def __init__(self, message: str, *, raw: str = "", role: str = "", model: str = "") -> None:
        super().__init__(message, role=role, model=model)
        self.raw = raw


class RefusalError(LMError):
    category = FailureCategory.REFUSAL


class RetryableError(InfrastructureError):
    """A transient backend failure (429, 5xx, timeout, connection). `retry_after` is in seconds."""

    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after
