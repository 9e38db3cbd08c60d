"""What is measured about advising, before paying, whether to co-evolve the rubric or keep it fixed.

The numbers are those of bench/mechanism/advice_fit.py over the known-truth world's prior (a simulated
world, not a real task): a gold-free rule on what the first outer round's audits find, fitted on one range
of the prior's worlds and measured, unchanged, on another (tests/test_mechanism_doc.py checks that these
are the numbers the results files give). `decoevo pilot` prints `pilot_note()`, so the advice it shows
never claims more than was measured.
"""

from __future__ import annotations

from typing import Any

# Per world, on the held-out worlds: the fitted rule's advice (most seeds) against the world's verdict.
HELD_OUT: dict[str, Any] = {
    "rule": "co-evolve when `adequacy` < 0.5416", "fit_worlds": "300–323", "worlds": "200–223", "n": 24, "right": 18,
    "accuracy_ci": [0.551, 0.88], "constant_accuracy": 0.583, "precision": 0.75, "recall": 0.857, "fisher_p": 0.0283,
    "beats_chance": True}


def pilot_note(measured: dict[str, Any] | None = None) -> str:
    m = HELD_OUT if measured is None else measured
    if not m:
        return "co-evolve or keep the rubric fixed: no gold-free advice has been measured yet."
    where = (f"in {m['n']} held-out worlds of the simulated world's prior (worlds {m['worlds']}; the rule was "
             f"fitted on worlds {m['fit_worlds']})")
    lo, hi = m["accuracy_ci"]
    numbers = (f"right in {m['right']} of {m['n']} (95% interval {lo:.0%}–{hi:.0%}; the better of always or never "
               f"co-evolving: {m['constant_accuracy']:.0%}), "
               f"precision {_f(m['precision'])} and recall {_f(m['recall'])} for a win, one-sided Fisher "
               f"p {_p(m['fisher_p'])}")
    if not m["beats_chance"]:
        return (f"co-evolve or keep the rubric fixed: no gold-free advice beat chance where measured ({where}, "
                f"the best rule, {m['rule']}, was {numbers}); decide by the checks of "
                "`decoevo docs when-to-co-evolve`.")
    reading = ("`adequacy` being the mean structural adequacy in audits/outer_000/structural_probe.jsonl of a "
               "DecoEvo run, after its first outer round" if "`adequacy`" in m["rule"] else
               "read from audits/outer_000/ of a DecoEvo run, after its first outer round")
    return (f"co-evolve or keep the rubric fixed? In a simulated world, not measured on a real task: \"{m['rule']}\" "
            f"({reading}) was {numbers}, {where}; see `decoevo docs when-to-co-evolve`.")


def _f(x: float | None) -> str:
    if x is None:
        return "–"
    return "<1e-4" if x < 1e-4 else f"{x:.2g}" if x < 0.01 else f"{x:.2f}"


def _p(x: float | None) -> str:
    shown = _f(x)
    return shown.replace("<", "< ") if shown.startswith("<") else f"= {shown}"
