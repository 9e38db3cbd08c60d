"""Candidate validity: whether a rewritten skill is a skill at all, before any gate scores it.

A gate compares noisy scores; it cannot tell a strategy document from `{ content: {`, nor from an answer
to one training question or an echo of the rewriter's own instructions (a small model does all three). So
every rewritten skill (solver or generator) passes this check first. An invalid candidate is logged,
counted as a stall, never gated and never shipped. The check is a pure function of the texts (the
candidate, its parent, and what the rewriter was shown) and the reply's finish reason, so it is the same on
resume and in tests.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

Problem = Literal["empty", "truncated", "fragment", "repetitive", "copy", "collapsed", "instructions",
                  "question", "answer", "not_instructions"]

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
# Copying what the rewriter was shown: word n-grams shared with it (and not already in the parent).
ECHO_NGRAM = 6  # six words in a row shared with the rewriter's instructions are no coincidence
ECHO_MIN_WORDS = 15  # an echo of this many words of the instructions...
ECHO_MIN_SHARE = 0.3  # ...or of this share of the candidate (at least QUESTION_MIN_WORDS words) is invalid
QUESTION_NGRAM = 5
QUESTION_MIN_WORDS = 8  # a shown question or answer this long or longer can be copied...
QUESTION_MAX_SHARE = 0.5  # ...and is, when this share of its words reappears in the candidate
COPY_RUN_WORDS = 20  # any run of this many words from one question or answer is a large part of it
# An answer to one question repeats the words particular to it (in no other question shown, nor in the
# parent): ANSWER_WORDS of them, or ANSWER_FEW_WORDS that are ANSWER_SHARE of them. A rule set names a
# question's particulars once at most ("e.g. sticky risotto"), as the rewriter is told to write no fixes
# for one question.
ANSWER_WORDS = 4
ANSWER_FEW_WORDS = 3
ANSWER_SHARE = 0.6
_TOKEN = re.compile(r"[^\W_]+")
_STOP_WORDS = (
    "a an the and or but if then than that this these those there their they them it its is are was were "
    "be been being to of in on at by for with from as into about over under not no nor so such can could "
    "will would shall should may might must do does did done have has had having you your yours i me my "
    "we our us he she his her what which who whom whose when where why how all any each every some more "
    "most other only own same very just also too out up down off again once here both few many much own"
)
_STOP = frozenset(_STOP_WORDS.split())
# An instruction addresses the one who follows it: a modal or a directive anywhere, or a clause that opens
# with a verb in the imperative (`Answer directly.`, `- State the dose.`).
_DIRECTIVE = re.compile(r"\b(should|must|always|never|avoid|ensure|make sure|do not|don't|need to|needs to|"
                        r"prefer|instead of|rather than)\b", re.IGNORECASE)
_IMPERATIVE_WORDS = (
    "answer ask add address acknowledge apply avoid begin be break check cite clarify compare consider "
    "cover define describe distinguish explain focus follow give flag highlight identify include keep "
    "lead list mention name note offer organize organise outline point prefer prioritize prioritise "
    "provide put quote recommend reference refuse respond reward require say score separate show spell "
    "start state stick structure suggest summarize summarise tailor tell use verify warn weigh weight "
    "write"
)
_IMPERATIVE = frozenset(_IMPERATIVE_WORDS.split())
_CLAUSE = re.compile(r"(?:^|[.!?;:\n]|\s-\s)\s*(?:[-*•]|\d+[.)])?\s*([^\W\d_]+)", re.IGNORECASE)
_CODE_END = ("{", "[", "(", ",", ":", "=")
# A report on a rewrite rather than the rewrite: "The new strategy is to use a combination of the original
# strategy and …" (SmolLM2 against a served model). A skill may name itself once; a text that keeps talking
# about the old and the new version describes a change and tells the solver nothing.
_NARRATION = re.compile(r"\bthe (?:new|updated|revised|improved|original|previous|old|current) "
                        r"(?:strategy|skill|prompt|version)\b", re.IGNORECASE)
NARRATION_MIN = 2


@dataclass(frozen=True)
class Validity:
    valid: bool
    problem: Problem | None = None
    reason: str = ""


VALID = Validity(True)


@dataclass(frozen=True)
class Shown:
    """What the rewriter was shown besides the parent skill: its own instructions (the system prompt),
    and the questions and answers of the cases it learns from. A skill copies none of them."""

    instructions: str = ""
    questions: tuple[str, ...] = ()
    answers: tuple[str, ...] = ()


NOTHING_SHOWN = Shown()


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


def _tokens(text: str) -> list[str]:
    return [t.lower() for t in _TOKEN.findall(text)]


def _grams(words: list[str], n: int) -> set[tuple[str, ...]]:
    return {tuple(words[i:i + n]) for i in range(len(words) - n + 1)}


def _covered(words: list[str], source: set[tuple[str, ...]], n: int, inherited: set[tuple[str, ...]]
             ) -> tuple[int, int]:
    """Of `words`, how many sit inside an n-gram found in `source` but not in `inherited` (the parent's),
    and the longest run of such words."""
    hit = [False] * len(words)
    for i in range(len(words) - n + 1):
        gram = tuple(words[i:i + n])
        if gram in source and gram not in inherited:
            hit[i:i + n] = [True] * n
    longest = run = 0
    for h in hit:
        run = run + 1 if h else 0
        longest = max(longest, run)
    return sum(hit), longest


def _quote(text: str, words: int = 8) -> str:
    head = text.split()
    return " ".join(head[:words]) + (" …" if len(head) > words else "")


def _copy_reason(cand: list[str], shown: Shown, parent: list[str]) -> Validity | None:
    """An echo of the rewriter's instructions, or a copy of (a large part of) a question or an answer."""
    if shown.instructions:
        covered, _ = _covered(cand, _grams(_tokens(shown.instructions), ECHO_NGRAM), ECHO_NGRAM,
                              _grams(parent, ECHO_NGRAM))
        if covered >= ECHO_MIN_WORDS or (covered >= QUESTION_MIN_WORDS and covered >= ECHO_MIN_SHARE * len(cand)):
            return Validity(False, "instructions", f"echoes the rewriter's own instructions ({covered} of its "
                                                   f"{len(cand)} words are copied from them), not a skill")
    inherited = _grams(parent, QUESTION_NGRAM)
    mine = _grams(cand, QUESTION_NGRAM)
    kinds: tuple[tuple[Problem, tuple[str, ...]], ...] = (("question", shown.questions), ("answer", shown.answers))
    for kind, texts in kinds:
        for text in texts:
            words = _tokens(text)
            if len(words) < QUESTION_MIN_WORDS:
                continue
            covered, longest = _covered(words, mine, QUESTION_NGRAM, inherited)
            if longest >= COPY_RUN_WORDS or covered >= QUESTION_MAX_SHARE * len(words):
                what = "a question it was shown" if kind == "question" else "an answer it was shown"
                return Validity(False, kind, f"copies {covered} of the {len(words)} words of {what} "
                                             f"({_quote(text)!r}) instead of stating general rules")
    return None


def _content(words: list[str]) -> set[str]:
    return {w for w in words if len(w) >= 4 and w not in _STOP and not w.isdigit()}


def _answer_reason(cand: list[str], questions: tuple[str, ...], parent: list[str]) -> Validity | None:
    """An answer to one question: it repeats most of the words particular to that question (in no other
    question shown, nor in the parent)."""
    content = [_content(_tokens(q)) for q in questions]
    mine, inherited = set(cand), set(parent)
    for i, (q, words) in enumerate(zip(questions, content, strict=True)):
        others = set().union(*(c for j, c in enumerate(content) if j != i))
        particular = words - others - inherited
        repeated = particular & mine
        if len(repeated) >= ANSWER_WORDS or (len(repeated) >= ANSWER_FEW_WORDS
                                             and len(repeated) >= ANSWER_SHARE * len(particular)):
            return Validity(False, "answer", f"answers one question ({_quote(q)!r}) rather than stating rules: "
                                             f"it repeats {len(repeated)} of the {len(particular)} words particular "
                                             f"to it ({', '.join(sorted(repeated)[:5])})")
    return None


def has_instruction_form(text: str) -> bool:
    """Whether some sentence tells its reader what to do: a modal or directive word, or a clause that opens
    with an imperative verb."""
    if _DIRECTIVE.search(text):
        return True
    return any(m.group(1).lower() in _IMPERATIVE for m in _CLAUSE.finditer(text))


def check_candidate(text: str, parent: str, *, truncated: bool = False, analysis: str = "",
                    shown: Shown = NOTHING_SHOWN) -> Validity:
    """Whether `text` may be gated as a rewrite of `parent`. Checks, in order: truncated (the reply hit
    max_tokens), a JSON or code fragment, empty (fewer than MIN_WORDS words), repetitive (a loop: under
    MIN_DISTINCT_TRIGRAMS of its word trigrams distinct), a copy of the parent, collapsed (under
    COLLAPSE_RATIO of a long parent's length with no stated reason to cut), an echo of the rewriter's
    instructions, a copy of a question or an answer it was shown, an answer to one question, a description
    of the rewrite instead of the rewrite, or no instruction form at all (nothing in it tells the reader
    what to do)."""
    stripped = text.strip()
    if truncated:
        return Validity(False, "truncated", "the rewrite hit the token limit, so the skill is cut off")
    fragment = _fragment_reason(stripped) if stripped else None
    if fragment:
        return Validity(False, "fragment", fragment)
    words = [w.lower() for w in _WORD.findall(stripped)]
    if len(words) < MIN_WORDS:
        count = "no words" if not words else "1 word" if len(words) == 1 else f"only {len(words)} words"
        return Validity(False, "empty", f"{count}; a skill needs at least {MIN_WORDS}")
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
    cand, inherited = _tokens(stripped), _tokens(parent)
    copied = _copy_reason(cand, shown, inherited) or _answer_reason(cand, shown.questions, inherited)
    if copied is not None:
        return copied
    narration = _NARRATION.findall(stripped)
    if len(narration) >= NARRATION_MIN:
        return Validity(False, "not_instructions", f"describes a rewrite ({_quote(stripped)!r}; "
                                                   f"{len(narration)} mentions of the old or new version) "
                                                   "instead of stating rules to follow: not a skill")
    if not has_instruction_form(stripped):
        return Validity(False, "not_instructions", "tells its reader nothing to do (no rule, directive or "
                                                   "imperative sentence): not a skill")
    return VALID
