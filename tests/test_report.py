"""`decoevo report`: the tables match the runs' numbers, missing and damaged pieces are named instead of
crashing, the file is self-contained, and it renders with its figures in a real headless browser."""

from __future__ import annotations

import json
import math
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml
from scipy import stats as sps
from typer.testing import CliRunner

from decoevo.cli import app
from decoevo.report import ReportInputError, build_report, render, write
from decoevo.report.plots import band, dynamics_figure
from decoevo.report.tables import Column
from decoevo.rundir.records import DynamicsFile

from .report_helpers import GRADER, browser_probe, make_sweep, run_chromium, score, write_eval
from .result_files import result_file

SKIPPED = "writingbench/task_prior-s2"  # a cell with no evaluation files at all
SEEDS = (0, 1, 2)
COLUMNS = ("healthbench", "writingbench", "llmeval_med")


@pytest.fixture(scope="module")
def sweep(tmp_path_factory) -> Path:
    from .report_helpers import evaluate_sweep

    path = make_sweep(tmp_path_factory.mktemp("report"))
    evaluate_sweep(path, skip=(SKIPPED,))
    return path


@pytest.fixture(scope="module")
def report(sweep):
    return build_report([sweep])


@pytest.fixture(scope="module")
def html(report) -> str:
    return render(report)


@pytest.fixture
def small(tmp_path) -> Path:
    """A fresh two-run sweep (SkillOpt and DecoEvo, one seed) with no evaluation files."""
    return make_sweep(tmp_path, methods=("skillopt", "decoevo"), seeds=(0,), benchmarks=("healthbench",))


def seed_avg(method: str, seed: int) -> float:
    return float(np.mean([score(method, b, seed) for b in COLUMNS]))


def complete_seeds(method: str) -> list[int]:
    return [s for s in SEEDS if not (method == "task_prior" and s == 2)]


# ---- the tables --------------------------------------------------------------------------------------


def test_main_table_is_mean_and_sample_std_over_seeds(report):
    (section,) = report.sections
    t = section.data.main
    assert [c.label for c in t.columns] == ["HealthBench", "WritingBench", "LLMEval-Med†"]
    assert [r.method for r in t.rows] == ["skillopt", "sc_coevo", "decoevo"]  # ablations and controls apart
    for row in t.rows:
        for col, cell in zip(COLUMNS, row.cells, strict=True):
            values = [score(row.method, col, s) for s in SEEDS]
            assert cell.stat is not None and cell.stat.n == 3 and cell.missing == 0
            assert cell.stat.mean == pytest.approx(np.mean(values))
            assert cell.stat.std == pytest.approx(np.std(values, ddof=1))
        assert row.avg.stat.mean == pytest.approx(np.mean([seed_avg(row.method, s) for s in SEEDS]))
    de, so = t.rows[2], t.rows[0]
    assert so.reference and so.delta is None
    assert de.delta == pytest.approx(100 * (de.avg.stat.mean - so.avg.stat.mean) / so.avg.stat.mean)
    assert all(c.best for c in de.cells) and de.avg.best and not any(c.best for c in so.cells)


def test_ablation_and_control_tables(report):
    s = report.sections[0].data
    assert [r.method for r in s.ablations.rows] == ["decoevo", "no_verification"]
    assert s.ablations.delta_kind == "points"
    noval = s.ablations.rows[1]
    assert noval.delta == pytest.approx(np.mean([seed_avg("no_verification", x) for x in SEEDS])
                                        - np.mean([seed_avg("decoevo", x) for x in SEEDS]))
    assert [r.method for r in s.controls.rows] == ["skillopt", "decoevo", "task_prior"]
    tp = s.controls.rows[2]
    # the skipped cell: WritingBench has 2 of 3 seeds, and the average only covers the complete seeds
    wb = tp.cells[1]
    assert (wb.stat.n, wb.missing) == (2, 1)
    assert tp.avg.stat.n == 2 and tp.avg.missing == 1
    assert tp.avg.stat.mean == pytest.approx(np.mean([seed_avg("task_prior", x) for x in (0, 1)]))


