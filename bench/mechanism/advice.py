"""docs/when-to-co-evolve.md, written from the bench results: its prose is bench/mechanism/advice_text.md, and
every `<<key>>` in it is filled from bench/results/mechanism.json or bench/results/mechanism_prior.json.
`python -m bench.mechanism.doc` writes it with docs/mechanism.md (and `--check`s both).

Keys: `<<row:SETTING>>` (DecoEvo and SkillOpt gold, the paired difference with the interval of docs/mechanism.md
§5's Holm-corrected test (95% for `main`, tested alone), seeds, the verdict read from that interval
(bench/mechanism/verdicts.py), the calls ratio), `<<short:SETTING>>` (the difference
with its interval), `<<calls_range>>`, `<<prior_table>>`, `<<prior_result>>`, `<<drift_table>>`,
`<<drift_verdict>>`, `<<advice_table>>`, `<<advice_verdict>>` (bench/mechanism/advice_fit.py). A key the results
cannot fill is an error, never a blank.
"""

from __future__ import annotations

import re
from dataclasses import asdict
from pathlib import Path
from typing import Any

from bench.mechanism import advice_fit
from bench.mechanism import prior as prior_bench
from bench.mechanism.verdicts import cell_family, ci_text, of, paired

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "when-to-co-evolve.md"
TEXT = Path(__file__).with_name("advice_text.md")
KEY = re.compile(r"<<([^<>]+)>>")
AIM = 0.8  # the precision and recall a loss predictor would need to be shown as one (issue 37)


def setting_tests(results: dict[str, Any]) -> dict[str, tuple[Any, str]]:
    """Every setting's paired test (DecoEvo − SkillOpt) and its verdict, Holm over the controls and sweep as in
    docs/mechanism.md §5; `main` on its own (its 20 seeds are §2's test)."""
    cells, summary = results["cells"], results["summary"]
    settings = [k for k in summary if k != "main" and not k.startswith("gate:")]
    family = cell_family(cells, {k: (k, "decoevo", "skillopt") for k in settings})
    main = paired(cells, "main", "decoevo", "skillopt")
    out: dict[str, tuple[Any, str]] = {k: (t, of(t)) for k, (t, _) in family.items()}
    out["main"] = (main, of(main))
    return out


def row(results: dict[str, Any], tests: dict[str, tuple[Any, str]], setting: str) -> str:
    if setting not in results["summary"]:
        raise KeyError(f"{setting} is not in bench/results/mechanism.json: run its sweep")
    s = results["summary"][setting]
    test, verdict = tests[setting]
    ratio = s["decoevo"]["calls"]["mean"] / s["skillopt"]["calls"]["mean"]
    return (f"{s['decoevo']['gold']['mean']:.1f} against {s['skillopt']['gold']['mean']:.1f}: "
            f"{ci_text(test)}, {s['decoevo']['gold']['n']} seeds, **{verdict}**; {ratio:.1f}× the calls")


def calls_range(results: dict[str, Any], prior_results: dict[str, Any] | None) -> str:
    s = results["summary"]
    ratios = [s[k]["decoevo"]["calls"]["mean"] / s[k]["skillopt"]["calls"]["mean"]
              for k in s if not k.startswith("gate:") and "decoevo" in s[k] and "skillopt" in s[k]]
    if prior_results:
        ratios += [r["decoevo-skillopt"]["calls_ratio"] for r in prior_results["summary"]["worlds"].values()]
    return f"{min(ratios):.1f}–{max(ratios):.1f}×"


def prior_table(prior: dict[str, tuple[Any, ...]] | None = None) -> str:
    """`PRIOR` (or `prior`), knob by knob: each value with its probability."""
    from collections import Counter

    from decoevo.testing.truth_world_params import PRIOR, WorldParams

    default = asdict(WorldParams()) | prior_bench.SPLITS
    out = ["| knob | values (probability) | default world |", "|---|---|---|"]
    for knob, values in (PRIOR if prior is None else prior).items():
        counts = Counter(values)
        drawn = ", ".join(f"{v} ({n}/{len(values)})" for v, n in counts.items())
        out.append(f"| `{knob}` | {drawn} | {default[knob]} |")
    return "\n".join(out)


