"""The candidate validity check (engine/validity.py) at the edges of its rules: a skill repeating a phrase
is no loop until under half its word trigrams are distinct; a text breaking off at any of the characters
code ends on, or starting as code does, is a fragment; an echo of the rewriter's instructions counts from
8 copied words when they are 30% of the text, and a shorter shared phrase is no echo; half of a question's
words copied is a copy of it; a copied question is quoted by its first eight words, with the cut marked.
Each case failed a mutant that the mutation bench found the older tests let pass (issue 46.2)."""

from __future__ import annotations

import pytest

from decoevo.engine.validity import _WORD, Shown, _distinct_trigrams, check_candidate
from decoevo.roles.rewrite_solver import SYSTEM as SOLVER_REWRITER

PARENT = "Answer the user."
PROSE = ("Answer the question the user asked first, in plain words. State the main risk and when to see a "
         "clinician. Keep it short and concrete")


def _distinct(text: str) -> float:
    return _distinct_trigrams([w.lower() for w in _WORD.findall(text)])


def test_a_skill_that_repeats_a_rule_is_not_a_loop_until_under_half_its_trigrams_are_distinct() -> None:
    repeats = ("Answer the question first. State the risk and when to see a clinician. Answer the question "
               "first, then give the reason. State the risk in plain words.")
    assert _distinct(repeats) < 1.0  # some trigrams repeat: a skill may say a rule twice
    assert check_candidate(repeats, PARENT).valid
    half = " ".join(["Answer the question first."] * 4) + " Keep it short and say why."
    assert _distinct(half) == 0.5  # exactly half: not yet under it
    assert check_candidate(half, PARENT).valid
    looped = " ".join(["Answer the question first."] * 5) + " Keep it short and say why."
    assert _distinct(looped) < 0.5
    assert check_candidate(looped, PARENT).problem == "repetitive"


# the characters the rule names, written out: a parametrization over the module's own tuple would lose a
# case with the entry it lost
@pytest.mark.parametrize("end", ["{", "[", "(", ",", ":", "="])
def test_prose_breaking_off_at_any_code_ending_is_a_fragment(end: str) -> None:
    verdict = check_candidate(f"{PROSE} {end}", PARENT)
    assert verdict.problem == "fragment" and f"breaks off at a trailing {end!r}" in verdict.reason, verdict


@pytest.mark.parametrize("start", ["{", "[", "```", "<", "("])
def test_prose_starting_as_code_or_markup_is_a_fragment(start: str) -> None:
    verdict = check_candidate(f"{start}{PROSE}.", PARENT)
    assert verdict.problem == "fragment" and f"starts with {start!r}" in verdict.reason, verdict


def test_an_echo_counts_from_eight_copied_words_that_are_a_third_of_the_text() -> None:
    shown = Shown(SOLVER_REWRITER)
    # 9 of 23 words copied (a sentence of the rewriter's instructions): under 15, but 39% of the text
    echo = ("Write general, reusable rules, not fixes for one question. State the main risk and when to see a "
            "clinician, and keep answers short.")
    verdict = check_candidate(echo, PARENT, shown=shown)
    assert verdict.problem == "instructions" and "9 of its 23 words" in verdict.reason, verdict
    # one shared six-word phrase (6 of 16 words, 38%): a coincidence a skill may have, not an echo
    phrase = "Write general, reusable rules, not fixes. State the main risk and when to see a clinician."
    assert check_candidate(phrase, PARENT, shown=shown).valid


def test_a_copied_question_is_quoted_by_its_first_eight_words_with_the_cut_marked() -> None:
    long_q = ("My risotto is too sticky and gluey every time I make it, even though I follow the recipe. "
              "What am I doing wrong?")
    short_q = "How long should I rest a grilled steak?"  # eight words: quoted whole
    long_v = check_candidate(long_q + " Answer it.", PARENT, shown=Shown(questions=(long_q,)))
    assert long_v.problem == "question" and "('My risotto is too sticky and gluey every …')" in long_v.reason, long_v
    short_v = check_candidate(short_q + " Answer it well.", PARENT, shown=Shown(questions=(short_q,)))
    assert short_v.problem == "question" and f"({short_q!r})" in short_v.reason, short_v


def test_copying_half_of_a_question_s_words_is_a_copy_of_it() -> None:
    question = ("Why does my sourdough loaf come out dense and flat even with an active starter after a long "
                "proof?")
    half = "Why does my sourdough loaf come out dense and flat? Answer that first, then give the cause and the fix."
    verdict = check_candidate(half, PARENT, shown=Shown(questions=(question,)))
    assert verdict.problem == "question" and "copies 10 of the 19 words" in verdict.reason, verdict