def test_paired_comparisons_with_holm(report):
    comp = report.sections[0].data.comparisons
    assert comp.proposed == "decoevo"
    rows = {r.method: r for r in comp.rows}
    assert set(rows) == {"skillopt", "sc_coevo", "no_verification", "task_prior"}
    pvals = {}
    for m, row in rows.items():
        seeds = complete_seeds(m)
        diffs = np.array([seed_avg("decoevo", s) - seed_avg(m, s) for s in seeds])
        assert row.seeds == tuple(seeds) and row.ci.mean_diff == pytest.approx(diffs.mean())
        if diffs.std(ddof=1) > 1e-9:
            half = sps.t.ppf(0.975, len(diffs) - 1) * diffs.std(ddof=1) / math.sqrt(len(diffs))
            assert (row.ci.ci_low, row.ci.ci_high) == pytest.approx((diffs.mean() - half, diffs.mean() + half))
            assert row.ci.p_value == pytest.approx(sps.ttest_rel([seed_avg("decoevo", s) for s in seeds],
                                                                 [seed_avg(m, s) for s in seeds]).pvalue)
        pvals[m] = row.ci.p_value
    assert rows["task_prior"].unpaired == (2,)  # its seed 2 has no complete average; left out and said so
    # Holm within each family: the paper's prespecified one (DecoEvo vs SkillOpt; one backbone here, so one
    # comparison, unadjusted) and the exploratory rest, corrected among themselves
    assert rows["skillopt"].family == "primary" and rows["skillopt"].p_holm == pytest.approx(pvals["skillopt"])
    exploratory = {m: p for m, p in pvals.items() if m != "skillopt"}
    assert {rows[m].family for m in exploratory} == {"exploratory"}
    ordered = sorted(exploratory, key=exploratory.get)
    running = 0.0
    for i, m in enumerate(ordered):  # Holm's step-down adjustment, by hand
        running = max(running, min(1.0, (len(ordered) - i) * pvals[m]))
        assert rows[m].p_holm == pytest.approx(running)
        assert rows[m].reject == (running <= 0.05)


def test_alignment_and_costs(report, html):
    s = report.sections[0].data
    hb = next(a for a in s.alignment if a.benchmark == "healthbench")
    de = next(r for r in hb.rows if r.method == "decoevo")
    f1 = [100 * (0.42 + 0.01 * x) for x in SEEDS]
    assert de.f1.mean == pytest.approx(np.mean(f1)) and de.f1.std == pytest.approx(np.std(f1, ddof=1))
    assert de.n_questions == 15 and de.matchers == ("matcher-x",)
    wb = next(a for a in s.alignment if a.benchmark == "writingbench")
    assert [r.name for r in wb.missing] == [SKIPPED]
    # Runs share one cache: every WritingBench run inherits what the HealthBench runs paid for (the same toy
    # questions), yet its effective cost equals the HealthBench run's, so both cost tables agree.
    costs = {c.benchmark: c.table for c in s.costs}
    for m in costs["healthbench"].methods:
        other = costs["writingbench"].method(m.method)
        assert other.total.paid_calls == 0 < m.total.paid_calls + m.total.inherited_calls
        assert (other.total.calls, other.total.tokens) == pytest.approx((m.total.calls, m.total.tokens))
    assert costs["healthbench"].method("skillopt").total.tokens_ratio == 1.0
    assert costs["healthbench"].method("decoevo").total.tokens_ratio > 1.0


# ---- the HTML ----------------------------------------------------------------------------------------

_EXTERNAL = re.compile(r"""\b(?:src|href|action|poster)\s*=\s*["']?\s*(?:https?:)?//"""
                       r"""|url\(\s*["']?\s*(?:https?:)?//|@import|<link\b|<script\b[^>]*\bsrc=|<iframe\b""",
                       re.IGNORECASE)


def test_html_is_self_contained_with_unique_ids(html, report):
    for bad in ('<img src="https://cdn.example/x.png">', "<link rel=stylesheet href=a.css>", "url(//cdn/f.woff)",
                '<script src="app.js"></script>'):
        assert _EXTERNAL.search(bad), bad  # the check itself can fail
    assert _EXTERNAL.search(html) is None
    ids = re.findall(r'\bid="([^"]+)"', html)
    assert len(ids) == len(set(ids)), [i for i in set(ids) if ids.count(i) > 1][:5]
    for ref in set(re.findall(r'url\(#([^)]+)\)', html)) | set(re.findall(r'href="#([^"]+)"', html)):
        assert ref in ids, f"dangling reference #{ref}"
    (section,) = report.sections
    assert sorted(section.score_figures) == ["healthbench", "writingbench"] and len(report.run_figures) == 30
    # dynamics, cost and test score per method for both benchmarks; each run's gate decisions
    assert html.count('<svg class="figure"') == 6 + 30
    assert "<script" not in html


def test_html_content(html, report):
    assert "Main results" in html and "Paired comparisons" in html and "Ablations" in html
    assert "LLMEval-Med†" in html and "Gain vs SkillOpt" in html
    # the training judge is the tiny model (a note), the grader is not (no warning about the scores)
    assert "Tiny training-time judge" in html and f"The test scores come from {GRADER}" in html
    assert "Scores graded by the tiny embedded model" not in html
    # the skipped cell: named, linked, with why no command computes it (the fixture holds out no test split;
    # tests/test_report_hints.py runs the commands suggested where there is one)
    anchor = next(r.anchor for r in report.runs if r.name == SKIPPED)
    note = re.search(r"Test scores: not computed</strong>(.*?)</div>", html, re.S)
    assert note and f'href="#{anchor}"' in note.group(1) and "holds out no test split" in note.group(1)
    assert "Training dynamics: not computed</strong>" in html and "Rubric alignment: not computed</strong>" in html
    # per run: lineage with diffs, gate decisions, audits; SC-CoEvo's accepted generator version is there
    sc = next(r for r in report.runs if r.method == "sc_coevo")
    assert [v.version for v in sc.generator] == [0, 1] and sc.generator[1].diff.startswith("--- v000")
    assert sc.outer_gates[0].accepted is True and sc.outer_gates[0].policy == "score_coupled"
    de = next(r for r in report.runs if r.method == "decoevo")
    assert de.audits and de.audits[0].structural and de.audits[0].verification["decision"]["policy"] == "pareto"
    assert any(c.kind == "generator" for c in de.candidates)  # DecoEvo rejected the EASY generator
    assert '<pre class="diff"><span class="dh">--- v000</span>' in html
    assert "Verification on the generator gate" in html and "Near-tie contrastive audit (probe)" in html


