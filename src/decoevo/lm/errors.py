"""Typed failures of a model call. A failure is never turned into a score by anything downstream."""

from __future__ import annotations

from enum import StrEnum

from ..errors import ConfigError

__all__ = ["ConfigError", "ConnectFailed", "CredentialError", "EmptyReplyError", "FailureCategory",
           "InfrastructureError", "LMError", "OversizedReply", "ParseError", "RefusalError", "RequestTimeout",
           "RetryableError"]


class FailureCategory(StrEnum):
    INFRASTRUCTURE = "infrastructure"  # transport, server, timeout, rate limit after retries
    PARSE = "parse"  # output did not validate against the schema after bounded repair
    REFUSAL = "refusal"  # the model declined to answer
    EMPTY = "empty"  # the reply had no answer text (e.g. a reasoning model's thinking used up max_tokens)


class LMError(Exception):
    """Base class; `category` says which ledger column it counts in."""

    category: FailureCategory = FailureCategory.INFRASTRUCTURE

    def __init__(self, message: str, *, role: str = "", model: str = "") -> None:
        super().__init__(message)
        self.role = role
        self.model = model


class InfrastructureError(LMError):
    category = FailureCategory.INFRASTRUCTURE


class CredentialError(InfrastructureError):
    """The server refused the credentials (HTTP 401/403), or none was found for a provider that needs one.
    Never retried: no wait makes a wrong key right. The message names the variable or file to set."""


class ParseError(LMError):
    category = FailureCategory.PARSE

    def __init__(self, message: str, *, raw: str = "", role: str = "", model: str = "") -> None:
        super().__init__(message, role=role, model=model)
        self.raw = raw


class RefusalError(LMError):
    category = FailureCategory.REFUSAL


class EmptyReplyError(ParseError):
    """The server answered, but with no answer text: `content: null`, or nothing before the token limit.
    A ParseError, so a step treats it as an unusable output (never scored as ""), with its own category."""

    category = FailureCategory.EMPTY


class RetryableError(InfrastructureError):
    """A transient backend failure (429, 5xx, timeout, connection). `retry_after` is in seconds;
    `throttled` marks an overloaded server (a 429, or a reply that timed out), which halves the model's
    concurrency; `rate` holds the reply's rate-limit headers (a RateInfo); `may_be_billed` a failure after
    the server may have generated the answer (a connection dropped mid-reply, a success whose body we
    cannot read): the ledger bills it at an estimate (lm/journal.py)."""

    def __init__(self, message: str, *, retry_after: float | None = None, throttled: bool = False,
                 rate: object | None = None, may_be_billed: bool = False) -> None:
        super().__init__(message)
        self.retry_after = retry_after
        self.throttled = throttled
        self.rate = rate
        self.may_be_billed = may_be_billed


class ConnectFailed(RetryableError):
    """No connection could be made (refused, a name that does not resolve, no route). Retried only once
    the model has answered in this process: a server that was never reached is misaddressed or down,
    and backing off for ten seconds before saying so helps no one."""


#: the ModelSpec field that sets each timeout
TIMEOUT_KEYS = {"connect": "connect_timeout_s", "first_byte": "first_byte_timeout_s", "total": "timeout_s"}


class OversizedReply(InfrastructureError):
    """A reply body (decoded) past the backend's ceiling: a broken or hostile server (a gzip bomb). Not
    retried, since the same server answers the same way; billed, since the server did answer."""

    may_be_billed = True


class RequestTimeout(RetryableError):
    """A request timed out; `which` names the limit that fired (connect, first_byte or total) and `limit_s`
    its value. Retried a few times only (`ModelSpec.timeout_retries`): a hung server would otherwise hold a
    call for minutes. A reply that took too long is a sign of overload, as a 429 is (`throttled`)."""

    def __init__(self, message: str, *, which: str, limit_s: float | None = None, quiet: bool = False) -> None:
        super().__init__(message, throttled=which != "connect")
        self.which = which
        self.limit_s = limit_s
        # the endpoint answered no request while this one waited: it was busy (or hung), not answering others
        # while this one alone was stuck
        self.quiet = quiet

    def hint(self, model_name: str) -> str:
        """The setting that lets a slow server take longer, as a flag."""
        value = f"{2 * self.limit_s:g}" if self.limit_s else "SECONDS"
        return f"to wait longer: --set lm.models.{model_name}.{TIMEOUT_KEYS[self.which]}={value}"
