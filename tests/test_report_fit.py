"""The report fits a 1280 px window: with every run's details open, no table, figure or block is wider than
its container (nothing hidden behind a horizontal scroll) and the page does not scroll sideways. Measured
in headless chromium on a sweep report with every table filled."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from decoevo.report import build_report, render

from .report_helpers import evaluate_sweep, make_sweep, run_chromium

# Opens every <details>, then lists each element whose content is wider than its box and is clipped or
# scrolled (overflow-x other than visible), and the document's width against the window's.
_MEASURE = """<script>
(() => {
  for (const d of document.querySelectorAll('details')) d.open = true;
  const clipped = [];
  for (const e of document.querySelectorAll('body *')) {
    const cs = getComputedStyle(e);
    if (cs.display === 'none' || cs.overflowX === 'visible') continue;
    if (e.scrollWidth > e.clientWidth + 1)
      clipped.push({tag: e.tagName, cls: String(e.className), over: e.scrollWidth - e.clientWidth,
                    text: e.textContent.replace(/\\s+/g, ' ').trim().slice(0, 80)});
  }
  const out = {viewport: document.documentElement.clientWidth, page: document.documentElement.scrollWidth,
               tables: document.querySelectorAll('table').length, clipped: clipped};
  const pre = document.createElement('pre'); pre.id = 'fit-result'; pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
})();
</script>"""


def measure(html: str, tmp_path: Path, width: int = 1280) -> dict[str, Any]:
    page = tmp_path / "measured.html"
    page.write_text(html.replace("</body>", _MEASURE + "</body>"), encoding="utf-8")
    done = run_chromium(f"--window-size={width},900", "--dump-dom", page.as_uri(), profile=tmp_path / "profile-fit")
    match = re.search(r'<pre id="fit-result">(.*?)</pre>', done.stdout, re.S)
    assert match, f"no measurement; stderr: {done.stderr[-2000:]}"
    text = match.group(1).replace("&quot;", '"').replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
    result: dict[str, Any] = json.loads(text)
    return result


@pytest.fixture(scope="module")
def sweep_html(tmp_path_factory) -> str:
    sweep = make_sweep(tmp_path_factory.mktemp("fit"), seeds=(0, 1))
    evaluate_sweep(sweep)
    return render(build_report([sweep]))


def test_a_sweep_report_fits_1280_px(sweep_html, tmp_path):
    fit = measure(sweep_html, tmp_path)
    assert fit["viewport"] == 1280 and fit["tables"] >= 10  # the page was laid out, with its tables
    assert fit["clipped"] == [], json.dumps(fit["clipped"], indent=1, ensure_ascii=False)
    assert fit["page"] <= fit["viewport"]


def test_a_one_run_report_fits_1280_px(tmp_path):
    """A report of one run shows it alone, with its transcripts; its gate tables fit too."""
    sweep = make_sweep(tmp_path / "one", methods=("decoevo",), seeds=(0,), benchmarks=("healthbench",))
    fit = measure(render(build_report([sweep / "runs" / "healthbench" / "decoevo-s0"])), tmp_path)
    assert fit["viewport"] == 1280 and fit["tables"] >= 5
    assert fit["clipped"] == [], json.dumps(fit["clipped"], indent=1, ensure_ascii=False)
    assert fit["page"] <= fit["viewport"]
