"""Render a `Report` to one self-contained HTML file: inline CSS, inline SVG figures, no script, and no
reference to anything outside the file (so it opens offline, attaches to an issue, and archives)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup, escape

from ..analysis.criterion_drift import AS_LOSS_PREDICTOR
from ..analysis.stats import MeanStd
from ..fileio import atomic_write_text
from ..redact import mask_secrets, register_environment_secrets
from ..rundir.outcomes import Outcome, label
from .hints import next_steps
from .labels import benchmark_label, method_color, method_description, method_label
from .lead import grid
from .model import Report

CLIP = 1500  # characters of a model response shown before it is cut (the run directory has it all)


def _ms(stat: MeanStd | None, digits: int = 1) -> Markup:
    if stat is None:
        return Markup('<span class="na">—</span>')
    mean = f"{stat.mean:.{digits}f}"
    if stat.std is None:
        return Markup(f'{mean}<span class="sd" title="one seed: no standard deviation">&#8201;(n=1)</span>')
    return Markup(f'{mean}<span class="sd">&#8201;±&#8201;{stat.std:.{digits + 1}f}</span>')


def _num(x: float | int | None) -> str:
    """1234 -> 1.2k, as the paper writes calls and tokens."""
    if x is None:
        return "—"
    for scale, suffix in ((1e9, "B"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= scale:
            return f"{x / scale:.1f}{suffix}"
    return f"{x:.0f}" if float(x).is_integer() else f"{x:.1f}"


def _signed(x: float | None, digits: int = 2, suffix: str = "") -> str:
    return "—" if x is None else f"{x:+.{digits}f}{suffix}"


def _pvalue(p: float | None) -> str:
    if p is None:
        return "—"
    return "< 0.001" if p < 0.001 else f"{p:.3f}"


def _ratio(x: float | None) -> str:
    return "—" if x is None else f"{x:.2f}×"


def _clip(text: Any, limit: int = CLIP) -> str:
    s = str(text)
    return s if len(s) <= limit else f"{s[:limit]}… [{len(s) - limit:,} more characters in the run directory]"


def _diff(text: str | None) -> Markup:
    """A unified diff with added/removed lines marked for styling."""
    if not text or not text.strip():
        return Markup('<p class="muted">no textual change</p>')
    lines = []
    for line in text.rstrip("\n").split("\n"):
        if line.startswith(("+++", "---")):
            cls = "dh"
        elif line.startswith("@@"):
            cls = "dk"
        elif line.startswith("+"):
            cls = "da"
        elif line.startswith("-"):
            cls = "dd"
        else:
            cls = "dc"
        lines.append(f'<span class="{cls}">{escape(line) or " "}</span>')
    return Markup('<pre class="diff">' + "".join(lines) + "</pre>")  # the spans are blocks: no newlines


def _ticks(text: str) -> Markup:
    """Plain text with `backticked` spans set as code (the notes are written for the terminal too)."""
    parts = str(text).split("`")
    return Markup("").join(Markup("<code>{}</code>").format(p) if i % 2 else escape(p) for i, p in enumerate(parts))


def _ver(x: Any) -> str:
    """A skill version as the run directory names it (v003); '—' for anything that is not a version."""
    return f"v{x:03d}" if isinstance(x, int) and not isinstance(x, bool) and x >= 0 else "—"


def _fixed(x: Any, digits: int = 3) -> str:
    """A number from a raw JSON file; anything else shown as it is rather than breaking the page."""
    if isinstance(x, int | float) and not isinstance(x, bool):
        return f"{x:.{digits}f}"
    return "—" if x is None else str(x)


def _pretty(obj: Any, limit: int = 20000) -> str:
    return _clip(json.dumps(obj, indent=2, ensure_ascii=False, default=str), limit)


def _seeds(seeds: Any) -> str:
    return ", ".join("—" if s is None else str(s) for s in seeds) or "none"


_BADGE = {Outcome.ACCEPTED: "ok", Outcome.REJECTED: "no", Outcome.INVALID: "warn", Outcome.NO_CANDIDATE: ""}


def _outcome(outcome: Outcome) -> Markup:
    """A candidate's outcome as a badge, in the words the terminal uses (rundir/outcomes.py)."""
    return Markup(f'<span class="badge {_BADGE[outcome]}">{escape(label(outcome))}</span>')


def _decided(accepted: object) -> Markup:
    """A verification record's decision (accepted or not) as the outcome badge."""
    return _outcome(Outcome.ACCEPTED if accepted else Outcome.REJECTED)


def environment() -> Environment:
    env = Environment(loader=PackageLoader("decoevo.report", "templates"), autoescape=True,
                      undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters.update(ms=_ms, num=_num, signed=_signed, pvalue=_pvalue, ratio=_ratio, clip=_clip, diff=_diff,
                       pretty=_pretty, ticks=_ticks, seeds=_seeds, ver=_ver, fixed=_fixed, method=method_label,
                       bench=benchmark_label, outcome=_outcome, decided=_decided)
    env.globals.update(method_color=method_color, method_description=method_description, next_steps=next_steps,
                       drift_as_predictor=AS_LOSS_PREDICTOR, compare_pairs=grid)
    return env


def render(report: Report) -> str:
    return environment().get_template("report.html.j2").render(r=report)


def page(report: Report) -> str:
    """The HTML as it leaves this process: rendered, with every known secret masked."""
    register_environment_secrets()  # runs made by an older version may hold a key this process has
    return mask_secrets(render(report))


def write(report: Report, output: Path | str) -> Path:
    """Render and write atomically (a reader never opens half a report)."""
    path = Path(output)
    atomic_write_text(path, page(report), fsync=False)
    return path
