"""The first screen of a one-run report tells the truth about a run that is not finished (issue 45, part 2):
while it runs it says running (step, phase, ETA), not "what this run ships: the initial skill"; after it
stopped on an error it names the error and the `decoevo resume` command. A single user run's report leaves
the paper's claims out, heads with the run (not "1 run · 1 method · questions"), counts the calls a running
run has answered, and says the scale of a criterion's grade. Page-model tests, then headless Chromium."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shlex
import shutil
from html import unescape
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from decoevo.cli import app
from decoevo.report import build_report
from decoevo.report.grades import grade_text
from decoevo.report.lead import grid
from decoevo.report.render import environment, page
from decoevo.report.serve import ReportServer
from decoevo.rundir.records import CompareFile
from decoevo.testing.fake_openai import FakeOpenAI, Reply
from decoevo.testing.server import serve_app
from decoevo.testing.toy_server import toy_reply, toy_run_args, toy_server, write_toy_questions

from .chromium_helpers import SlowRun, devtools_browser, look_at
from .report_helpers import run_chromium

FAIL_AFTER = 40  # requests the server answers before it refuses the key: the run dies in its first steps


def _failing_server() -> FakeOpenAI:
    def reply(body: dict[str, Any], n: int) -> Reply:
        if n >= FAIL_AFTER:
            return Reply(status=401, error_message="Incorrect API key provided")
        return toy_reply(body, n)

    return FakeOpenAI(reply, models=("toy",))


@pytest.fixture
def failed_run(toy_env: Path) -> Path:
    data = write_toy_questions(toy_env / "toy.jsonl")
    with serve_app(_failing_server().app()) as url:
        done = CliRunner().invoke(app, toy_run_args(f"{url}/v1", data, toy_env / "runs", "broken", steps=3))
    assert done.exit_code != 0, done.output
    run = toy_env / "runs" / "broken"
    assert '"stopped"' in (run / "events.jsonl").read_text()  # it stopped on the error, not some other way
    return run


@pytest.fixture
def finished_run(toy_env: Path) -> Path:
    data = write_toy_questions(toy_env / "toy.jsonl")
    with serve_app(toy_server().app()) as url:
        done = CliRunner().invoke(app, toy_run_args(f"{url}/v1", data, toy_env / "runs", "mine", steps=2))
    assert done.exit_code == 0, done.output
    return toy_env / "runs" / "mine"


def _as_running(finished: Path, at: Path) -> Path:
    """A copy of a finished run as it was mid-run: no summary, its log cut after step 0, and a lock held by
    a live process (this one)."""
    shutil.copytree(finished, at)
    (at / "summary.json").unlink()
    lines = (at / "events.jsonl").read_text().splitlines()
    cut = next(i for i, line in enumerate(lines) if json.loads(line)["event"] == "inner_step")
    (at / "events.jsonl").write_text("\n".join(lines[:cut + 1]) + "\n")
    (at / ".lock").write_text(f"pid {os.getpid()} (decoevo run)\n")
    return at


def _first_section(html: str) -> str:
    """The text of the page's first section (the lead of a one-run report), tags stripped."""
    main = html.split("<main>", 1)[1]
    section = main.split("<section", 1)[1].split(">", 1)[1].split("</section>", 1)[0]
    return " ".join(re.sub(r"<[^>]+>", " ", section).split())


# ---- the page model -------------------------------------------------------------------------------

def test_a_failed_run_leads_with_its_error_and_the_resume_command(failed_run: Path) -> None:
    report = build_report([failed_run])
    lead = report.lead
    assert lead is not None and lead.state == "stopped", lead
    assert lead.title == "This run stopped before it finished"
    assert lead.stop is not None and lead.stop.category == "infrastructure" and "API key" in lead.stop.message
    assert lead.resume == shlex.join(["decoevo", "resume", str(failed_run)])
    first = _first_section(page(report))
    assert "What this run ships" not in first and "unchanged" not in first, first
    assert "Stopped on an error in step" in first and "of 3" in first and "API key" in first, first
    assert lead.resume in first and "Before and after" not in first, first
    # where the resume continues: the last checkpoint (none here: the key was refused inside step 1)
    point = lead.run.checkpoint
    assert (point is None and "a resume starts from step 1 with your initial solver skill" in first) or (
        point is not None and f"a resume continues from step {point[0] + 1}" in first), (point, first)