def test_reports_without_any_evaluation(small, tmp_path):
    out = write(build_report([small]), tmp_path / "r.html")
    html = out.read_text()
    # sections with nothing to show are one line, each with the command that fills it (issue 34 item 5)
    folded = html[html.index('<p class="folded small" id="folded">'):html.index('<section id="overview">')]
    for title in ("Main results", "Training dynamics", "Rubric alignment"):
        assert f"<b>{title}</b>" in folded, (title, folded)
    # the claims have paired differences to show (tokens, from the ledgers), undecided: shown, not folded
    assert "<b>The paper&#39;s claims</b>" not in folded and 'id="claims"' in html
    assert "<b>Main results</b>: not computed: it holds out no test split" in folded, folded
    assert 'id="results"' not in html and 'id="dynamics"' not in html and 'id="alignment"' not in html
    assert "not computed</strong>" not in html[:html.index('<section id="runs">')]
    assert "Optimization cost" in html and '<svg class="figure"' in html  # cost needs only the ledgers
    assert "No gold-grader evaluation is\n    recorded yet" in html


def test_tiny_grader_warning(small):
    for run in (small / "runs" / "healthbench").iterdir():
        method, seed = run.name.rsplit("-s", 1)
        write_eval(run, "test", "healthbench", method, int(seed), 50.0, grader="smollm2-135m-instruct-q4_1")
    built = build_report([small])
    assert built.tiny_grader
    assert "Scores graded by the tiny embedded model (SmolLM2-135M) are not meaningful" in render(built)


def test_damaged_files_are_named_and_the_rest_is_reported(small):
    runs = small / "runs" / "healthbench"
    de, so = runs / "decoevo-s0", runs / "skillopt-s0"
    write_eval(de, "test", "healthbench", "decoevo", 0, 150.0)  # out of the 0-100 scale
    write_eval(so, "test", "healthbench", "skillopt", 0, 48.0)
    (de / "eval" / "dynamics.json").write_text("{not json")
    (so / "eval" / "alignment.json").write_text(json.dumps(
        {"method": "decoevo", "seed": 0, "precision": 0.1, "recall": 0.1, "f1": 0.1, "n_questions": 1}))
    with open(so / "events.jsonl", "a") as f:
        f.write("this is not json\n")
    n_events = len((so / "events.jsonl").read_text().splitlines())
    built = build_report([small])
    problems = "\n".join(built.problems)
    assert f"{de}/eval/test.json: field 'score': Input should be less than or equal to 100" in problems
    assert f"{de}/eval/dynamics.json: not valid JSON (line 1" in problems
    assert f"{so}/eval/alignment.json: belongs to decoevo/seed 0, but the run is skillopt/seed 0" in problems
    assert f"{so}/events.jsonl:{n_events}: not valid JSON" in problems
    so_run = next(r for r in built.runs if r.method == "skillopt")
    assert so_run.inner_gates and so_run.test_eval.score == 48.0  # the good lines and files still count
    main = built.sections[0].data.main
    assert [c.stat.mean if c.stat else None for r in main.rows for c in r.cells] == [48.0, None]
    html = render(built)
    assert "problems while reading the runs" in html and "field &#39;score&#39;" in html
    # raw JSON the engine wrote but a person edited: shown as it is, never a crash
    summary = json.loads((de / "summary.json").read_text())
    (de / "summary.json").write_text(json.dumps({**summary, "solver_version": "x", "steps_done": None}))
    verification = de / "audits" / "outer_000" / "verification.json"
    verification.write_text(json.dumps({"decision": "accepted?", "incumbent": {"structural": "high"}}))
    config = yaml.safe_load((de / "config.yaml").read_text())
    (de / "config.yaml").write_text(yaml.safe_dump({**config, "data": "somewhere", "hyper": [1, 2]}))
    html = " ".join(render(build_report([small])).split())
    assert "; solver — (1 accepted)" in html and "<th>structural</th><td>high → —</td>" in html


