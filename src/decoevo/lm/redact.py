"""Keeping secrets out of error messages.

An error raised by a backend travels far: into `events.jsonl`, the CLI's stderr, the ledger and the
HTML report. Some transport errors carry the request's headers in their text (aiohttp's
`ClientResponseError` repr does), and a misbehaving server may echo the bearer token in its error body.
So every message leaving a backend goes through a `Redactor` first: values of the headers we sent,
anything equal to a configured secret, bearer tokens, and `user:password@` in URLs are replaced.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from .errors import LMError

MASK = "[redacted]"
# Headers whose values are credentials or account identifiers; never echoed.
SENSITIVE_HEADERS = frozenset({"authorization", "proxy-authorization", "api-key", "x-api-key",
                               "openai-organization", "openai-project", "cookie"})
# Shorter values are not masked: a one-letter "secret" would blank every message.
_MIN_SECRET = 6
_URL_USERINFO = re.compile(r"(?P<scheme>[a-zA-Z][a-zA-Z0-9+.-]*://)[^/\s@'\"<>]+@")
_BEARER = re.compile(r"(?i)\bbearer\s+[^\s'\",;]+")
_HEADER_NAMES = "|".join(re.escape(h) for h in sorted(SENSITIVE_HEADERS))
_HEADER_PAIR = re.compile(rf"(?i)(?P<name>['\"]?(?:{_HEADER_NAMES})['\"]?\s*[:=]\s*)(?P<q>['\"]?)[^'\"\r\n,}}]+")


@dataclass(frozen=True)
class Redactor:
    """Masks the given secret values and the generic credential shapes in a text."""

    secrets: tuple[str, ...] = ()

    @classmethod
    def for_request(cls, headers: Mapping[str, str], extra: Iterable[str] = ()) -> Redactor:
        values = [v for k, v in headers.items() if k.lower() in SENSITIVE_HEADERS]
        # The bare token too: a server may echo the key without its "Bearer " prefix.
        values += [v.split(None, 1)[1] for v in values if v.lower().startswith("bearer ") and " " in v]
        values += list(extra)
        unique = {v for v in values if len(v) >= _MIN_SECRET}
        return cls(tuple(sorted(unique, key=len, reverse=True)))  # longest first: no partial leftovers

    def secret_values(self, text: str) -> str:
        """Only the exact secrets masked: for model output, where the generic shapes (a URL with
        `user@`, the word "bearer") may be legitimate text."""
        for secret in self.secrets:
            if secret in text:
                text = text.replace(secret, MASK)
        return text

    def text(self, message: str) -> str:
        message = self.secret_values(message)
        message = _HEADER_PAIR.sub(lambda m: f"{m['name']}{m['q']}{MASK}", message)
        message = _BEARER.sub(f"Bearer {MASK}", message)
        return _URL_USERINFO.sub(lambda m: f"{m['scheme']}{MASK}@", message)

    def error(self, exc: LMError) -> LMError:
        """The same error with a redacted message, detached from its cause (whose text may hold the
        secret): the caller raises it `from None`."""
        exc.args = tuple(self.text(a) if isinstance(a, str) else a for a in exc.args)
        raw = getattr(exc, "raw", None)
        if isinstance(raw, str):
            exc.raw = self.text(raw)  # type: ignore[attr-defined]
        exc.__cause__ = None
        exc.__context__ = None
        return exc


def redact_url(url: str) -> str:
    """A URL fit to print: any `user:password@` is masked."""
    return Redactor().text(url)
