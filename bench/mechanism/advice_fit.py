"""The gold-free advice (co-evolve or keep the rubric fixed), fitted on one range of the prior's worlds and
measured on another, so that no number it is shown with comes from the worlds it was fitted on.

A rule reads one of READINGS (what the first outer round's audits on the probe set recorded in a DecoEvo
run, `prior.first_round_audits`; no gold) against a threshold, in one direction. `fit` tries every reading,
both directions and every threshold between two observed values on the fit worlds
(bench/results/mechanism_prior_fit.json, worlds 300-323, written by `python -m bench.mechanism.prior
--worlds 300-323 --seeds 0-4 --out ...`), and keeps the one with the best balanced accuracy per run (the
label of a run: DecoEvo's gold above SkillOpt's on the same seed, which needs no more seeds per world than
a run has). `measure` applies the kept rule, unchanged, to the reported worlds (bench/results/
mechanism_prior.json, worlds 200-223): per run, and per world (the advice of most seeds against the world's
Holm verdict "win"), with Wilson intervals, the best constant advice's accuracy (always or never co-evolve)
and Fisher's exact test of the advice against the outcome. It beats chance only when that test rejects
(one-sided, 0.05) and its accuracy is above the best constant advice's.

Beating chance is not beating the advice a user would follow without any rule, always co-evolving, and the
reported worlds are of the prior the rule was chosen on. So `transfer` measures every rule, unchanged, on
the worlds of a second prior written beforehand with other ranges (`PRIOR_TRANSFER`, bench/results/
mechanism_prior_transfer.json) and compares it with always co-evolving on the same worlds by the exact
McNemar test (`against_always`); what `decoevo pilot` prints is `signals_note` of that test.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench._common import RESULTS
from bench.mechanism.prior import classifier, recommends, wilson

FIT = RESULTS / "mechanism_prior_fit.json"
TRANSFER = RESULTS / "mechanism_prior_transfer.json"  # worlds of the second prior (PRIOR_TRANSFER), never fitted on
READINGS = ("adequacy", "new_structural", "new_contrastive", "new_items", "repairs", "principles",
            "contrastive_records")
ALPHA = 0.05


@dataclass(frozen=True)
class Rule:
    reading: str
    above: bool  # co-evolve when the reading is above the threshold (else: below it)
    threshold: float

    def says(self, audits: dict[str, Any]) -> bool:
        x = reading(audits, self.reading)
        return x > self.threshold if self.above else x < self.threshold

    def text(self) -> str:
        return f"co-evolve when `{self.reading}` {'>' if self.above else '<'} {self.threshold:g}"


def reading(audits: dict[str, Any], name: str) -> float:
    if name == "new_items":
        return float(audits.get("new_structural", 0) + audits.get("new_contrastive", 0))
    value = audits.get(name)
    return 0.0 if value is None else float(value)


def _runs(results: dict[str, Any]) -> list[tuple[dict[str, Any], bool, int]]:
    """Each DecoEvo run's audits, whether it beat SkillOpt on the same seed, and its world."""
    gold = {(c["world"], c["seed"], c["method"]): c["gold"] for c in results["cells"]}
    return [(c["audits"], c["gold"] > gold[(c["world"], c["seed"], "skillopt")], c["world"])
            for c in results["cells"] if c["method"] == "decoevo" and "audits" in c
            and (c["world"], c["seed"], "skillopt") in gold]


def balanced_accuracy(pairs: list[tuple[bool, bool]]) -> float:
    pos = [s for s, o in pairs if o]
    neg = [s for s, o in pairs if not o]
    tpr = sum(pos) / len(pos) if pos else 0.0
    tnr = sum(1 for s in neg if not s) / len(neg) if neg else 0.0
    return (tpr + tnr) / 2


def fit(results: dict[str, Any]) -> tuple[Rule, float]:
    """The rule with the best balanced accuracy per run on `results`' worlds (ties: the first reading of
    READINGS, then the lower threshold), and that accuracy."""
    runs = _runs(results)
    best: tuple[float, Rule] | None = None
    for name in READINGS:
        values = sorted({reading(a, name) for a, _, _ in runs})
        for lo, hi in itertools.pairwise(values):
            for above in (True, False):
                rule = Rule(name, above, round((lo + hi) / 2, 4))
                score = balanced_accuracy([(rule.says(a), o) for a, o, _ in runs])
                if best is None or score > best[0] + 1e-12:
                    best = (score, rule)
    if best is None:
        raise ValueError("no reading varies over the fit worlds: nothing to fit")
    return best[1], round(best[0], 3)