def test_other_splits_and_stale_evaluations(small):
    de = small / "runs" / "healthbench" / "decoevo-s0"
    write_eval(de, "test", "healthbench", "decoevo", 0, 51.0)
    write_eval(de, "diagnostic", "healthbench", "decoevo", 0, 99.0)  # `decoevo eval --split diagnostic`
    record = json.loads((de / "eval" / "diagnostic.json").read_text())
    (de / "eval" / "diagnostic.json").write_text(json.dumps({**record, "kind": "test"}))
    (de / "eval" / "ledger-test.json").write_text("{}")  # evaluation usage, not a grading
    built = build_report([small])
    assert built.problems == ()
    run = next(r for r in built.runs if r.method == "decoevo")
    assert set(run.evals) == {"test", "diagnostic"}  # shown under the run ...
    row = next(r for r in built.sections[0].data.main.rows if r.method == "decoevo")
    assert [c.stat.mean for c in row.cells] == [51.0]  # ... but only the test split is a result
    # a grading of another version than the one the run ships (`eval --skill-version 0`) is no result: it is
    # listed under the run by its version, and the run's score is not computed rather than that version's
    record = json.loads((de / "eval" / "test.json").read_text())
    other = 0 if record["skill_version"] != 0 else 1
    (de / "eval" / "test.json").write_text(json.dumps({**record, "skill_version": other}))
    built = build_report([small])
    run = next(r for r in built.runs if r.method == "decoevo")
    assert run.test_eval is None and "test" in run.evals and built.problems == ()
    row = next(r for r in built.sections[0].data.main.rows if r.method == "decoevo")
    assert all(c.stat is None for c in row.cells)
    assert f"v{other:03d}</span>{' initial' if other == 0 else ''}</td>" in render(built)


def test_sweep_benchmarks_sharing_a_gold_scheme_get_a_column_each(small):
    """Two benchmarks of one sweep graded under the same scheme (two HealthBench subsets here; two custom
    files alike) are two columns, named as the sweep names them; one column kept only the first."""
    runs = small / "runs"
    (runs / "healthbench").rename(runs / "hb_easy")
    shutil.copytree(runs / "hb_easy", runs / "hb_hard")
    for bench, offset in (("hb_easy", 0.0), ("hb_hard", -20.0)):
        for method, base in (("skillopt", 50.0), ("decoevo", 56.0)):
            write_eval(runs / bench / f"{method}-s0", "test", "healthbench", method, 0, base + offset)
    built = build_report([small])
    assert built.problems == ()
    main = built.sections[0].data.main
    assert [c.label for c in main.columns] == ["hb_easy", "hb_hard"]
    means = {r.method: [c.stat.mean for c in r.cells] for r in main.rows}
    assert means == {"skillopt": [50.0, 30.0], "decoevo": [56.0, 36.0]}
    assert {r.method: r.avg.stat.mean for r in main.rows} == {"skillopt": 40.0, "decoevo": 46.0}


def test_a_report_of_many_runs_keeps_a_few_transcripts_per_phase(small, monkeypatch):
    """A sweep's report showed 40 requests per phase of every run: 78 paper-scale runs made a 129 MB file
    and 3.2 GB of memory. It keeps fewer per run the more runs it covers, and still counts them all."""
    from collections import Counter

    from decoevo.report import model as report_model
    from decoevo.report.runs import transcripts_shown
    from decoevo.rundir import RunReader

    assert [transcripts_shown(n) for n in (1, 2, 10, 78)] == [40, 20, 4, 3]
    run = small / "runs" / "healthbench" / "decoevo-s0"
    made = Counter(e.phase or "unknown" for e in RunReader(run).transcripts())
    monkeypatch.setattr(report_model, "transcripts_shown", lambda n_runs: 1)
    built = build_report([run])
    (record,) = built.runs
    assert dict(record.transcript_counts) == dict(made)
    assert all(len(entries) == 1 for entries in record.transcripts.values())
    html = " ".join(render(built).split())
    assert f"{sum(made.values())} distinct requests, by phase" in html
    phase, n = made.most_common(1)[0]
    assert n > 1 and f"{phase} <span class=\"right\">{n} requests</span>" in html
    assert f"… and {n - 1} more in transcripts.jsonl.gz." in html


def write_graded_eval(run: Path, method: str, scores: list[float | None]) -> None:
    """eval/test.json with one HealthBench grade per question (None: the grader could not score it)."""
    items = [{"question_id": f"q{i}", "response": "…",
              "grade": {"question_id": f"q{i}", "scheme": "healthbench", "score": v, "items": [],
                        "details": {} if v is None else {"fraction": v / 100}}} for i, v in enumerate(scores)]
    graded = [v for v in scores if v is not None]
    data = {"name": "test", "kind": "test", "benchmark": "healthbench", "data": "/data/hb.jsonl",
            "format": "healthbench", "skill_version": 1, "method": method, "seed": 0, "grader_model": GRADER,
            "score": sum(graded) / len(graded), "n_graded": len(graded), "n_ungraded": len(scores) - len(graded),
            "details": {}, "items": items}
    (run / "eval").mkdir(exist_ok=True)
    (run / "eval" / "test.json").write_text(json.dumps(data))