def test_a_running_run_leads_with_its_step_phase_and_eta(finished_run: Path, tmp_path: Path) -> None:
    run = _as_running(finished_run, tmp_path / "live")
    report = build_report([run])
    lead = report.lead
    assert lead is not None and lead.state == "running" and lead.progress is not None
    assert lead.step_line is not None and lead.step_line.startswith("step 2 of 2"), lead.step_line
    assert "model calls answered" in lead.step_line and "ETA" in lead.step_line
    first = _first_section(page(report))
    assert first.startswith("This run is still running") and "Running: step 2 of 2" in first, first
    assert "What this run ships" not in first and "unchanged" not in first and "Before and after" not in first
    assert "shipped" not in first, first  # not even in the diff's labels: nothing ships yet
    # the usage tile counts what the running run has answered, not the 0 of a ledger it has not written yet
    assert report.usage.running_runs == 1 and report.usage.running_calls == lead.progress.calls > 0
    tile = page(report).split('<div class="k">Model calls</div>', 1)[1]
    assert re.match(r'<div class="v">([^<]+)</div>', tile).group(1) != "0", tile[:200]  # type: ignore[union-attr]


def test_one_user_run_has_no_paper_claims_and_heads_with_the_run(finished_run: Path, tmp_path: Path) -> None:
    report = build_report([finished_run])
    html = page(report)
    assert report.claims == () and report.claims_fold is None
    assert "paper's claims" not in unescape(html).lower(), "a single user run's report shows the paper's claims"
    header = " ".join(re.sub(r"<[^>]+>", " ", html.split('<div class="sub">', 1)[1].split("</div>", 1)[0]).split())
    assert "1 run" not in header and "1 method" not in header and "mine" in header and "DecoEvo" in header, header
    assert "seed 3" in header and "finished" in header, header
    # two runs are an experiment: its claims are still checked
    shutil.copytree(finished_run, tmp_path / "second")
    assert build_report([finished_run, tmp_path / "second"]).claims != ()


@pytest.mark.parametrize(("value", "scheme", "text"), [
    (1.0, "healthbench", "met"), (0.0, "weighted", "not met"), (1.0, "writingbench", "1 of 1–10"),
    (7.0, "eqbench_cw", "7 of 0–20"), (3.0, "llmeval_med", "3 of 1–5"), (None, "healthbench", "?"),
    (2.0, "someone-elses", "2")])
def test_a_criterion_grade_says_its_scale(value: float | None, scheme: str, text: str) -> None:
    assert grade_text(value, scheme) == text


def test_the_compare_grid_shows_grades_on_their_scale() -> None:
    items = [{"index": 0, "criterion": "Gives safety advice", "points": 5, "value": 1.0, "rationale": "ok"},
             {"index": 1, "criterion": "Recommends surgery", "points": -3, "value": 0.0, "rationale": "no"}]
    side = {"response": "…", "score": 50.0, "grade": {"scheme": "weighted", "score": 50.0, "items": items}}
    cmp = CompareFile.model_validate({
        "name": "test", "kind": "test", "benchmark": "weighted", "method": "decoevo", "seed": 3,
        "before_version": 0, "after_version": 1, "n_questions": 1, "n_paired": 1,
        "before_score": 50.0, "after_score": 50.0, "mean_delta": 0.0,
        "rows": [{"question_id": "q1", "question": "knee?", "before": side, "after": side, "delta": 0.0}]})
    html = str(environment().get_template("compare.html.j2").module.compare_grid(cmp, grid(cmp)))  # type: ignore[attr-defined]
    table = html.split('class="compact criteria"', 1)[1].split("</table>", 1)[0]
    cells = [c.strip() for c in re.findall(r'<td class="n[^"]*">([^<]*)</td>', table)]
    assert cells == ["5", "met", "met", "-3", "not met", "not met"], cells


