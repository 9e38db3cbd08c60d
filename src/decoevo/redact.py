"""Keeping secrets out of everything decoevo stores or prints: the one redaction every boundary calls.

Two kinds of secret are masked:
- values this process knows to be secret, registered when it reads them (`register_secret`: the API key
  a model spec reads, the password or token of a `--data` URL or a data mirror). Any text that carries
  one (a model's reply, a server's error body, a message of the standard library that quotes a URL) has
  it replaced, wherever that text goes: the request cache, the run directory, MLflow, the terminal;
- credentials by shape, in messages (never in model output, where such text may be legitimate): the
  `user:password@` of a URL, the values of its query string and fragment, bearer tokens, and the values
  of credential headers quoted in a message.

This module imports nothing of decoevo, so every layer (the run directory's writer included) can use it.
"""

from __future__ import annotations

import os
import re
import threading
import urllib.parse
from collections.abc import Iterable
from typing import Any

from pydantic_core import to_json

MASK = "[redacted]"
# Headers whose values are credentials or account identifiers; never echoed.
SENSITIVE_HEADERS = frozenset(
    {
        "authorization",
        "proxy-authorization",
        "api-key",
        "x-api-key",
        "openai-organization",
        "openai-project",
        "cookie",
        "set-cookie",
    }
)
# Shorter values are not registered: a three-letter "secret" would blank unrelated text everywhere.
MIN_SECRET = 6
# A secret's first PARTIAL characters mark a cut copy of it (a server's error body is quoted up to a length,
# and the key may straddle the cut): from there, as far as the text follows the secret, it is masked. What
# stays visible is at most a well-known prefix ("sk-proj-") and a few characters: nothing usable.
PARTIAL = 12
# Environment variables whose names say they hold a credential: their values are registered by
# `register_environment_secrets` (a provider's key LiteLLM reads itself, a token a library sends).
_CREDENTIAL_NAMES = re.compile(r"API_?KEY|TOKEN|SECRET|PASSWORD|PASSWD|ACCESS_KEY|CREDENTIAL", re.IGNORECASE)
_MIN_ENV_SECRET = 12  # an environment value this long under such a name is no flag or small number
_PATH_NAMES = re.compile(r"(_FILE|_PATH|_DIR|_HOME)$", re.IGNORECASE)

# A URL runs to the next space or quote; punctuation that ends a sentence or a bracket is not part of it.
_URL = re.compile(r"(?P<scheme>[a-zA-Z][a-zA-Z0-9+.-]*://)(?P<rest>[^\s'\"<>`]*[^\s'\"<>`:,.;)])")
_BEARER = re.compile(r"(?i)\bbearer\s+[^\s'\",;]+")
_HEADER_NAMES = "|".join(re.escape(h) for h in sorted(SENSITIVE_HEADERS, key=len, reverse=True))
_HEADER_PAIR = re.compile(rf"(?i)(?P<name>['\"]?(?:{_HEADER_NAMES})['\"]?\s*[:=]\s*)(?P<q>['\"]?)[^'\"\r\n,}}]+")
_QUERY_VALUE = re.compile(r"(?P<name>[^&;=#]*=)[^&;#]*")

_lock = threading.Lock()
_known: tuple[str, ...] = ()  # longest first, so a secret that contains another leaves no partial trace


def register_secret(value: str | None) -> None:
    """Remember `value` as a secret of this process (and its URL-encoded form): from now on every
    redaction masks it. Values shorter than MIN_SECRET characters are ignored."""
    global _known
    if not value:
        return
    forms = {value.strip(), urllib.parse.quote(value.strip(), safe="")}
    new = {f for f in forms if len(f) >= MIN_SECRET} - set(_known)
    if new:
        with _lock:
            _known = tuple(sorted(set(_known) | new, key=len, reverse=True))


def known_secrets() -> tuple[str, ...]:
    return _known


