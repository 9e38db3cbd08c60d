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


def scored(pairs: list[tuple[bool, bool]]) -> dict[str, Any]:
    right = sum(1 for s, o in pairs if s == o)
    positives = sum(1 for _, o in pairs if o)
    constant = max(positives, len(pairs) - positives) / len(pairs) if pairs else None
    p = fisher_greater(pairs)
    acc = right / len(pairs) if pairs else None
    return classifier(pairs) | {
        "right": right, "accuracy": None if acc is None else round(acc, 3), "accuracy_ci": wilson(right, len(pairs)),
        "constant_accuracy": None if constant is None else round(constant, 3), "fisher_p": p,
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


def table(evaluated: dict[str, Any], reported: dict[str, Any]) -> str:
    """Both rules as classifiers of a win on the reported worlds (the fitted one also on its fit worlds)."""
    worlds = reported["summary"]["worlds"]
    span = f"{min(map(int, worlds))}–{max(map(int, worlds))}"
    head = ("| rule | measured on | unit | n | says co-evolve | DecoEvo better | precision [95% CI] | recall [95% CI] "
            "| right [95% CI] | best constant advice | Fisher p (one-sided) |")
    out = [head, "|" + "---|" * 11]
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
                       f"{_f(c['fisher_p'])} |")
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
                    "whether co-evolving will win, and neither this page nor `decoevo pilot` advises on it; "
                    "decide by the checks above.")
    return " ".join(text)


def _chance(c: dict[str, Any]) -> str:
    p = c["fisher_p"]
    if p is None:
        return "its advice never changed, so it cannot beat chance"
    said = "better than chance" if c["beats_chance"] else "not shown better than chance"
    shown = _f(p)
    return f"{said}: one-sided Fisher p {shown.replace('<', '< ') if shown.startswith('<') else '= ' + shown}"


def held_out_note(fitted: dict[str, Any], reported: dict[str, Any]) -> dict[str, Any]:
    """What `decoevo.analysis.coevolve_advice.HELD_OUT` must hold: the fitted rule per world on the held-out worlds."""
    m = fitted["reported"]["per_world"]
    worlds = [int(w) for w in reported["summary"]["worlds"]]
    return {"rule": fitted["rule"], "fit_worlds": f"{min(fitted['fit_worlds'])}–{max(fitted['fit_worlds'])}",
            "worlds": f"{min(worlds)}–{max(worlds)}", "n": m["n"], "right": m["right"], "accuracy_ci": m["accuracy_ci"],
            "constant_accuracy": m["constant_accuracy"], "precision": m["precision"], "recall": m["recall"],
            "fisher_p": m["fisher_p"], "beats_chance": m["beats_chance"]}
