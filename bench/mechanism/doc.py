"""docs/mechanism.md, written from the bench results: every number on the page comes from
bench/results/mechanism.json and bench/results/mechanism_prior.json, every verdict from a paired test.

    python -m bench.mechanism.doc             # rewrite docs/mechanism.md and docs/when-to-co-evolve.md
    python -m bench.mechanism.doc --check     # exit 1 if either page is not what the results give

Every verdict is read from the interval printed beside it (bench/mechanism/verdicts.py): in a Holm family
that interval is at the confidence Holm tests the member at, so it excludes 0 exactly when Holm rejects. A
claim "holds" when the interval lies on the claimed side of 0, "reversed" on the other, "not shown" otherwise.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

from bench._common import RESULTS
from bench.mechanism import advice, advice_fit, prior
from bench.mechanism import mechanism as mech
from bench.mechanism.verdicts import PairedCI, by_seed, cell_family, ci_text, decide, paired

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "mechanism.md"
PARAMS_SOURCE = ROOT / "src" / "decoevo" / "testing" / "truth_world_params.py"

ABLATIONS = ("no_structural", "no_contrastive", "no_rubric_blind", "random_pairs", "no_verification",
             "no_distillation")
CONTROLS = ("task_prior", "budget_matched", "direct_audit")
TEXT = Path(__file__).with_name("doc_text.md")


def prose(name: str) -> str:
    """One part of the page's fixed prose (bench/mechanism/doc_text.md, between `<!-- part: NAME -->` lines)."""
    chunks = re.split(r"^<!-- part: (\w+) -->\n", TEXT.read_text(encoding="utf-8"), flags=re.MULTILINE)
    return dict(zip(chunks[1::2], chunks[2::2], strict=True))[name].strip()


__all__ = ["by_seed", "paired"]  # re-exported: the tests and older callers read them here


def corrected(tests: dict[str, tuple[PairedCI | None, float]]) -> dict[str, tuple[float, bool]]:
    """A Holm family's (adjusted p, rejected) per member: rejected exactly when its printed interval excludes 0."""
    return {k: (p, t is not None and decide(t.ci_low, t.ci_high) in ("win", "loss")) for k, (t, p) in tests.items()}


def verdict(test: PairedCI | None, claimed_sign: int) -> str:
    """A directional claim against the interval printed beside it (`verdicts.decide`)."""
    v = "not run" if test is None else decide(test.ci_low, test.ci_high)
    if v in ("not run", "tie"):
        return {"not run": "not run", "tie": "not shown"}[v]
    return "holds" if (v == "win") == (claimed_sign > 0) else "reversed"


_ci = ci_text


def _p(x: tuple[float, bool] | None) -> str:
    return "–" if x is None else f"{x[0]:.2g}"


def param_table() -> str:
    """`WorldParams`' fields, defaults and comments, read from its source so the table cannot drift."""
    rows = ["| parameter | default | meaning |", "|---|---|---|"]
    field = re.compile(r"^    (\w+): [\w|\[\]., ]+ = ([^#]+?)\s+# (.*)$")
    for line in PARAMS_SOURCE.read_text(encoding="utf-8").splitlines():
        m = field.match(line)
        if m:
            rows.append(f"| {m.group(1)} | {m.group(2)} | {m.group(3)} |")
    return "\n".join(rows)


