"""The write-ahead record of paid requests: what makes the ledger an upper bound of a provider's bill.

A provider bills a request it received, whether or not the answer ever reaches us: a process killed
with requests in flight has paid for them. So `LM` records each paid request with its `RequestJournal`
before sending it, and completes the record when it ends:
- answered: the call's `CallRecord` carries the record's id (the run's call log then completes it);
- ended without a bill (the server answered with an error status, or the connection was never made):
  `settled(id)`;
- ended in a way a provider may have billed (a timeout after the request reached the server, an empty
  reply or a refusal, a cancelled call): counted as a paid call with estimated tokens, its `CallRecord`
  marked `estimated`.
A record that was never completed (the process died) is counted the same way when the run resumes.

An estimate is an upper bound: the prompt's UTF-8 bytes plus a few tokens of chat template per message
(a token is at least one byte) and the request's whole `max_tokens` allowance.
"""

from __future__ import annotations

from typing import Protocol

from .errors import EmptyReplyError, InfrastructureError, RefusalError, RequestTimeout
from .types import BackendRequest

TEMPLATE_TOKENS_PER_MESSAGE = 8  # role markers and separators a chat template adds around each message


class RequestJournal(Protocol):
    def sent(self, key: str, role: str, model: str, prompt_tokens: int, max_tokens: int) -> str:
        """Record a request about to be sent (on disk before this returns); returns the record's id."""
        ...

    def settled(self, request_id: str) -> None:
        """The request ended without anything a provider bills."""
        ...


def prompt_token_bound(request: BackendRequest) -> int:
    """At least the prompt tokens a provider can bill for `request` (see the module's note)."""
    return sum(len(m.content.encode("utf-8", "surrogatepass")) + TEMPLATE_TOKENS_PER_MESSAGE for m in request.messages)


def may_be_billed(exc: BaseException, answered: bool) -> bool:
    """Whether a provider may have charged for a request that ended in `exc`: an answer we cannot use
    (empty, refused, unreadable, unusable counts), a connection dropped mid-reply, a timeout after the
    connection was made, a cancelled call (a Ctrl-C, a stopped step). An error status, or no connection
    at all, bills nothing."""
    return (answered or isinstance(exc, EmptyReplyError | RefusalError)
            or (isinstance(exc, RequestTimeout) and exc.which != "connect")
            or getattr(exc, "may_be_billed", False) or not isinstance(exc, InfrastructureError))