def test_comparisons_are_paired_on_questions_graded_in_both_and_low_coverage_is_flagged(small):
    """Issue 9 item 10. DecoEvo's grader failed on q0 and q1, where SkillOpt scored 100: comparing the files'
    own scores (60 vs 55) would credit DecoEvo for questions it was never graded on; paired, it is 60 vs 50."""
    runs = small / "runs" / "healthbench"
    write_graded_eval(runs / "decoevo-s0", "decoevo", [None, None] + [60.0] * 18)
    write_graded_eval(runs / "skillopt-s0", "skillopt", [100.0, 100.0] + [50.0] * 18)
    built = build_report([small])
    s = built.sections[0].data
    (row,) = s.comparisons.rows
    assert row.method == "skillopt" and row.ci.mean_diff == pytest.approx(10.0)
    assert row.questions.format() == "18/20" and row.questions.low
    cells = {r.method: r.cells[0] for r in s.main.rows}
    assert cells["decoevo"].stat.mean == pytest.approx(60.0) and cells["decoevo"].coverage.format() == "18/20"
    # the headline too scores SkillOpt on the 18 questions graded for both (50, not its own 55)
    assert cells["skillopt"].stat.mean == pytest.approx(50.0) and cells["skillopt"].coverage.format() == "18/20"
    assert cells["decoevo"].coverage.low and cells["skillopt"].coverage.low
    assert s.low_coverage == ("SkillOpt on HealthBench: 18/20 questions graded for every method (90%, below 95%)",
                              "DecoEvo on HealthBench: 18/20 questions graded for every method (90%, below 95%)")
    html = render(built)
    assert "⚠ 18/20" in html and "rest on under 95% of their questions" in html
    assert "DecoEvo on HealthBench: 18/20 questions graded" in html


def test_backbones_duplicates_and_single_runs(small, tmp_path):
    de = small / "runs" / "healthbench" / "decoevo-s0"
    other = tmp_path / "other-model-run"
    shutil.copytree(de, other)
    config = yaml.safe_load((other / "config.yaml").read_text())
    config["lm"]["models"]["default"]["model"] = "qwen3-8b"
    (other / "config.yaml").write_text(yaml.safe_dump(config))
    twin = tmp_path / "twin"
    shutil.copytree(de, twin)
    for run in (de, twin):
        write_eval(run, "test", "healthbench", "decoevo", 0, 50.0)
    built = build_report([small, de, other, twin])  # de named twice: counted once
    assert len(built.runs) == 4
    assert [s.data.backbone for s in built.sections] == ["qwen3-8b", "smollm2-135m-instruct-q4_1"]
    assert any("Healthbench" in p or "HealthBench is evaluated in both" in p for p in built.problems)
    assert any("decoevo seed 0 given twice" in p for p in built.problems)  # the cost table refuses it
    html = render(built)
    assert 'id="backbone-1"' in html and 'id="backbone-2"' in html


def test_dynamics_band_holds_checkpoints_and_averages_seeds():
    def dyn(seed, points):
        return DynamicsFile(method="decoevo", seed=seed, points=[
            {"step": s, "skill_version": i, "proxy": 50.0, "gold": g} for i, (s, g) in enumerate(points)])

    a = dyn(0, [(0, 30.0), (2, 40.0)])
    b = dyn(1, [(0, 32.0), (1, 36.0), (2, None)])  # an ungraded checkpoint is a gap, not a 0
    out = band([(a, 3), (b, 3)], "gold")
    assert out.steps == (0, 1, 2, 3) and out.n_seeds == 2
    assert out.mean == pytest.approx((31.0, 33.0, 40.0, 40.0))  # b's gap leaves a alone at steps 2-3
    half = sps.t.ppf(0.975, 1) * np.std([30.0, 32.0], ddof=1) / math.sqrt(2)
    assert (out.low[0], out.high[0]) == pytest.approx((31.0 - half, 31.0 + half))
    assert out.low[2] == out.high[2] == 40.0  # one seed: no band
    fig = dynamics_figure("t", "test", {"decoevo": [(a, 3), (b, 3)]})
    assert fig is not None and fig.svg.startswith("<svg") and 'id="t-' in fig.svg and "DecoEvo (n=2)" in fig.svg


def test_column_labels():
    assert Column("eqbench_cw", True).label == "EQ-Bench CW†" and Column("healthbench", False).key == "healthbench"


# ---- the command -------------------------------------------------------------------------------------


def test_cli_writes_the_report(sweep, tmp_path):
    out = tmp_path / "out" / "report.html"
    result = CliRunner().invoke(app, ["report", str(sweep), "-o", str(out), "--title", "Sweep A"])
    assert result.exit_code == 0, result.output
    assert "wrote" in result.output and "30 runs" in result.output
    assert "<title>Sweep A</title>" in out.read_text()