def provenance(results: dict[str, Any], prior_results: dict[str, Any] | None) -> str:
    lines = ["| part | seeds | commit | cells | wall s | CPU s |", "|---|---|---|---|---|---|"]
    for r in results.get("runs", []):
        seeds = r.get("seeds") or results.get("seeds") or []
        span = f"{min(seeds)}–{max(seeds)}" if seeds else "–"
        lines.append(f"| {', '.join(r.get('parts', []))} | {span} | {r.get('commit', 'not recorded')} | "
                     f"{r.get('cells', '–')} | {r.get('wall_s', '–')} | {r.get('cpu_s', '–')} |")
    if prior_results:
        r, seeds = prior_results["run"], prior_results["seeds"]
        lines.append(f"| prior worlds {min(prior_results['worlds'])}–{max(prior_results['worlds'])} | "
                     f"{min(seeds)}–{max(seeds)} | {r.get('commit', '–')} | {r['cells']} | {r['wall_s']} | "
                     f"{r['cpu_s']} |")
    fit = advice_fit.load_fit()
    if fit:  # the worlds the advice is fitted on (when-to-co-evolve.md), never reported as a measure of it
        r, seeds = fit["run"], fit["seeds"]
        lines.append(f"| prior worlds {min(fit['worlds'])}–{max(fit['worlds'])} (fitting the advice only) | "
                     f"{min(seeds)}–{max(seeds)} | {r.get('commit', '–')} | {r['cells']} | {r['wall_s']} | "
                     f"{r['cpu_s']} |")
    transferred = advice_fit.load_transfer()
    if transferred:  # the second prior's worlds: the advice's transfer test (when-to-co-evolve.md), nothing else
        r, seeds = transferred["run"], transferred["seeds"]
        lines.append(f"| second prior's worlds {min(transferred['worlds'])}–{max(transferred['worlds'])} (the advice's "
                     f"transfer test only) | {min(seeds)}–{max(seeds)} | {r.get('commit', '–')} | {r['cells']} | "
                     f"{r['wall_s']} | {r['cpu_s']} |")
    return "\n".join(lines)