def fisher_greater(pairs: list[tuple[bool, bool]]) -> float | None:
    """One-sided Fisher exact p-value that saying co-evolve goes with the outcome more than by chance."""
    from scipy.stats import fisher_exact

    table = [[sum(1 for s, o in pairs if s and o), sum(1 for s, o in pairs if s and not o)],
             [sum(1 for s, o in pairs if not s and o), sum(1 for s, o in pairs if not s and not o)]]
    if min(sum(table[0]), sum(table[1])) == 0:
        return None  # the advice never changes: no association to test
    return float(f"{fisher_exact(table, alternative='greater')[1]:.3g}")


def against_always(pairs: list[tuple[bool, bool]], always: bool = True) -> float | None:
    """One-sided exact McNemar p-value that the advice is right more often than always co-evolving (or, with
    `always` False, never co-evolving) on the same units. They differ only where the advice says the other
    thing: for always co-evolving, where it says keep the rubric, right there when DecoEvo did not win."""
    from scipy.stats import binomtest

    differs = [o for s, o in pairs if s != always]  # the outcomes where the advice departs from the constant
    better = sum(1 for o in differs if o != always)  # ... and was right to
    if not differs:
        return None  # it never departs: it is the constant advice
    return float(f"{binomtest(better, len(differs), 0.5, alternative='greater').pvalue:.3g}")


def scored(pairs: list[tuple[bool, bool]]) -> dict[str, Any]:
    right = sum(1 for s, o in pairs if s == o)
    positives = sum(1 for _, o in pairs if o)
    constant = max(positives, len(pairs) - positives) / len(pairs) if pairs else None
    p = fisher_greater(pairs)
    acc = right / len(pairs) if pairs else None
    return classifier(pairs) | {
        "right": right, "accuracy": None if acc is None else round(acc, 3), "accuracy_ci": wilson(right, len(pairs)),
        "constant_accuracy": None if constant is None else round(constant, 3), "fisher_p": p,
        "always_right": positives, "always_ci": wilson(positives, len(pairs)), "mcnemar_p": against_always(pairs),
        "never_mcnemar_p": against_always(pairs, always=False),
        "beats_chance": bool(p is not None and p < ALPHA and acc is not None and constant is not None
                             and acc > constant)}


def measure(says: Any, results: dict[str, Any]) -> dict[str, Any]:
    """`says(audits) -> bool` over `results`' worlds: per run and per world (most seeds' advice)."""
    runs = _runs(results)
    rows = results["summary"]["worlds"]
    per_world = []
    for w, row in rows.items():
        mine = [says(a) for a, _, world in runs if world == int(w)]
        if mine:
            per_world.append((2 * sum(mine) >= len(mine), row["decoevo-skillopt"]["verdict"] == "win"))
    return {"per_run": scored([(says(a), o) for a, o, _ in runs]), "per_world": scored(per_world)}


def evaluate(reported: dict[str, Any], fit_results: dict[str, Any] | None) -> dict[str, Any]:
    """The stated rule (`prior.recommends`, never fitted) and, when the fit worlds were run, the fitted rule,
    both measured on the reported worlds."""
    out: dict[str, Any] = {"stated": {"rule": "co-evolve when the first audits propose at least one new item",
                                      "reported": measure(recommends, reported)}}
    if fit_results:
        shared = {c["world"] for c in fit_results["cells"]} & {c["world"] for c in reported["cells"]}
        if shared:
            raise ValueError(f"worlds {sorted(shared)} are both fitted on and reported: fit on other worlds")
        rule, score = fit(fit_results)
        out["fitted"] = {"rule": rule.text(), "fit_worlds": sorted({c["world"] for c in fit_results["cells"]}),
                         "fit_seeds": sorted({c["seed"] for c in fit_results["cells"]}),
                         "fit_balanced_accuracy": score, "in_fit_worlds": measure(rule.says, fit_results),
                         "reported": measure(rule.says, reported)}
    return out