@pytest.mark.parametrize(("make", "fragment"), [
    (lambda p: p / "missing", "no such directory"),
    (lambda p: p, "neither a run directory (no config.yaml) nor a sweep directory"),
])
def test_cli_bad_input_exits_2(tmp_path, make, fragment):
    result = CliRunner().invoke(app, ["report", str(make(tmp_path)), "-o", str(tmp_path / "r.html")])
    assert result.exit_code == 2 and fragment in " ".join(result.output.split()) and "Traceback" not in result.output


def test_empty_sweep_is_an_error(tmp_path):
    (tmp_path / "runs").mkdir()
    with pytest.raises(ReportInputError, match="no run directories"):
        build_report([tmp_path])


# ---- a real browser --------------------------------------------------------------------------------

def test_renders_in_headless_chromium_with_its_figures(html, tmp_path):
    from PIL import Image

    probe = browser_probe(html, tmp_path)
    assert probe["title"] == "DecoEvo report" and probe["tables"] >= 10 and probe["details"] == 30
    # every figure laid out at a real size, the 30 runs' gate decisions among them
    assert probe["figures"] == 36 and probe["sized"] == 36, probe
    assert all(n > 10 for n in probe["texts"]), probe  # axis labels and legends are there, as text
    assert probe["duplicate_ids"] == 0 and probe["resources"] == []  # nothing fetched from anywhere

    shot = tmp_path / "shot.png"
    page = tmp_path / "plain.html"
    page.write_text(html, encoding="utf-8")
    done = run_chromium("--window-size=1280,5200", f"--screenshot={shot}", page.as_uri(),
                        profile=tmp_path / "profile-shot")
    assert shot.is_file(), done.stderr[-2000:]
    img = np.asarray(Image.open(shot).convert("RGB"), dtype=int)
    assert img.shape[:2] == (5200, 1280)
    ink = (np.abs(img - 255).sum(axis=2) > 60).mean()
    assert 0.02 < ink < 0.6, ink  # text, tables and figures on a white page: neither blank nor a solid fill
    decoevo_blue = np.array([0x1D, 0x4E, 0xD8])  # DecoEvo's line and bar colour, only drawn in the figures
    assert (np.abs(img - decoevo_blue).sum(axis=2) < 30).sum() > 500


# ---- with the real evaluation commands ----------------------------------------------------------------


def test_report_reads_what_eval_dynamics_and_align_write(tmp_path, monkeypatch):
    """Toy runs trained and evaluated by the real commands (over the toy OpenAI-compatible server): the
    report fills every table from their files, and ignores the evaluation ledgers beside them."""
    pytest.importorskip("uvicorn")
    from decoevo.testing.server import serve_app
    from decoevo.testing.toy_server import toy_run_args, toy_server, write_toy_questions

    monkeypatch.setenv("DECOEVO_CACHE", str(tmp_path / "cache.sqlite"))
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    data = write_toy_questions(tmp_path / "toy.jsonl")
    splits = "splits={train: 5, probe: 2, solver_gate: 3, generator_gate: 3, diagnostic: 1, test: 2}"
    with serve_app(toy_server().app()) as url:
        for method in ("skillopt", "decoevo"):
            args = toy_run_args(f"{url}/v1", data, tmp_path / "runs", method, steps=2, sets=(splits,))
            result = runner.invoke(app, [*args, "--method", method])
            assert result.exit_code == 0, result.output
        runs = [str(tmp_path / "runs" / m) for m in ("skillopt", "decoevo")]
        for cmd in ("eval", "dynamics", "align"):
            result = runner.invoke(app, [cmd, *runs, "--grader-base-url", f"{url}/v1", "--grader-model", "toy"])
            assert result.exit_code == 0, result.output
    graded = result_file(tmp_path / "runs" / "decoevo")
    assert (graded.parent / f"ledger-{graded.stem}.json").is_file()

    built = build_report(runs)
    assert built.problems == ()
    (section,) = built.sections
    for run in built.runs:
        written = json.loads(result_file(run.path).read_text())
        row = next(r for r in section.data.main.rows if r.method == run.method)
        assert [c.label for c in section.data.main.columns] == ["Custom (weighted gold)"]
        assert row.cells[0].stat.mean == pytest.approx(written["score"])
        aligned = json.loads((run.path / "eval" / "alignment.json").read_text())
        a = next(r for t in section.data.alignment for r in t.rows if r.method == run.method)
        assert a.f1.mean == pytest.approx(100 * aligned["f1"])
        assert run.dynamics is not None and [p.step for p in run.dynamics.points] == [0, 1, 2]
    (dyn,) = section.dynamics
    assert dyn.figure is not None and not dyn.missing
    assert built.graders == ("toy",) and not built.tiny_grader
    out = tmp_path / "report.html"
    result = runner.invoke(app, ["report", *runs, "-o", str(out)])
    assert result.exit_code == 0 and "warning" not in result.output, result.output
    # dynamics, cost, the test score per method, and each run's gate decisions when a step was gated
    assert out.read_text().count('<svg class="figure"') == 3 + len(built.run_figures)
    assert len(built.sections[0].score_figures) == 1