def prior_result(prior_results: dict[str, Any] | None) -> str:
    if not prior_results:
        return "Not run yet: `nice -n 10 python -m bench.mechanism.prior`."
    s = prior_results["summary"]
    sh, ci = s["shares"]["decoevo-skillopt"], s["shares"]["decoevo-skillopt"]["ci"]
    n, worlds = sh["worlds"], s["worlds"]
    per = sorted({r["n_seeds"] for r in worlds.values()})
    seeds = f"{per[0]}" if len(per) == 1 else f"{per[0]}–{per[-1]}"
    planned = prior_results.get("planned_worlds", prior_results["worlds"])
    left = sorted(set(planned) - {int(w) for w in worlds})

    def share(v: str) -> str:
        return f"{sh[v]} ({sh[v] / n:.0%}, 95% interval {ci[v][0]:.0%}–{ci[v][1]:.0%})"

    missing = sorted(set(prior_results.get("planned_seeds", prior_results["seeds"])) - set(prior_results["seeds"]))
    if missing:
        text_seeds = (f"This is a partial run: seeds {missing[0]}–{missing[-1]} of the planned "
                      f"{len(prior_results['planned_seeds'])} per world were not run yet (`nice -n 10 python -m "
                      "bench.mechanism.prior --methods skillopt,decoevo --resume` runs them, seed by seed).")
    losses = [(w, r) for w, r in worlds.items() if r["decoevo-skillopt"]["verdict"] == "loss"]
    default = asdict(prior_bench.WorldParams())

    def knobs(r: dict[str, Any]) -> str:
        return ", ".join(f"{prior_bench.SHORT[k]} {v}" for k, v in r["knobs"].items() if v != default[k]) or "none"

    text = [f"In {n} worlds drawn from it (worlds {min(map(int, worlds))}–{max(map(int, worlds))}, none dropped; "
            f"{seeds} seeds per world, paired by seed; a world is a win or a loss only when its paired test rejects "
            f"after Holm's correction over the worlds), DecoEvo won in {share('win')}, tied in {share('tie')} and "
            f"lost in {share('loss')}."]
    if missing:
        text.append(text_seeds)
    if left:
        text.append(f"Worlds {', '.join(map(str, left))} of the planned range were not run yet "
                    f"(`python -m bench.mechanism.prior --resume`).")
    below = [(w, r) for w, r in worlds.items() if r["decoevo-skillopt"]["mean"] < 0]
    if below and not losses:
        text.append("Below SkillOpt on average but not a loss after the correction: " + "; ".join(
            f"world {w} ({knobs(r)}): {r['decoevo-skillopt']['mean']:+.1f} "
            f"[{_c(r['decoevo-skillopt']['ci'][0])}, {_c(r['decoevo-skillopt']['ci'][1])}]" for w, r in below) + ".")
    if losses:
        text.append("The losses: " + "; ".join(
            f"world {w} ({knobs(r)}): {r['decoevo-skillopt']['mean']:+.1f} "
            f"[{r['decoevo-skillopt']['ci'][0]:+.1f}, {r['decoevo-skillopt']['ci'][1]:+.1f}]" for w, r in losses) + ".")
    rho = s.get("knob_association") or {}
    skip = ("headroom", "findable_headroom")
    ranked = sorted((k for k in rho if k not in skip and rho[k] is not None), key=lambda k: -abs(rho[k]))
    if rho.get("headroom") is not None:
        text.append(f"Across the worlds, Spearman's ρ between the gap and the headroom the initial strategy left "
                    f"was {rho['headroom']:+.2f} ({_rho(rho.get('findable_headroom'))} with the findable "
                    "headroom, hidden requirements left out); of the knobs, "
                    + ", ".join(f"`{k}` ({rho[k]:+.2f})" for k in ranked[:3]) + " went with it most. "
                    "Each world's row is in [mechanism.md](mechanism.md) §6.")
    return " ".join(text)


TRANSFER_RUN = ("`nice -n 19 python -m bench.mechanism.prior --prior transfer --methods skillopt,decoevo "
                "--seeds 0-9`")