def load_fit(path: Path = FIT) -> dict[str, Any] | None:
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def load_transfer(path: Path = TRANSFER) -> dict[str, Any] | None:
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def _span(worlds: Any) -> str:
    ids = sorted(int(w) for w in worlds)
    return f"{ids[0]}–{ids[-1]}"


def transfer(reported: dict[str, Any], fit_results: dict[str, Any] | None,
             transferred: dict[str, Any]) -> dict[str, Any]:
    """Every rule, chosen on the first prior's worlds only, measured unchanged on the second prior's worlds
    (`PRIOR_TRANSFER`, bench/results/mechanism_prior_transfer.json), against always co-evolving: the stated rule,
    the rule fitted on worlds 300-323 (what `decoevo pilot` printed before issue 48), and the same search refitted
    on every world of the first prior (fixed before the second prior's worlds were run)."""
    if transferred.get("prior_name") != "transfer":
        raise ValueError("the transfer test reads worlds of the second prior (prior.py --prior transfer)")
    first = {c["world"] for c in [*reported["cells"], *(fit_results or {"cells": []})["cells"]]}
    if first & {c["world"] for c in transferred["cells"]}:
        raise ValueError("a world of the first prior is among the transfer worlds")
    rules: list[dict[str, Any]] = [{"key": "stated", "rule": "co-evolve when the first audits propose at least one new "
                                    "item", "chosen_on": "stated before any world was run", "says": recommends,
                                    "first_prior": measure(recommends, reported)}]
    if fit_results:
        rule, _ = fit(fit_results)
        rules.append({"key": "fitted", "rule": rule.text(), "says": rule.says,
                      "chosen_on": f"fitted on worlds {_span(fit_results['summary']['worlds'])}",
                      "first_prior": measure(rule.says, reported)})
        both = {"cells": reported["cells"] + fit_results["cells"],
                "summary": {"worlds": {**reported["summary"]["worlds"], **fit_results["summary"]["worlds"]}}}
        refit, _ = fit(both)
        rules.append({"key": "refitted", "rule": refit.text(), "chosen_on": "fitted on every first-prior world, "
                      f"{_span(reported['summary']['worlds'])} and {_span(fit_results['summary']['worlds'])}",
                      "says": refit.says, "first_prior": None})
    out = []
    for r in rules:
        says = r.pop("says")
        out.append(r | {"transfer": measure(says, transferred)})
    seeds = sorted({c["seed"] for c in transferred["cells"]})
    return {"worlds": _span(transferred["summary"]["worlds"]), "seeds": len(seeds), "rules": out,
            "first_worlds": _span(reported["summary"]["worlds"]),
            "transfers": [r["key"] for r in out if _transfers(r["transfer"]["per_world"])]}


def _transfers(c: dict[str, Any]) -> bool:
    """Right more often than always co-evolving and than never co-evolving (each one-sided exact McNemar at
    ALPHA): beating one constant alone is what a rule that mostly says the other constant does where that
    other constant is right, and no signal."""
    return all(p is not None and p < ALPHA for p in (c["mcnemar_p"], c["never_mcnemar_p"]))


def transfer_table(t: dict[str, Any]) -> str:
    """The transfer test: each rule per world and per run on the second prior's worlds (and, where it was not
    chosen on them, on the first prior's reported worlds), beside always co-evolving."""
    head = ("| rule | chosen on | measured on | unit | n | says co-evolve | DecoEvo better | right [95% CI] | "
            "always co-evolving right [95% CI] | exact McNemar p, rule better than always (one-sided) | "
            "never co-evolving right | McNemar p against never |")
    out = [head, "|" + "---|" * 12]
    for r in t["rules"]:
        where = [(f"second prior, worlds {t['worlds']}", r["transfer"])]
        if r["first_prior"] is not None:
            where.insert(0, (f"first prior, worlds {t['first_worlds']} (held out)", r["first_prior"]))
        for place, m in where:
            for unit in ("per_world", "per_run"):
                c = m[unit]
                out.append(f"| {r['rule']} | {r['chosen_on']} | {place} | {unit.replace('_', ' ')} | {c['n']} | "
                           f"{c['flagged']} | {c['positives']} | "
                           f"{c['right']} ({_rate(c['accuracy'], c['accuracy_ci'])}) | "
                           f"{c['always_right']} ({_rate(_share(c['always_right'], c['n']), c['always_ci'])}) | "
                           f"{_f(c['mcnemar_p'])} | {c['n'] - c['always_right']} | {_f(c['never_mcnemar_p'])} |")
    return "\n".join(out)