def register_environment_secrets(environ: dict[str, str] | None = None) -> None:
    """Register the values of environment variables named like credentials (`OPENAI_API_KEY`,
    `ANTHROPIC_API_KEY`, `HF_TOKEN`, `AWS_SECRET_ACCESS_KEY`, ...)."""
    for name, value in (os.environ if environ is None else environ).items():
        if _CREDENTIAL_NAMES.search(name) and len(value.strip()) >= _MIN_ENV_SECRET and " " not in value.strip() \
                and not _names_a_path(name, value.strip()):
            register_secret(value)


def _names_a_path(name: str, value: str) -> bool:
    """A variable that holds where a credential is (`GOOGLE_APPLICATION_CREDENTIALS`, `HF_TOKEN_PATH`,
    `*_KEY_FILE`), not the credential: registering it would mask that path, and through the cut-copy rule
    every path sharing its first PARTIAL characters (a checkout, a temp folder) in every message."""
    if _PATH_NAMES.search(name):
        return True
    return value.startswith(("/", "~", "./", "../")) and os.path.exists(os.path.expanduser(value))


def register_url_secrets(url: str) -> None:
    """Register the credentials a URL carries: the password of its `user:password@` (the user name too
    when there is no password: a token is often passed as `https://TOKEN@host`) and its query values."""
    try:
        parts = urllib.parse.urlsplit(url)
        password, username = parts.password, parts.username
    except ValueError:  # a malformed port or netloc: the shape-based masking still covers the userinfo
        return
    register_secret(urllib.parse.unquote(password) if password else None)
    if password is None and username:
        register_secret(urllib.parse.unquote(username))
    for _, value in urllib.parse.parse_qsl(parts.query, keep_blank_values=False):
        register_secret(value)


def _with_extra(extra: Iterable[str]) -> tuple[str, ...]:
    """The registered secrets and `extra`'s (those long enough), longest first."""
    extra = tuple(extra)
    if not extra:
        return _known
    return tuple(sorted({*_known, *(e for e in extra if len(e) >= MIN_SECRET)}, key=len, reverse=True))


def mask_secrets(text: str, extra: Iterable[str] = ()) -> str:
    """`text` with every registered secret (and each of `extra`) replaced: for model output and stored
    text, where only exact secrets are masked."""
    return _masked(text, _with_extra(extra))


def _masked(text: str, secrets: tuple[str, ...]) -> str:
    for secret in secrets:
        if secret in text:
            text = text.replace(secret, MASK)
        if len(secret) > PARTIAL and secret[:PARTIAL] in text:
            text = _mask_cut_copies(text, secret)
    return text


def _holds_any(texts: list[str], secrets: tuple[str, ...]) -> bool:
    """Whether any of `texts` may hold a secret or a cut copy of one (its first PARTIAL characters, which a
    whole copy starts with too): one scan of them joined, not one per text. Each text is a part of the
    joined one, so none is missed; a match across two of them is a false alarm, and then each is masked
    on its own."""
    if not secrets:
        return False
    joined = "\0".join(texts)
    return any(secret[:PARTIAL] in joined for secret in secrets)


def _mask_cut_copies(text: str, secret: str) -> str:
    """Each place where `secret`'s first PARTIAL characters start, masked as far as the text follows it."""
    out, start = [], 0
    while (at := text.find(secret[:PARTIAL], start)) != -1:
        end = at + PARTIAL
        while end < len(text) and end - at < len(secret) and text[end] == secret[end - at]:
            end += 1
        out += [text[start:at], MASK]
        start = end
    return "".join(out) + text[start:]


def _masked_pairs(text: str) -> str:
    return _QUERY_VALUE.sub(lambda m: m["name"] + MASK, text) if "=" in text else MASK


def _clean_url(match: re.Match[str]) -> str:
    rest = match["rest"]
    end = min((i for i in (rest.find(c) for c in "/?#") if i != -1), default=len(rest))
    authority, tail = rest[:end], rest[end:]
    if "@" in authority:
        authority = f"{MASK}@{authority.rsplit('@', 1)[1]}"
    tail, hashmark, fragment = tail.partition("#")
    path, question, query = tail.partition("?")
    if query:
        query = _masked_pairs(query)
    if fragment and "=" in fragment:  # `#access_token=...`; a plain anchor is kept
        fragment = _masked_pairs(fragment)
    return f"{match['scheme']}{authority}{path}{question}{query}{hashmark}{fragment}"