# ---- in a real browser ----------------------------------------------------------------------------

_FIRST_SCREEN = """(() => {
  const s = document.querySelector('main section');
  if (document.readyState !== 'complete' || !s) return '';
  const lead = s.querySelector('p.lead, .callout');
  const tile = [...document.querySelectorAll('.card')].find(c => c.querySelector('.k').textContent === 'Model calls');
  return JSON.stringify({href: location.href, id: s.id, heading: s.querySelector('h2').innerText,
    text: s.innerText, lead_bottom: lead ? lead.getBoundingClientRect().bottom : 1e9, viewport: innerHeight,
    header: document.querySelector('header').innerText, body: document.body.innerText,
    calls_tile: tile ? tile.querySelector('.v').textContent : null});
})()"""

_WINDOW = "--window-size=1280,800"


def _check_first_screen(seen: dict[str, Any]) -> None:
    """The section a reader sees first, its status line inside the first screen."""
    assert seen["id"] == "shipped" and seen["lead_bottom"] <= seen["viewport"], seen
    assert "What this run ships" not in seen["text"] and "unchanged" not in seen["text"], seen["text"]
    assert "paper's claims" not in seen["body"].lower() and "1 method" not in seen["header"], seen["header"]


def test_the_first_screen_in_chromium_after_a_failed_run(failed_run: Path, tmp_path: Path) -> None:
    html = page(build_report([failed_run]))
    probe = f"<script>document.addEventListener('DOMContentLoaded', () => {{ const pre = " \
            f"document.createElement('pre'); pre.id = 'first-screen'; pre.textContent = {_FIRST_SCREEN}; " \
            "document.body.appendChild(pre); });</script>"
    path = tmp_path / "failed.html"
    path.write_text(html.replace("</body>", probe.replace("document.readyState !== 'complete' || ", "") + "</body>"))
    done = run_chromium(_WINDOW, "--dump-dom", path.as_uri(), profile=tmp_path / "profile")
    found = re.search(r'<pre id="first-screen">(.*?)</pre>', done.stdout, re.DOTALL)
    assert found, done.stderr[-2000:]
    seen = json.loads(found.group(1).replace("&quot;", '"').replace("&lt;", "<").replace("&gt;", ">")
                      .replace("&amp;", "&"))
    _check_first_screen(seen)
    assert seen["heading"] == "This run stopped before it finished", seen["heading"]
    assert "Stopped on an error in step" in seen["text"] and "API key" in seen["text"], seen["text"]
    assert f"decoevo resume {failed_run}" in seen["text"], seen["text"]


def test_the_first_screen_in_chromium_during_a_run(tmp_path: Path) -> None:
    with (SlowRun(tmp_path) as slow, ReportServer([slow.run], port=0, interval=0.5) as server,
          devtools_browser(tmp_path / "profile", _WINDOW) as devtools):
        url = server.url
        seen = json.loads(asyncio.run(look_at(
            devtools, url, _FIRST_SCREEN, lambda value: bool(value) and json.loads(value)["href"] == url)))
    _check_first_screen(seen)
    assert seen["heading"] == "This run is still running", seen["heading"]
    assert re.search(r"Running: step \d of 6", seen["text"]) and "ETA" in seen["text"], seen["text"]
    assert "model calls answered" in seen["text"] and "working on" in seen["text"], seen["text"]
    assert seen["calls_tile"] not in (None, "0"), seen["body"][:3000]  # not 0 beside "N calls answered"