def test_cost_section_shows_compute_parity_with_the_paired_decoevo_run(report, html, sweep):
    """Issue 17 item 6: each method's effective tokens over its paired DecoEvo run's, ±15% flagged."""
    from decoevo.analysis.costs import load_run_usage

    hb = next(c for c in report.sections[0].data.costs if c.benchmark == "healthbench")
    rows = {p.method: p for p in hb.parity}
    assert set(rows) == {"skillopt", "sc_coevo", "no_verification", "task_prior"}
    runs = sweep / "runs" / "healthbench"
    for method, row in rows.items():
        expected = tuple(load_run_usage(runs / f"{method}-s{s}").total.effective_tokens
                         / load_run_usage(runs / f"decoevo-s{s}").total.effective_tokens for s in SEEDS)
        assert row.ratios == pytest.approx(expected)
        assert row.matched == (abs(sum(expected) / 3 - 1) <= 0.15)
    assert rows["skillopt"].matched is False  # SkillOpt runs no audits: far below DecoEvo's compute
    assert "Compute parity with DecoEvo" in html and "not compute-matched" in html


def test_claims_section_checks_the_papers_claims_on_the_runs(report, html):
    """Issue 17 item 8. The fabricated scores put DecoEvo 4.5-5 points above SkillOpt in every column and
    SC-CoEvo 3 below it; alignment F1 is 12 points up for DecoEvo; no Direct Audit ran."""
    results = {c.claim.id: c for c in report.claims}
    every = results["decoevo_above_skillopt_every_setting"]
    assert every.verdict == "supported" and len(every.effects) == 3  # HealthBench, WritingBench, LLMEval-Med†
    hb = next(e for e in every.effects if e.setting.column == "healthbench")
    diffs = [score("decoevo", "healthbench", s) - score("skillopt", "healthbench", s) for s in SEEDS]
    assert hb.mean == pytest.approx(np.mean(diffs)) and hb.n == 3 and hb.ci_low > 0
    assert results["sc_coevo_below_skillopt_most"].verdict == "supported"
    assert results["alignment_f1_up"].verdict == "supported"
    assert results["direct_audit_between"].verdict == "not run"  # Table 3's Direct Audit was not run
    assert "not run" in html
    assert 'id="claims"' in html and 'href="#claims"' in html
    assert html.count('id="claim-') == len(report.claims)


def test_calls_sent_but_never_answered_are_marked_as_upper_bounds(small):
    runs = sorted((small / "runs" / "healthbench").iterdir())
    assert "never answered" not in render(build_report([small]))
    ledger_path = runs[0] / "ledger.json"
    ledger = json.loads(ledger_path.read_text())
    ledger["total"]["estimated_calls"] = 3  # as resume records them after a kill -9 (lm/journal.py)
    ledger_path.write_text(json.dumps(ledger))
    built = build_report([small])
    assert built.usage.estimated_calls == 3
    text = " ".join(render(built).split())
    assert "3 of the paid were sent and never answered (a killed run): their tokens are upper bounds" in text
    assert "3 of the paid calls were sent and never answered" in text  # and on that run's own line


# ---- one run's pictures ---------------------------------------------------------------------------------

def test_a_run_plots_j_per_step_with_its_decisions_and_rounds(small):
    from decoevo.report.plots import GatePoint, RoundMark, gates_figure, scores_figure
    from decoevo.rundir.outcomes import Outcome

    a, r, i, n = Outcome.ACCEPTED, Outcome.REJECTED, Outcome.INVALID, Outcome.NO_CANDIDATE
    points = [GatePoint(0, 0.40, 0.55, a), GatePoint(1, 0.55, 0.50, r), GatePoint(2, None, None, i),
              GatePoint(3, 0.55, 0.52, r), GatePoint(4, None, None, n)]
    fig = gates_figure("g", "r", points, [RoundMark(1, 0, r), RoundMark(3, 1, a), RoundMark(4, 2, i)])
    assert fig is not None
    assert ("(1 accepted, 2 rejected (incumbent kept), 1 invalid (not gated), 1 no candidate), and 3 outer round"
            in fig.description), fig.description
    for legend in ("J incumbent", "candidate accepted", "candidate rejected (incumbent kept)",
                   "step: invalid (not gated)", "step: no candidate", "outer round: rejected (incumbent kept)",
                   "outer round: accepted", "outer round: invalid (not gated)"):
        assert f">{legend}<" in fig.svg, legend  # text stays text in the SVG
    assert gates_figure("g", "r", [GatePoint(0, None, None, n)], []) is None  # nothing gated: no figure
    assert scores_figure("s", "t", {"decoevo": []}) is None

    run = small / "runs" / "healthbench" / "decoevo-s0"
    built = build_report([run])
    (record,) = built.runs
    assert record.outer_gates and all(g.after_step is not None for g in record.outer_gates)
    steps = [g.step for g in record.inner_gates]
    assert all(g.after_step in steps for g in record.outer_gates)  # drawn after the step they followed
    assert record.anchor in built.run_figures and built.sections[0].score_figures == {}  # no test score yet
    html = render(built)
    assert built.run_figures[record.anchor].svg in html

    write_eval(run, "test", "healthbench", "decoevo", 0, 64.0)
    write_eval(small / "runs" / "healthbench" / "skillopt-s0", "test", "healthbench", "skillopt", 0, 58.0)
    both = build_report([small])
    fig = both.sections[0].score_figures["healthbench"]
    assert "DecoEvo" in fig.description and "SkillOpt" in fig.description
    assert ">  64.0 (n=1)<" in fig.svg and ">  58.0 (n=1)<" in fig.svg