def _share(k: int, n: int) -> float | None:
    return round(k / n, 3) if n else None


def transfer_verdict(t: dict[str, Any]) -> str:
    """What the transfer test shows, per world (the runs of one world are not independent)."""
    said = []
    for r in t["rules"]:
        c = r["transfer"]["per_world"]
        said.append(f"{r['rule']} ({r['chosen_on']}) was right in {c['right']} of {c['n']} (always co-evolving: "
                    f"{c['always_right']}, McNemar p {_pp(c['mcnemar_p'])}; never co-evolving: "
                    f"{c['n'] - c['always_right']}, p {_pp(c['never_mcnemar_p'], 'keep the rubric')})")
    text = (f"On the second prior's worlds {t['worlds']} ({t['seeds']} seeds each), per world: "
            + "; ".join(said) + ".")
    runs = [r["transfer"]["per_run"] for r in t["rules"]]
    if runs:
        text += (f" Per run (the runs of one world are not independent), DecoEvo's gold beat SkillOpt's in "
                 f"{runs[0]['positives']} of {runs[0]['n']}; the rules were right in "
                 + ", ".join(str(c["right"]) for c in runs) + f" of them, never co-evolving in "
                 f"{runs[0]['n'] - runs[0]['positives']}.")
    if t["transfers"]:
        return text + (" Beating both always and never co-evolving there (one-sided exact McNemar, 0.05): "
                       + ", ".join(f"the {k} rule" for k in t["transfers"]) + "; measured in simulated worlds, "
                       "not on a real task.")
    return text + (" None of them beat both always and never co-evolving (one-sided exact McNemar, 0.05) on "
                   "worlds it was neither fitted nor selected on, so "
                   "`decoevo pilot` makes no recommendation: it prints these readings and what each has been seen "
                   "to mean, and the choice rests on the checks above.")


def _pp(x: float | None, said: str = "co-evolve") -> str:
    if x is None:
        return f"–: it always said {said}"
    shown = _f(x)
    return shown.replace("<", "< ") if shown.startswith("<") else f"= {shown}"


def signals_note(t: dict[str, Any]) -> dict[str, Any]:
    """What `decoevo.analysis.coevolve_advice.MEASURED` must hold: each rule per world, on the first prior's
    held-out worlds (where it was not chosen on them) and on the second prior's."""
    def brief(c: dict[str, Any]) -> dict[str, Any]:
        return {"n": c["n"], "right": c["right"], "accuracy_ci": c["accuracy_ci"], "always_right": c["always_right"],
                "mcnemar_p": c["mcnemar_p"], "never_mcnemar_p": c["never_mcnemar_p"]}

    return {"first_worlds": t["first_worlds"], "transfer_worlds": t["worlds"], "transfer_seeds": t["seeds"],
            "transfers": t["transfers"],
            "signals": [{"rule": r["rule"], "chosen_on": r["chosen_on"],
                         "first_prior": None if r["first_prior"] is None else brief(r["first_prior"]["per_world"]),
                         "transfer": brief(r["transfer"]["per_world"])} for r in t["rules"]]}