def redact_urls(text: str) -> str:
    """Every URL in `text` with its userinfo masked and the values of its query string (and of a
    `key=value` fragment) masked: a URL is printed to say where, never with what credentials."""
    return _URL.sub(_clean_url, text) if "://" in text else text


def redact(text: str, extra: Iterable[str] = ()) -> str:
    """A message fit to print, log or store: registered and `extra` secrets, credential headers, bearer
    tokens and URL credentials masked."""
    text = mask_secrets(text, extra)
    text = _HEADER_PAIR.sub(lambda m: f"{m['name']}{m['q']}{MASK}", text)
    text = _BEARER.sub(f"Bearer {MASK}", text)
    return redact_urls(text)


def redact_url(url: str) -> str:
    """A URL fit to print (see `redact_urls`)."""
    return redact(url)


def mask_tree(value: Any, extra: Iterable[str] = ()) -> Any:
    """A JSON-like value (a parsed reply body) with the registered and `extra` secrets masked in every
    string it holds, keys included. Returns `value` itself when nothing needed masking (found by one scan
    of all its strings together: a reply body is masked once, not string by string)."""
    secrets = _with_extra(extra)
    if not _tree_holds_any(value, secrets):
        return value
    return _mask_tree(value, secrets)


# A JSON value's strings, keys included, written out by pydantic-core's encoder (~5x the standard library's on a
# reply body): each string appears in the text whole, its characters unchanged except those JSON escapes (`"`,
# `\\`, control characters), as the standard library writes them (tests/test_json_fast_path.py).
_JSON_ESCAPED = re.compile(r'[\x00-\x1f"\\]')


def _tree_holds_any(value: Any, secrets: tuple[str, ...]) -> bool:
    """`_holds_any` of every string in `value`. A reply body is one C-encoded text scanned once, not a
    Python walk of its strings (about 30 a reply): a secret's first PARTIAL characters, when JSON escapes
    none of them, appear in that text wherever a string holds them (a match across two strings is a false
    alarm: then each string is masked on its own). A secret with such a character, or a value that is no
    JSON (an object of another type), takes the walk."""
    if not secrets:
        return False
    if not any(_JSON_ESCAPED.search(secret[:PARTIAL]) for secret in secrets):
        try:
            text: str | None = to_json(value).decode("utf-8")
        except (TypeError, ValueError, RecursionError):  # a lone surrogate, a value of no JSON type: the walk
            text = None
        if text is not None:
            return any(secret[:PARTIAL] in text for secret in secrets)
    texts: list[str] = []
    _strings(value, texts)
    return _holds_any(texts, secrets)


def mask_all(texts: list[str], extra: Iterable[str] = ()) -> list[str] | None:
    """`texts` masked, or None when none held a secret (one scan of them all)."""
    secrets = _with_extra(extra)
    if not _holds_any(texts, secrets):
        return None
    return [_masked(t, secrets) for t in texts]


def _strings(value: Any, out: list[str]) -> None:
    if isinstance(value, str):
        out.append(value)
    elif isinstance(value, list):
        for v in value:
            _strings(v, out)
    elif isinstance(value, dict):
        for k, v in value.items():
            _strings(k, out)
            _strings(v, out)


def _mask_tree(value: Any, secrets: tuple[str, ...]) -> Any:
    if isinstance(value, str):
        return _masked(value, secrets)
    if isinstance(value, list):
        items = [_mask_tree(v, secrets) for v in value]
        return value if all(a is b for a, b in zip(items, value, strict=True)) else items
    if isinstance(value, dict):
        pairs = [(_mask_tree(k, secrets), _mask_tree(v, secrets)) for k, v in value.items()]
        same = all(k is k0 and v is v0 for (k, v), (k0, v0) in zip(pairs, value.items(), strict=True))
        return value if same else dict(pairs)
    return value