def transfer_text(key: str, prior_results: dict[str, Any] | None) -> str:
    """`<<transfer_prior_table>>`, `<<transfer_result>>`, `<<transfer_table>>`, `<<transfer_verdict>>`: the second
    prior and the advice's transfer test on its worlds (bench/results/mechanism_prior_transfer.json)."""
    from decoevo.testing.truth_world_params import PRIOR_TRANSFER

    if key == "transfer_prior_table":
        return prior_table(PRIOR_TRANSFER)
    transferred = advice_fit.load_transfer()
    if not prior_results or not transferred:
        return f"Not run yet: {TRANSFER_RUN}."
    if key == "transfer_result":
        sh, worlds = transferred["summary"]["shares"]["decoevo-skillopt"], transferred["summary"]["worlds"]
        seeds = sorted({r["n_seeds"] for r in worlds.values()})
        per = f"{seeds[0]}" if len(seeds) == 1 else f"{seeds[0]}–{seeds[-1]}"
        missing = sorted(set(transferred["planned_seeds"]) - set(transferred["seeds"]))
        partial = (f" Seeds {', '.join(map(str, missing))} of the planned {len(transferred['planned_seeds'])} were not "
                   "run (the machine's time ran out; every world has the same seeds)." if missing else "")
        left = sorted(set(prior_bench._range(prior_bench.TRANSFER_WORLDS)) - {int(w) for w in worlds})
        if left:
            partial += (f" Worlds {left[0]}–{left[-1]} of the planned {prior_bench.TRANSFER_WORLDS.replace('-', '–')} "
                        "were not run (the machine's time; the ids run were the first, not chosen on any result).")
        return (f"In its {sh['worlds']} worlds ({advice_fit._span(worlds)}, none dropped; {per} seeds per world, "
                "paired by seed, Holm over the worlds as above), DecoEvo won in "
                + ", tied in ".join(f"{sh[v]} ({sh[v] / sh['worlds']:.0%}, 95% interval {sh['ci'][v][0]:.0%}–"
                                    f"{sh['ci'][v][1]:.0%})" for v in ("win", "tie"))
                + f" and lost in {sh['loss']} ({sh['loss'] / sh['worlds']:.0%}, 95% interval {sh['ci']['loss'][0]:.0%}–"
                f"{sh['ci']['loss'][1]:.0%}).{partial}")
    t = advice_fit.transfer(prior_results, advice_fit.load_fit(), transferred)
    if key == "transfer_table":
        return advice_fit.transfer_table(t)
    if key == "transfer_verdict":
        return advice_fit.transfer_verdict(t)
    raise KeyError(f"bench/mechanism/advice_text.md: unknown key <<{key}>>")


def _c(x: float | None) -> str:
    return "–" if x is None else f"{x:+.1f}"


def _rho(x: float | None) -> str:
    return "–" if x is None else f"{x:+.2f}"


def drift_verdict(prior_results: dict[str, Any] | None) -> str:
    if not prior_results or not (prior_results["summary"].get("drift") or {}).get("per_run"):
        return "Not measured yet."
    c = prior_results["summary"]["drift"]["per_run"]
    p, r = c["precision"], c["recall"]
    good = p is not None and r is not None and p >= AIM and r >= AIM
    said = (f"Per run, precision {_f(p)} and recall {_f(r)}: " +
            ("it predicts a loss well enough to act on." if good else
             f"below the {AIM} a loss predictor would need, so read a flag as crowding out or forgetting, "
             "not as a sign to switch to SkillOpt."))
    return said


def _f(x: float | None) -> str:
    return "–" if x is None else f"{x:.2f}"


def render(results: dict[str, Any], prior_results: dict[str, Any] | None) -> str:
    tests = setting_tests(results)

    def fill(m: re.Match[str]) -> str:
        key = m.group(1)
        if key.startswith("row:"):
            return row(results, tests, key[4:])
        if key.startswith("short:"):
            return ci_text(tests[key[6:]][0])
        if key == "calls_range":
            return calls_range(results, prior_results)
        if key == "prior_table":
            return prior_table()
        if key == "prior_result":
            return prior_result(prior_results)
        if key == "drift_table":
            return prior_bench.drift_table(prior_results).strip() if prior_results else "Not measured yet."
        if key == "drift_verdict":
            return drift_verdict(prior_results)
        if key.startswith("transfer_"):
            return transfer_text(key, prior_results)
        if key in ("advice_table", "advice_verdict"):
            if not prior_results:
                return "Not measured yet."
            evaluated = advice_fit.evaluate(prior_results, advice_fit.load_fit())
            return advice_fit.table(evaluated, prior_results) if key == "advice_table" else \
                advice_fit.verdict(evaluated)
        raise KeyError(f"bench/mechanism/advice_text.md: unknown key <<{key}>>")

    return KEY.sub(fill, TEXT.read_text(encoding="utf-8"))
