"""What is measured about telling, without gold, whether co-evolving the rubric will pay: `decoevo pilot`
prints it and recommends nothing unless a reading has beaten always co-evolving where it was not chosen.

The numbers are bench/mechanism/advice_fit.py's transfer test (a simulated world, not a real task): each
gold-free rule, chosen on the first prior's worlds (`PRIOR`), measured unchanged on a second prior's worlds
(`PRIOR_TRANSFER`, written before they were run, with other ranges), per world against the world's verdict
and against always co-evolving (exact McNemar). tests/test_advice_fit.py checks that `MEASURED` is what the
results files give.
"""

from __future__ import annotations

from typing import Any

# advice_fit.signals_note(advice_fit.transfer(...)) over the stored results files.
MEASURED: dict[str, Any] = {
    "first_worlds": "200–223",
    "transfer_worlds": "500–523",
    "transfer_seeds": 10,
    "transfers": [],
    "signals": [
        {
            "rule": "co-evolve when the first audits propose at least one new item",
            "chosen_on": "stated before any world was run",
            "first_prior": {
                "n": 24,
                "right": 17,
                "accuracy_ci": [0.508, 0.851],
                "always_right": 14,
                "mcnemar_p": 0.125,
                "never_mcnemar_p": 0.0946
            },
            "transfer": {
                "n": 24,
                "right": 3,
                "accuracy_ci": [0.043, 0.31],
                "always_right": 3,
                "mcnemar_p": None,
                "never_mcnemar_p": 1.0
            }
        },
        {
            "rule": "co-evolve when `adequacy` < 0.5416",
            "chosen_on": "fitted on worlds 300–323",
            "first_prior": {
                "n": 24,
                "right": 18,
                "accuracy_ci": [0.551, 0.88],
                "always_right": 14,
                "mcnemar_p": 0.145,
                "never_mcnemar_p": 0.0384
            },
            "transfer": {
                "n": 24,
                "right": 7,
                "accuracy_ci": [0.149, 0.492],
                "always_right": 3,
                "mcnemar_p": 0.109,
                "never_mcnemar_p": 1.0
            }
        },
        {
            "rule": "co-evolve when `adequacy` < 0.625",
            "chosen_on": "fitted on every first-prior world, 200–223 and 300–323",
            "first_prior": None,
            "transfer": {
                "n": 24,
                "right": 6,
                "accuracy_ci": [0.12, 0.449],
                "always_right": 3,
                "mcnemar_p": 0.125,
                "never_mcnemar_p": 1.0
            }
        }
    ]
}

READS = ("`new item` is a tag the first outer round's audits propose that the initial generator does not name; "
         "`adequacy` is the mean structural adequacy in audits/outer_000/structural_probe.jsonl of a DecoEvo run, "
         "after its first outer round")


def pilot_note(measured: dict[str, Any] | None = None) -> str:
    m = MEASURED if measured is None else measured
    if not m:
        return ("co-evolve or keep the rubric fixed: no recommendation; no gold-free reading has been tested on "
                "worlds it was not chosen on yet. Decide by the checks of `decoevo docs when-to-co-evolve`.")
    lines = []
    for s in m["signals"]:
        seen = []
        if s["first_prior"] is not None:
            seen.append(_seen(s["first_prior"], f"held-out worlds {m['first_worlds']} of the first prior"))
        seen.append(_seen(s["transfer"], f"worlds {m['transfer_worlds']} of a second prior with other ranges, "
                                         f"{m['transfer_seeds']} seeds each"))
        lines.append(f"  - {s['rule']} ({s['chosen_on']}): " + "; ".join(seen) + ".")
    if m["transfers"]:
        head = ("co-evolve or keep the rubric fixed? In simulated worlds, not on a real task, these gold-free "
                "readings were seen (per world, against DecoEvo's win over SkillOpt); only "
                + ", ".join(f"the {k} rule" for k in m["transfers"]) + " beat both always and never co-evolving "
                "on the second prior (one-sided exact McNemar, 0.05):")
    else:
        head = ("co-evolve or keep the rubric fixed: no recommendation. No gold-free reading measured so far beat "
                "both always and never co-evolving on worlds it was neither fitted nor selected on. What each has "
                "been seen to mean, in simulated worlds, not on a real task (per world, right = said co-evolve "
                "where DecoEvo won over SkillOpt, keep the rubric where it did not):")
    return "\n".join([head, *lines, f"  ({READS}.) See `decoevo docs when-to-co-evolve`."])


def _seen(c: dict[str, Any], where: str) -> str:
    lo, hi = c["accuracy_ci"]
    return (f"right in {c['right']} of {c['n']} {where} (95% interval {lo:.0%}–{hi:.0%}; always co-evolving "
            f"{c['always_right']}, {_against(c['mcnemar_p'], 'co-evolve')}; never co-evolving "
            f"{c['n'] - c['always_right']}, {_against(c['never_mcnemar_p'], 'keep the rubric')})")


def _against(p: float | None, constant: str) -> str:
    return f"it always said {constant}" if p is None else f"one-sided exact McNemar p {_p(p)}"


def _p(x: float) -> str:
    return "< 1e-4" if x < 1e-4 else f"= {x:.2g}" if x < 0.01 else f"= {x:.2f}"
