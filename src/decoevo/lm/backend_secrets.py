"""Keeping secrets out of what a backend returns or raises.

An error raised by a backend travels far: into `events.jsonl`, the CLI's stderr, the ledger and the
HTML report. Some transport errors carry the request's headers in their text (aiohttp's, on the proxied path:
`ClientResponseError` repr does), and a misbehaving server may echo the bearer token in its error body
or in any field of a reply. So every reply body and every message leaving a backend goes through a
`Redactor` first: values of the headers we sent, every secret this process registered (`decoevo.redact`)
and, in messages, bearer tokens and URL credentials are replaced.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields, replace
from typing import Any, TypeVar

from ..redact import MIN_SECRET, SENSITIVE_HEADERS, mask_all, mask_secrets, mask_tree, redact
from .errors import LMError

D = TypeVar("D")
_FIELDS: dict[type, tuple[str, ...]] = {}  # a dataclass's field names, by type


def mask_fields(record: D, extra: Iterable[str] = ()) -> D:
    """A dataclass (a Completion) with the secrets masked in each of its string fields; itself when
    none held one."""
    every = _FIELDS.get(type(record))
    if every is None:  # `fields()` walks the class each time: once a type
        every = _FIELDS[type(record)] = tuple(f.name for f in fields(record))  # type: ignore[arg-type]
    names = [name for name in every if isinstance(getattr(record, name), str)]
    masked = mask_all([getattr(record, name) for name in names], extra)  # one scan of every field
    if masked is None:
        return record
    changes = {name: text for name, text in zip(names, masked, strict=True) if text != getattr(record, name)}
    return replace(record, **changes) if changes else record  # type: ignore[type-var]


@dataclass(frozen=True)
class Redactor:
    """Masks the given secret values (and every registered one) and, in messages, the generic
    credential shapes."""

    secrets: frozenset[str] = frozenset()  # no order: each masking function takes the longest first

    @classmethod
    def for_request(cls, headers: Mapping[str, str], extra: Iterable[str] = ()) -> Redactor:
        values = [v for k, v in headers.items() if k.lower() in SENSITIVE_HEADERS]
        # The bare token too: a server may echo the key without its "Bearer " prefix.
        values += [v.split(None, 1)[1] for v in values if v.lower().startswith("bearer ") and " " in v]
        values += list(extra)
        return cls(frozenset(v for v in values if len(v) >= MIN_SECRET))

    def secret_values(self, text: str) -> str:
        """Only the exact secrets masked: for model output, where the generic shapes (a URL with
        `user@`, the word "bearer") may be legitimate text."""
        return mask_secrets(text, self.secrets)

    def body(self, value: Any) -> Any:
        """A parsed reply body with the secrets masked in every string it holds (every choice, every
        message field, finish_reason, usage, model, ids): nothing a server echoes is read unmasked."""
        return mask_tree(value, self.secrets)

    def completion(self, record: D) -> D:
        return mask_fields(record, self.secrets)

    def text(self, message: str) -> str:
        return redact(message, self.secrets)

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