@pytest.mark.slow  # an ablation and control sweep (~15 s); Holm and Δ are unit-tested in the default run
def test_ablations_and_controls_on_their_source_columns_have_delta_and_holm(sweep, tmp_path):
    """Issue 25 item 1: in `reproduce` ablations and controls run on the source benchmark only. Their tables
    show that column with Δ and gain, and their paired comparisons (over the columns both methods have)
    join the exploratory Holm family; before, every row had "—" and "no seed has a complete average"."""
    copy = tmp_path / "sweep"
    shutil.copytree(sweep, copy)
    for method in ("no_verification", "task_prior"):
        for run in (copy / "runs" / "writingbench").glob(f"{method}-s*"):
            shutil.rmtree(run)
        for run in (copy / "runs" / "healthbench").glob(f"{method}-s*"):
            (run / "eval" / "transfer-llmeval_med.json").unlink()
    s = build_report([copy]).sections[0].data
    assert [c.label for c in s.ablations.columns] == ["HealthBench"]
    assert [c.label for c in s.controls.columns] == ["HealthBench"]
    hb = [score("no_verification", "healthbench", x) - score("decoevo", "healthbench", x) for x in SEEDS]
    assert s.ablations.rows[1].delta == pytest.approx(np.mean(hb))
    tp = s.controls.rows[2]
    so_hb = np.mean([score("skillopt", "healthbench", x) for x in SEEDS])
    assert tp.delta == pytest.approx(100 * (np.mean([score("task_prior", "healthbench", x) for x in SEEDS])
                                            - so_hb) / so_hb)
    assert s.main.rows[0].avg.stat is not None  # the main table still averages over every column
    rows = {r.method: r for r in s.comparisons.rows}
    for m in ("no_verification", "task_prior"):
        assert rows[m].columns == ("HealthBench",) and rows[m].seeds == SEEDS
        diffs = [score("decoevo", "healthbench", x) - score(m, "healthbench", x) for x in SEEDS]
        assert rows[m].ci.mean_diff == pytest.approx(np.mean(diffs))
        assert rows[m].p_holm is not None and rows[m].family == "exploratory"
    assert rows["sc_coevo"].columns == ("HealthBench", "WritingBench", "LLMEval-Med†")
    assert "on HealthBench" in render(build_report([copy]))


def test_two_transfers_of_one_format_get_a_column_each(sweep, tmp_path):
    """Issue 25 item 6: two JSONL transfers (both the weighted scheme) were one column, one of them dropped
    as "evaluated in both"; a transfer's column is its file's name."""
    copy = tmp_path / "sweep"
    shutil.copytree(sweep, copy)
    for run in sorted((copy / "runs").glob("*/*")):
        for old in (run / "eval").glob("transfer-*.json"):
            old.unlink()
        method, seed = run.name.rsplit("-s", 1)
        target = {"healthbench": "llmeval_med", "writingbench": "eqbench_cw"}[run.parent.name]
        if (run / "eval" / "test.json").is_file():
            write_eval(run, f"transfer-{target}", "weighted", method, int(seed), 40.0 + int(seed))
    s = build_report([copy]).sections[0].data
    transfer = [c for c in s.main.columns if c.transfer]
    assert sorted(c.key for c in transfer) == ["transfer-eqbench_cw", "transfer-llmeval_med"]
    assert not [p for p in s.problems if "evaluated in both" in p]


def test_a_skill_diff_marks_each_line_by_its_kind_and_an_empty_one_says_so():
    """The report's skill diffs: added, removed, hunk and context lines each get their own class (the
    colours a reader goes by), and a diff without a change says so instead of printing nothing or None."""
    from decoevo.report.render import _diff

    html = str(_diff("--- a\n+++ b\n@@ -1 +1 @@\n-old rule\n+new rule\n same"))
    assert '<span class="dd">-old rule</span>' in html and '<span class="da">+new rule</span>' in html
    assert '<span class="dc"> same</span>' in html and '<span class="dk">@@ -1 +1 @@</span>' in html
    assert html.count('class="dh"') == 2
    for empty in (None, "", "\n  \n"):
        assert "no textual change" in str(_diff(empty))
