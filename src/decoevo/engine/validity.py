"""Candidate validity: whether a rewritten skill is a skill at all, before any gate scores it.

A gate compares noisy scores; it cannot tell a strategy document from `{ content: {`. So every
rewritten skill (solver or generator) passes this check first. An invalid candidate is logged, counted
as a stall, never gated and never shipped. The check is a pure function of the texts and the reply's
finish reason, so it is the same on resume and in tests.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

Problem = Literal["empty", "truncated", "fragment", "repetitive", "copy", "collapsed"]

MIN_WORDS = 5  # a rule a model can follow needs at least a short sentence
MIN_LETTER_SHARE = 0.6  # prose is mostly letters and spaces; JSON and code are not
MAX_CODE_SHARE = 0.08  # brackets, semicolons and the like: rare in prose, dense in code
_CODE_CHARS = frozenset("{}[]()<>;=|\\")
MIN_DISTINCT_TRIGRAMS = 0.5  # a small model caught in a loop repeats its sentences; prose rarely does
COLLAPSE_RATIO = 0.3  # a candidate under this share of its parent's length has collapsed...
COLLAPSE_MIN_PARENT = 300  # ...when the parent was long enough for that to mean lost content
# Words by which a rewriter says it removed or merged rules on purpose.
_CUT_REASON = re.compile(r"\b(remov|drop|delet|merg|shorten|condens|consolidat|redundan|trim|simplif|"
                         r"dedup|duplicat|replac|prun|cut)\w*", re.IGNORECASE)
_WORD = re.compile(r"[^\W\d_]{2,}")
_CODE_START = ("{", "[", "```", "<", "(")
_CODE_END = ("{", "[", "(", ",", ":", "=")


@dataclass(frozen=True)
class Validity:
    valid: bool
    problem: Problem | None = None
    reason: str = ""


VALID = Validity(True)


def _normalise(text: str) -> str:
    return " ".join(text.lower().split())


def _shares(text: str) -> tuple[float, float]:
    """The shares of letters and of code punctuation among the visible characters."""
    visible = [c for c in text if not c.isspace()]
    if not visible:
        return 0.0, 0.0
    return sum(c.isalpha() for c in visible) / len(visible), sum(c in _CODE_CHARS for c in visible) / len(visible)


def _distinct_trigrams(words: list[str]) -> float:
    grams = [tuple(words[i:i + 3]) for i in range(len(words) - 2)]
    return len(set(grams)) / len(grams) if grams else 1.0


def _fragment_reason(text: str) -> str | None:
    """Why `text` is not prose, naming the test it failed and its own numbers (None: it reads as prose)."""
    letters, code = _shares(text)
    if letters < MIN_LETTER_SHARE:
        return (f"reads as a JSON or code fragment: {letters:.0%} of its characters are letters "
                f"(prose has at least {MIN_LETTER_SHARE:.0%})")
    if code > MAX_CODE_SHARE:
        return (f"reads as a JSON or code fragment: {code:.0%} of its characters are brackets and the like "
                f"(prose has at most {MAX_CODE_SHARE:.0%})")
    start = next((m for m in _CODE_START if text.startswith(m)), None)
    if start is not None:
        return f"starts with {start!r} as JSON, code or markup do, not a skill written as prose"
    end = next((m for m in _CODE_END if text.endswith(m)), None)
    if end is not None:
        return f"breaks off at a trailing {end!r}: the rest of the text is missing"
    return None


def check_candidate(text: str, parent: str, *, truncated: bool = False, analysis: str = "") -> Validity:
    """Whether `text` may be gated as a rewrite of `parent`. Checks, in order: truncated (the reply hit
    max_tokens), a JSON or code fragment, empty (fewer than MIN_WORDS words), repetitive (a loop: under
    MIN_DISTINCT_TRIGRAMS of its word trigrams distinct), a copy of the parent, or collapsed (under
    COLLAPSE_RATIO of a long parent's length with no stated reason to cut)."""
    stripped = text.strip()
    if truncated:
        return Validity(False, "truncated", "the rewrite hit the token limit, so the skill is cut off")
    fragment = _fragment_reason(stripped) if stripped else None
    if fragment:
        return Validity(False, "fragment", fragment)
    words = [w.lower() for w in _WORD.findall(stripped)]
    if len(words) < MIN_WORDS:
        return Validity(False, "empty", f"{len(words)} word(s); a skill needs at least {MIN_WORDS}")
    distinct = _distinct_trigrams(words)
    if distinct < MIN_DISTINCT_TRIGRAMS:
        return Validity(False, "repetitive", f"only {distinct:.0%} of its word trigrams are distinct: the "
                                             "rewriter looped")
    if _normalise(stripped) == _normalise(parent):
        return Validity(False, "copy", "identical to the current skill")
    parent_len = len(parent.strip())
    if (parent_len >= COLLAPSE_MIN_PARENT and len(stripped) < COLLAPSE_RATIO * parent_len
            and not _CUT_REASON.search(analysis)):
        return Validity(False, "collapsed", f"{len(stripped)} characters against the parent's {parent_len}, "
                                            "and the analysis gives no reason for the cut")
    return VALID