def main_section(results: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    cells, summary = results["cells"], results["summary"]["main"]
    base = summary["skillopt"]
    n = summary["decoevo"]["gold"]["n"]
    f1 = cell_family(cells, {m: ("main", m, "skillopt") for m in summary if m != "skillopt"})
    f2 = cell_family(cells, {m: ("main", m, "decoevo") for m in (*ABLATIONS, *CONTROLS) if m in summary})
    vs_skillopt, h1 = {k: t for k, (t, _) in f1.items()}, corrected(f1)
    vs_deco, h2 = {k: t for k, (t, _) in f2.items()}, corrected(f2)
    out = [f"### Final gold, every method ({n} seeds)", "",
           "Paired by seed; Holm over the twelve comparisons against SkillOpt, each interval at the confidence Holm "
           "tests it at (bench/mechanism/verdicts.py), so it excludes 0 exactly when Holm rejects.", "",
           "| method | gold (mean ± sd) | − SkillOpt [Holm interval] | Holm p | calls | tokens | calls ÷ SkillOpt | "
           "tokens ÷ SkillOpt |", "|---|---|---|---|---|---|---|---|"]
    for m, row in summary.items():
        out.append(f"| {m} | {mech._ms(row['gold'])} | {_ci(vs_skillopt.get(m)) if m != 'skillopt' else '–'} | "
                   f"{_p(h1.get(m))} | {row['calls']['mean']:.0f} | {row['tokens']['mean']:.0f} | "
                   f"{row['calls']['mean'] / base['calls']['mean']:.2f} | "
                   f"{row['tokens']['mean'] / base['tokens']['mean']:.2f} |")
    out += ["", f"### Ablations and controls against DecoEvo ({n} seeds; Holm over these nine)", "",
            "| method | − DecoEvo [Holm interval] | Holm p | loses to DecoEvo? |", "|---|---|---|---|"]
    for m, t in vs_deco.items():
        out.append(f"| {m} | {_ci(t)} | {_p(h2.get(m))} | {verdict(t, -1)} |")
    out += ["", "### Rubric alignment with the latent requirements (final generator, test split)", "",
            "| method | precision | recall | F1 | generator accepts |", "|---|---|---|---|---|"]
    for m, row in summary.items():
        out.append(f"| {m} | {mech._ms(row['precision'])} | {mech._ms(row['recall'])} | {mech._ms(row['f1'])} | "
                   f"{mech._ms(row['generator_accepts'])} |")
    return "\n".join(out), {"vs_skillopt": vs_skillopt, "h1": h1, "vs_deco": vs_deco, "h2": h2, "n": n}


def claims_section(results: dict[str, Any], t: dict[str, Any]) -> str:
    summary = results["summary"]["main"]
    cells = results["cells"]
    vs, vd = t["vs_skillopt"], t["vs_deco"]
    aud = paired(cells, "main", "no_structural", "no_contrastive")
    ratio = summary["decoevo"]["tokens"]["mean"] / summary["skillopt"]["tokens"]["mean"]
    rows = [
        ("DecoEvo beats SkillOpt on final gold (Table 1)", _ci(vs["decoevo"]),
         verdict(vs["decoevo"], 1)),
        ("SC-CoEvo falls below SkillOpt", _ci(vs["sc_coevo"]), verdict(vs["sc_coevo"], -1)),
    ]
    for m in ABLATIONS:
        rows.append((f"{m} loses to DecoEvo (Table 3)", _ci(vd[m]), verdict(vd[m], -1)))
    aud_p = "–" if aud is None or aud.p_value is None else f"{aud.p_value:.2g}"
    aud_v = "–" if aud is None else {"win": "holds", "loss": "reversed"}.get(decide(aud.ci_low, aud.ci_high),
                                                                             "not shown")
    rows.append(("the contrastive audit matters more than the structural (no_structural − no_contrastive)",
                 f"{_ci(aud)}, p {aud_p} (one test)", aud_v))
    for m in CONTROLS:
        rows.append((f"{m} stays below DecoEvo", _ci(vd[m]), verdict(vd[m], -1)))
    rows.append(("DecoEvo costs about 1.9× SkillOpt's tokens (Table 4)", f"{ratio:.2f}×",
                 "holds" if 1.5 <= ratio <= 2.3 else "not here"))
    out = ["| claim (paper) | here (paired difference, Holm interval; one test: 95%) | verdict |", "|---|---|---|"]
    out += [f"| {a} | {b} | {c} |" for a, b, c in rows]
    return "\n".join(out)


def sweep_section(results: dict[str, Any]) -> str:
    cells, summary = results["cells"], results["summary"]
    settings = [k for k in summary if k != "main" and not k.startswith("gate:")]
    ft = cell_family(cells, {k: (k, "decoevo", "skillopt") for k in settings})
    fs = cell_family(cells, {k: (k, "sc_coevo", "skillopt") for k in settings})
    tests, sc = {k: t for k, (t, _) in ft.items()}, {k: t for k, (t, _) in fs.items()}
    h, hs = corrected(ft), corrected(fs)
    out = ["| setting | seeds | SkillOpt | SC-CoEvo | DecoEvo | DecoEvo − SkillOpt [Holm interval] | Holm p | "
           "verdict | SC-CoEvo − SkillOpt (Holm p) | DecoEvo calls ÷ SkillOpt |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for k in settings:
        row = summary[k]
        t = tests[k]
        v = "–" if t is None else decide(t.ci_low, t.ci_high)
        ratio = row["decoevo"]["calls"]["mean"] / row["skillopt"]["calls"]["mean"]
        out.append(f"| {k} | {row['skillopt']['gold']['n']} | {mech._ms(row['skillopt']['gold'])} | "
                   f"{mech._ms(row['sc_coevo']['gold'])} | {mech._ms(row['decoevo']['gold'])} | {_ci(t)} | "
                   f"{_p(h.get(k))} | {v} | {_ci(sc[k])} ({_p(hs.get(k))}) | {ratio:.2f} |")
    return "\n".join(out)


def score_coupled_section(results: dict[str, Any]) -> str:
    gen = [(c["setting"], c["seed"], d) for c in results["cells"] if c["method"] == "sc_coevo"
           for d in c["decisions"]["generator"] if "consequence" in d]
    better = [g for g in gen if g[2]["better"]]
    took = [g for g in better if g[2]["accepted"]]
    worse_took = [g for g in gen if g[2]["worse"] and g[2]["accepted"]]
    def example(s: str, k: int, d: dict[str, Any]) -> str:
        j = d["deltas"].get("solver_score")
        return f"{s} seed {k}: consequence {d['consequence']:+.1f} gold" + ("" if j is None else f", J {j:+.3f}")

    examples = "; ".join(example(s, k, d) for s, k, d in took[:3])
    return (f"Over the settings of this page that record consequences ({len(gen)} score-coupled decisions), "
            f"the score-coupled rule accepted {len(took)} of {len(better)} truly better generators and "
            f"{len(worse_took)} truly worse ones. It is not true that a generator adding a criterion can never "
            f"win on J: it wins whenever the change raises the solver's score on V_g, e.g. when it also drops or "
            f"softens another criterion, or when the solver already meets the new one"
            + (f" ({examples})." if examples else "."))


def prior_limits(prior_results: dict[str, Any] | None) -> list[str]:
    """What the prior's worlds say decides the result, computed from them."""
    if not prior_results:
        return []
    s = prior_results["summary"]
    rho = s["knob_association"]
    rows = s["worlds"].values()
    others = sorted({r["knobs"]["capacity"] for r in rows if r["decoevo-skillopt"]["verdict"] != "win"})
    skip = ("headroom", "findable_headroom")
    ranked = sorted((k for k in rho if k not in skip and rho[k] is not None), key=lambda k: -abs(rho[k]))
    if rho.get("headroom") is None:
        return []
    return ["- **In the prior's worlds** (§6) Spearman's ρ between DecoEvo − SkillOpt and the world's headroom is "
            f"{rho['headroom']:+.2f}; of the knobs, {', '.join(f'`{k}` ({rho[k]:+.2f})' for k in ranked[:3])} "
            f"go with it most; the worlds DecoEvo did not win had capacity {', '.join(map(str, others)) or '–'} "
            f"(0: no limit). {len(rows)} worlds: read these as directions."]


def _seed_counts(prior_results: dict[str, Any]) -> str:
    per = sorted({r["n_seeds"] for r in prior_results["summary"]["worlds"].values()})
    return f"{per[0]}" if len(per) == 1 else f"{per[0]}–{per[-1]}"


def render(results: dict[str, Any], prior_results: dict[str, Any] | None) -> str:
    main_md, tests = main_section(results)
    gates = mech.tables({**results, "summary": {}}).strip()
    n = tests["n"]
    parts = [
        "# The mechanism in a known-truth world", "",
        "<!-- Written by `python -m bench.mechanism.doc` from bench/results/mechanism.json and "
        "bench/results/mechanism_prior.json; edit bench/mechanism/doc.py, not this page. -->", "",
        "**This page tests the implementation's mechanics under a stated model of the world; it is not evidence "
        "about real models.** Every number follows from the rules of a simulated world (§1) run through the real "
        "engine, and the world decides the result: §6 draws worlds from a stated prior and shows where co-evolving "
        "the rubric wins, ties and loses. What the page can show is whether the machinery does what the method "
        "says — audit evidence reaches the rewriters, the gates read what they should (§4) — and which "
        "assumptions about a task decide whether it pays (§8; for users: [when-to-co-evolve.md]"
        "(when-to-co-evolve.md)).", "",
        "    nice -n 10 python -m bench.mechanism.mechanism --only main --seeds $(seq -s, 0 19)  # §2-3",
        "    nice -n 10 python -m bench.mechanism.mechanism --only controls,sweep,gates --merge   # §5, §7",
        "    nice -n 10 python -m bench.mechanism.prior --methods skillopt,decoevo --resume  # §6, seed by seed",
        "    nice -n 10 python -m bench.mechanism.prior --methods skillopt,decoevo --worlds 300-323 --seeds 0-4 \\",
        "        --out bench/results/mechanism_prior_fit.json   # the co-evolve advice's fit worlds, never its measure",
        "    nice -n 19 python -m bench.mechanism.prior --prior transfer --methods skillopt,decoevo --seeds 0-9 "
        "# the advice's transfer test",
        "    python -m bench.mechanism.doc               # this page and docs/when-to-co-evolve.md", "",
        "The runs behind the page (every cell is a complete run of the engine, in process on a virtual clock; "
        "runs are deterministic per seed):", "",
        provenance(results, prior_results), "",
        "## 1. The world", "", prose("world"), "",
        "**Parameters** (`WorldParams`; the defaults are the `main` setting; the second group is off by default):",
        "", param_table(), "",
        f"**Run shape**: the paper preset's K = 4, M = 3, L = 6, H = 2, scaled to T = {mech.HYPER['steps']} steps "
        f"of {mech.HYPER['batch_size']} questions; splits {', '.join(f'{k} {v}' for k, v in mech.SPLITS.items())}; "
        "the engine's defaults otherwise. The seed draws both the world (names, weights) and the run.", "",
        f"## 2. The default world ({n} seeds)", "", main_md, "",
        "![gold and proxy after every step](mechanism_dynamics.png)", "",
        "*Gold (left) and proxy J (right) on the diagnostic split, mean over seeds. Redraw with "
        "`python -m bench.mechanism.mechanism --figure`.*", "",
        "## 3. The paper's directional claims, here", "",
        "In the default world, which makes naming a requirement free and the specification exact: a verdict says "
        "what this world shows, not what a real task will.", "", claims_section(results, tests), "",
        "## 4. Checks per pathway and policy, and what they do not catch (default test suite)", "",
        prose("checks"), "",
        "## 5. Controls and one-at-a-time sweep", "",
        "Core methods; each row moves one or two knobs from the defaults. Holm over the rows, per comparison.", "",
        sweep_section(results), "",
        "## 6. Worlds drawn from a stated prior", "",
    ]
    if prior_results:
        sh = prior_results["summary"]["shares"]["decoevo-skillopt"]
        lost = "loss" if sh["loss"] == 1 else "losses"
        parts += [
            "The prior is `decoevo.testing.truth_world_params.PRIOR`, committed before any world drawn from it was "
            "run: the requirement mix (what there is to find, and by which audit), the auditors (accuracy, "
            "position bias, style features a wrong preference can name) and the costs, each knob independently "
            "uniform over the values below (a value listed twice weighs twice), every other knob at its default:",
            "", advice.prior_table(), "",
            f"Worlds {min(prior_results['worlds'])}–{max(prior_results['worlds'])} are reported, none dropped, "
            f"{_seed_counts(prior_results)} seeds per world (of seeds {', '.join(map(str, prior_results['seeds']))}), "
            "paired by seed, Holm over the worlds. Headroom: the best expected gold a strategy naming real "
            "requirements reaches in the world, minus the initial strategy's (findable: hidden ones left out).",
            "", f"**DecoEvo against SkillOpt: {sh['win']} wins, {sh['tie']} ties, {sh['loss']} {lost} in "
            f"{sh['worlds']} worlds.** {advice.prior_result(prior_results)}", "", prior.tables(prior_results).strip(),
            "", "**The crowding-out flag (criterion drift) as a predictor of a loss**, over these worlds:", "",
            prior.drift_table(prior_results).strip(), ""]
    else:
        parts += ["Not run yet: `python -m bench.mechanism.prior`.", ""]
    parts += ["## 7. Gates against the truth (stress world, 5 seeds)", "",
              "Each solver decision is judged by the expected gold of its candidate; each generator decision by its "
              "consequence: the expected gold of a solver that follows every principle the generator's rubrics "
              "check (a decoy costs nothing unless the world makes principles costly).", "", gates, "",
              score_coupled_section(results), "",
              "## 8. Limitations: the assumptions that decide the result", "", prose("limits"),
              *prior_limits(prior_results), ""]
    return "\n".join(parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    results = json.loads((RESULTS / "mechanism.json").read_text(encoding="utf-8"))
    prior_path = RESULTS / "mechanism_prior.json"
    prior_results = json.loads(prior_path.read_text(encoding="utf-8")) if prior_path.is_file() else None
    pages = {DOC: render(results, prior_results), advice.PAGE: advice.render(results, prior_results)}
    for page, text in pages.items():
        if args.check:
            if page.read_text(encoding="utf-8") != text:
                print(f"{page.relative_to(ROOT)} is not what the results give: run python -m bench.mechanism.doc")
                sys.exit(1)
            continue
        page.write_text(text, encoding="utf-8")
        print(f"wrote {page}")


if __name__ == "__main__":
    main()