def table(evaluated: dict[str, Any], reported: dict[str, Any]) -> str:
    """Both rules as classifiers of a win on the reported worlds (the fitted one also on its fit worlds)."""
    worlds = reported["summary"]["worlds"]
    span = f"{min(map(int, worlds))}–{max(map(int, worlds))}"
    head = ("| rule | measured on | unit | n | says co-evolve | DecoEvo better | precision [95% CI] | recall [95% CI] "
            "| right [95% CI] | best constant advice | Fisher p (one-sided) | always co-evolving right "
            "| exact McNemar p, better than always (one-sided) |")
    out = [head, "|" + "---|" * 13]
    rows = [("stated before any world was run: " + evaluated["stated"]["rule"], f"worlds {span}",
             evaluated["stated"]["reported"])]
    if "fitted" in evaluated:
        f = evaluated["fitted"]
        fit_span = f"{min(f['fit_worlds'])}–{max(f['fit_worlds'])}"
        rows += [(f"fitted on worlds {fit_span}: {f['rule']}", f"worlds {span} (held out)", f["reported"]),
                 ("the same, on the worlds it was fitted on (not a measure of it)", f"worlds {fit_span}",
                  f["in_fit_worlds"])]
    for name, where, m in rows:
        for unit in ("per_run", "per_world"):
            c = m[unit]
            out.append(f"| {name} | {where} | {unit.replace('_', ' ')} | {c['n']} | {c['flagged']} | "
                       f"{c['positives']} | "
                       f"{_rate(c['precision'], c['precision_ci'])} | {_rate(c['recall'], c['recall_ci'])} | "
                       f"{_rate(c['accuracy'], c['accuracy_ci'])} | {_f(c['constant_accuracy'])} | "
                       f"{_f(c['fisher_p'])} | {c['always_right']} | {_f(c['mcnemar_p'])} |")
    return "\n".join(out)


def _rate(x: float | None, ci: list[float] | None) -> str:
    return "–" if x is None or ci is None else f"{x:.2f} [{ci[0]:.2f}, {ci[1]:.2f}]"


def _f(x: float | None) -> str:
    if x is None:
        return "–"
    return "<1e-4" if x < 1e-4 else f"{x:.2g}" if x < 0.01 else f"{x:.2f}"


def verdict(evaluated: dict[str, Any]) -> str:
    """What the table shows, in words that claim no more than its held-out rows."""
    stated = evaluated["stated"]["reported"]["per_world"]
    text = [f"The stated rule was right in {stated['right']} of {stated['n']} worlds, against "
            f"{stated['constant_accuracy']:.0%} for the best constant advice (always or never co-evolve), "
            f"{_chance(stated)}."]
    if "fitted" not in evaluated:
        return " ".join([*text, "No rule was fitted on other worlds yet (`bench/mechanism/advice_fit.py`)."])
    f = evaluated["fitted"]
    world, run = f["reported"]["per_world"], f["reported"]["per_run"]
    text.append(f"The fitted rule ({f['rule']}), applied unchanged to the held-out worlds, was right in "
                f"{world['right']} of {world['n']} ({_chance(world)}); per run it was right in {run['right']} of "
                f"{run['n']} against {run['constant_accuracy']:.0%} for the best constant advice ({_chance(run)}; "
                "the runs of one world are not independent, so read the per-world row first).")
    shown = world["mcnemar_p"] is not None and world["mcnemar_p"] < ALPHA
    text.append(f"Against always co-evolving on the same worlds (right in {world['always_right']} of {world['n']}), "
                f"it was {'' if shown else 'not shown '}better: one-sided exact McNemar p {_pp(world['mcnemar_p'])}.")
    if world["beats_chance"]:
        lo, hi = world["accuracy_ci"]
        margin = ("its accuracy's 95% interval lies above the best constant advice's" if lo > world["constant_accuracy"]
                  else f"though its accuracy's 95% interval, {lo:.0%}–{hi:.0%}, still includes the best constant "
                  f"advice's {world['constant_accuracy']:.0%}: how much better than that it is remains unsettled")
        text.append("So, in this simulated prior, a low mean structural adequacy in the first outer round goes with "
                    f"a win more than chance would make it ({margin}). It was not measured on a real task, and the "
                    "reading comes after the first `audit_every` steps of a DecoEvo run: advice part-way into a run, "
                    "not before paying for one."
                    if f["rule"].startswith("co-evolve when `adequacy`") else
                    "So, in this simulated prior, what the first outer round's audits find goes with a win more "
                    f"than chance would make it ({margin}); it was not measured on a real task.")
    else:
        text.append("So no gold-free advice measured here beats chance per world: the first audits do not yet tell "
                    "whether co-evolving will win; decide by the checks above.")
    return " ".join(text)


def _chance(c: dict[str, Any]) -> str:
    p = c["fisher_p"]
    if p is None:
        return "its advice never changed, so it cannot beat chance"
    said = "better than chance" if c["beats_chance"] else "not shown better than chance"
    shown = _f(p)
    return f"{said}: one-sided Fisher p {shown.replace('<', '< ') if shown.startswith('<') else '= ' + shown}"
