"""What a user takes home from one run: every grading kept (one file per skill version and grader), the
initial and the shipped skill compared per question (`decoevo compare`), and a report that opens on the
shipped skill, its diff and its before/after result. Driven through the CLI against the toy server."""

from __future__ import annotations

import json
import re
from html import unescape
from html.parser import HTMLParser
from pathlib import Path

import pytest
from scipy import stats
from typer.testing import CliRunner, Result

from decoevo.cli import app
from decoevo.testing.server import serve_app
from decoevo.testing.toy_server import toy_run_args, toy_server, write_toy_questions

from .report_helpers import run_chromium

pytest.importorskip("uvicorn")
runner = CliRunner()

SPLITS = "splits={train: 4, probe: 2, solver_gate: 3, generator_gate: 3, test: 4}"


@pytest.fixture
def toy_env(toy_env: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """conftest's, at the 80 columns these tests read the terminal at."""
    monkeypatch.setenv("COLUMNS", "80")
    return toy_env


def _paid(path: Path) -> int:
    return sum(1 for line in path.read_text().splitlines() if not json.loads(line)["cached"]) if path.exists() else 0


def _said(output: str) -> str:
    return " ".join(output.split())


class _Sections(HTMLParser):
    """The ids of <main>'s top-level sections and the folded line's text, in page order."""

    def __init__(self) -> None:
        super().__init__()
        self.sections: list[str] = []
        self.in_main = False
        self.folded: list[str] = []
        self._in_folded = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "main":
            self.in_main = True
        elif tag == "section" and self.in_main and a.get("id"):
            self.sections.append(str(a["id"]))
        elif tag == "p" and a.get("id") == "folded":
            self._in_folded = True

    def handle_endtag(self, tag: str) -> None:
        if tag == "p":
            self._in_folded = False

    def handle_data(self, data: str) -> None:
        if self._in_folded:
            self.folded.append(data)


def _train_on_the_toy_world(toy_env: Path, url: str) -> tuple[Result, Path]:
    """A two-step run on the toy world served at `url`: the CLI's result and the run's folder."""
    data = write_toy_questions(toy_env / "toy.jsonl")
    trained = runner.invoke(app, toy_run_args(f"{url}/v1", data, toy_env / "runs", "mine", steps=2,
                                              sets=(SPLITS,)))
    assert trained.exit_code == 0, trained.output
    return trained, toy_env / "runs" / "mine"


def test_run_eval_both_versions_compare_and_report_keep_everything(toy_env: Path) -> None:
    with serve_app(toy_server().app()) as url:
        trained, run = _train_on_the_toy_world(toy_env, url)
        # the run's next lines lead to the comparison, first, before export and report
        after_next = trained.output.split("next:")[1]
        commands = [line.strip() for line in after_next.splitlines() if line.strip().startswith("decoevo ")]
        assert commands[0] == f"decoevo compare {run}", after_next
        assert "--grader-model" in after_next

        grader = ["--grader-base-url", f"{url}/v1", "--grader-model", "toy"]
        final = runner.invoke(app, ["eval", str(run), *grader])
        assert final.exit_code == 0, final.output
        assert "solver v001 (shipped): score 100.0" in _said(final.output)
        shipped_file = run / "eval" / "test-v001-toy-ours.json"
        kept = shipped_file.read_bytes()

        initial = runner.invoke(app, ["eval", str(run), "--skill-version", "0", *grader])
        assert initial.exit_code == 0, initial.output
        assert "solver v000 (initial): score 28.6" in _said(initial.output)
        initial_file = run / "eval" / "test-v000-toy-ours.json"
        assert shipped_file.read_bytes() == kept  # never overwritten by another version's grading
        v0 = json.loads(initial_file.read_text())
        assert v0["skill_version"] == 0 and v0["n_graded"] == 4
        paid = _paid(run / "eval" / "calls.jsonl")

        compared = runner.invoke(app, ["compare", str(run), *grader])
        assert compared.exit_code == 0, compared.output
        # both skills were already answered and graded with this grader: nothing is paid again
        assert _paid(run / "eval" / "calls.jsonl") == paid
    assert shipped_file.read_bytes() == kept and json.loads(initial_file.read_text()) == v0

    record = json.loads((run / "eval" / "compare-test-v000-v001-toy-ours.json").read_text())
    test_ids = json.loads((run / "splits.json").read_text())["test"]
    assert [r["question_id"] for r in record["rows"]] == test_ids
    by_id = {i["question_id"]: i["grade"]["score"] for i in v0["items"]}
    assert {r["question_id"]: r["before"]["score"] for r in record["rows"]} == by_id  # the same grades as eval's
    assert all(r["after"]["score"] == pytest.approx(100.0) for r in record["rows"])
    assert all(r["changed"] and all(c["before"] == 0 and c["after"] == 1 for c in r["changed"])
               for r in record["rows"])
    deltas = [r["after"]["score"] - r["before"]["score"] for r in record["rows"]]
    assert record["n_paired"] == 4 and record["mean_delta"] == pytest.approx(sum(deltas) / 4)
    assert record["ci_low"] <= record["mean_delta"] <= record["ci_high"]
    assert record["self_graded"] is True

    # the terminal: one row per question within 80 columns, the mean with its CI, the grader's label and
    # the independent grader recommended
    lines = compared.output.splitlines()
    rows = [line for line in lines if any(line.startswith(f"{q}:") for q in test_ids)]
    assert len(rows) == 4 and all(re.search(r"28\.6 +100\.0 +\+71\.4", line) for line in rows), compared.output
    start = lines.index(next(line for line in lines if line.startswith("question")))
    end = lines.index(next(line for line in lines if line.startswith("mean (")))
    assert end - start >= 5 and all(len(line) <= 80 for line in lines[start:end + 1]), compared.output
    assert re.search(r"mean \(4 paired\) +28\.6 +100\.0 +\+71\.4 +95% CI \[\+71\.4, \+71\.4\]", compared.output)
    assert "self-graded, not an independent result" in _said(compared.output)
    assert f"decoevo compare {run} --grader-model MODEL" in compared.output

    before = {p: p.read_bytes() for p in (run / "eval").rglob("*") if p.is_file()}
    reported = runner.invoke(app, ["report", str(run), "-o", str(toy_env / "report.html")])
    assert reported.exit_code == 0, reported.output
    assert "(1 run, " in reported.output  # not "1 runs"
    assert {p: p.read_bytes() for p in (run / "eval").rglob("*") if p.is_file()} == before  # reading never writes
    html = (toy_env / "report.html").read_text()
    page = _Sections()
    page.feed(html)
    # the first screen: what ships, its diff and the before/after result, then the overview
    assert page.sections[:2] == ["shipped", "overview"], page.sections
    shipped = html[html.index('<section id="shipped">'):html.index('<section id="overview">')]
    assert "v000</span> 28.6" in shipped and "v001</span> 100.0" in shipped and "Δ +71.4" in shipped
    assert "paired 95% CI [+71.4, +71.4]" in shipped and 'class="diff"' in shipped
    assert "the differences have zero variance) over 4 of 4 questions" in shipped
    assert all(q in shipped for q in test_ids) and "self-graded, not an independent result" in shipped
    # the run's result is the shipped skill's grading, the initial one is labelled by its version
    assert re.search(r"test 100\.0 \(v001\)</span></summary>", html)
    assert "eval/test-v000-toy-ours.json" in html and "eval/test-v001-toy-ours.json" in html
    assert "gold grader (test) in 1 run<" in html  # two gradings of one run are one run
    # a grader's model name under an upper-cased column head is shown as written, and the score axis names
    # the prompt that graded (here decoevo's own), not an "official grader"
    assert re.search(r"th \.grader \{[^}]*text-transform: none", html)
    assert "decoevo&#39;s grading prompt" in html or "decoevo's grading prompt" in html
    assert "official grader" not in html
    assert re.search(r'<span class="grader small muted" title="gold grader of this column">toy</span>', html)
    # sections with nothing to show are one line; the paper's claims are left to reports of an experiment
    folded = " ".join("".join(page.folded).split())
    assert "Training dynamics" in folded and "Paired comparisons" in folded
    assert "paper's claims" not in unescape(html).lower()  # not even folded into a line
    assert "claims" not in page.sections and "dynamics" not in page.sections
    assert 'class="callout note notcomputed"' not in html[:html.index('<section id="runs">')]


_FIRST_SCREEN = """<script>
(() => {
  const h = window.innerHeight, seen = [];
  for (const el of document.querySelectorAll('main > section, main > p')) {
    const r = el.getBoundingClientRect();
    if (r.top < h && r.height > 0) seen.push(el.id || el.className);
  }
  const pre = document.createElement('pre'); pre.id = 'first-screen'; pre.textContent = JSON.stringify(seen);
  document.body.appendChild(pre);
})();
</script>"""


@pytest.mark.slow  # a run, a comparison and Chromium (~10 s); the default run checks the page's order in its HTML
def test_the_first_screen_in_chromium_is_the_shipped_skill(toy_env: Path) -> None:
    with serve_app(toy_server().app()) as url:
        _, run = _train_on_the_toy_world(toy_env, url)
        done = runner.invoke(app, ["compare", str(run), "--grader-base-url", f"{url}/v1", "--grader-model", "toy"])
        assert done.exit_code == 0, done.output
    assert runner.invoke(app, ["report", str(run), "-o", str(toy_env / "r.html")]).exit_code == 0
    page = toy_env / "probe.html"
    page.write_text((toy_env / "r.html").read_text().replace("</body>", _FIRST_SCREEN + "</body>"))
    shown = run_chromium("--window-size=1280,800", "--dump-dom", page.as_uri(), profile=toy_env / "profile")
    match = re.search(r'<pre id="first-screen">(.*?)</pre>', shown.stdout)
    assert match, shown.stderr[-2000:]
    seen = json.loads(match.group(1).replace("&quot;", '"'))
    assert seen[0] == "shipped", seen  # the first thing a user sees is what the run ships


def test_a_paired_ci_over_questions_matches_scipy() -> None:
    from decoevo.evaluation.compare import paired_summary

    def row(qid: str, before: float | None, after: float | None) -> dict:
        return {"question_id": qid, "before": {"score": before}, "after": {"score": after}}

    rows = [row("a", 10, 30), row("b", 50, 45), row("c", 20, 60), row("d", None, 90), row("e", 70, 71)]
    got = paired_summary(rows)
    diffs = [20, -5, 40, 1]  # d is ungraded under the initial skill: it counts for neither side
    t = stats.ttest_rel([30, 45, 60, 71], [10, 50, 20, 70])
    ci = t.confidence_interval(0.95)
    assert got["n_questions"] == 5 and got["n_paired"] == 4
    assert got["mean_delta"] == pytest.approx(sum(diffs) / 4)
    assert (got["ci_low"], got["ci_high"]) == (pytest.approx(ci.low), pytest.approx(ci.high))
    assert got["p_value"] == pytest.approx(t.pvalue)
    assert got["before_score"] == pytest.approx(37.5) and got["after_score"] == pytest.approx(51.5)
    assert paired_summary([row("a", None, 3)])["note"] == "no question was graded under both skills"
