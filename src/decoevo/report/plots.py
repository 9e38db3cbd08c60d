"""Figures as inline SVG: training dynamics (paper Figure 3), token use by role, one run's gate decisions
(J of incumbent and candidate per step, the outer rounds) and the test score per method.

matplotlib's object API with an Agg canvas and no pyplot, so nothing depends on (or changes) a global
backend and no display is needed. Text stays text in the SVG (selectable, and in the page's font), ids
are prefixed per figure so several figures can live in one HTML document, and the output is
deterministic (fixed hash salt, no date) so a report can be diffed.
"""

from __future__ import annotations

import io
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import matplotlib as mpl
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator
from scipy import stats as _sp

from ..analysis.costs import CostTable
from ..rundir.outcomes import Outcome, label
from ..rundir.records import DynamicsFile
from .labels import ROLE_COLORS, method_color, method_label, method_order

if TYPE_CHECKING:  # newer matplotlib only; annotations are never evaluated at run time here
    from matplotlib.typing import RcKeyType

_STYLE: dict[RcKeyType, Any] = {
    "svg.fonttype": "none",
    "font.family": "sans-serif",
    "font.sans-serif": ["Inter", "Helvetica Neue", "Arial", "DejaVu Sans"],
    "font.size": 9.5,
    "axes.edgecolor": "#cbd5e1",
    "axes.labelcolor": "#334155",
    "axes.titlesize": 10.5,
    "axes.titleweight": "bold",
    "axes.titlecolor": "#0f172a",
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.color": "#e2e8f0",
    "grid.linewidth": 0.7,
    "xtick.color": "#475569",
    "ytick.color": "#475569",
    "legend.frameon": False,
}


@dataclass(frozen=True)
class InlineFigure:
    """An inline SVG and what it shows (the alt text)."""

    key: str
    svg: str
    description: str


def _rc(key: str, grid_axis: str = "both") -> dict[RcKeyType, Any]:
    return {**_STYLE, "svg.hashsalt": key, "axes.grid.axis": grid_axis}


def _svg(fig: Figure, key: str, description: str) -> InlineFigure:
    FigureCanvasAgg(fig)
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None, "Creator": None})
    text = buf.getvalue()
    text = text[text.index("<svg"):]  # no XML declaration or DOCTYPE inside HTML
    prefix = re.sub(r"[^a-zA-Z0-9_-]", "-", key)
    text = re.sub(r'\bid="([^"]+)"', rf'id="{prefix}-\1"', text)
    text = re.sub(r"url\(#([^)]+)\)", rf"url(#{prefix}-\1)", text)
    text = re.sub(r'href="#([^"]+)"', rf'href="#{prefix}-\1"', text)
    # One canonical opening tag, sized by CSS (width 100%, height from the viewBox) to fit any window.
    head = re.match(r"<svg\b[^>]*>", text)
    view = re.search(r'viewBox="([^"]+)"', head.group(0)) if head else None
    if head is None or view is None:
        raise ValueError("matplotlib wrote an SVG without a viewBox")
    text = (f'<svg class="figure" role="img" aria-label="{_attr(description)}" viewBox="{view.group(1)}" '
            'xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink" version="1.1">'
            + text[head.end():])
    return InlineFigure(key, text, description)


def _attr(text: str) -> str:
    return text.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;").replace(">", "&gt;")


# ---- training dynamics ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Band:
    steps: tuple[int, ...]
    mean: tuple[float, ...]
    low: tuple[float, ...]  # 95% t interval over seeds; equal to the mean with one seed
    high: tuple[float, ...]
    n_seeds: int


def _step_series(points: Sequence[tuple[int, float | None]], grid: Sequence[int]) -> list[float]:
    """The score in force at each grid step: a checkpoint holds until the next accepted one."""
    out, current, i = [], math.nan, 0
    ordered = sorted(points)
    for x in grid:
        while i < len(ordered) and ordered[i][0] <= x:
            v = ordered[i][1]
            current = math.nan if v is None else float(v)
            i += 1
        out.append(current)
    return out


def band(runs: Sequence[tuple[DynamicsFile, int | None]], which: str) -> Band | None:
    """Mean over seeds with a 95% t band of `which` ("proxy" or "gold") on the union of steps.

    Each element is a seed's dynamics and the step its run ended at, so a flat tail after the last
    accepted checkpoint is drawn to the end of the run."""
    if not runs:
        return None
    ends = [max([p.step for p in d.points] + [end or 0]) for d, end in runs]
    grid = sorted({p.step for d, _ in runs for p in d.points} | set(ends))
    rows = []
    for (d, _), end in zip(runs, ends, strict=True):
        series = _step_series([(p.step, getattr(p, which)) for p in d.points], grid)
        rows.append([v if x <= end else math.nan for v, x in zip(series, grid, strict=True)])
    data = np.asarray(rows, dtype=float)
    mean, low, high, keep = [], [], [], []
    for j in range(len(grid)):
        col = data[:, j][~np.isnan(data[:, j])]
        if col.size == 0:
            continue
        m = float(col.mean())
        half = 0.0
        if col.size > 1:
            half = float(_sp.t.ppf(0.975, col.size - 1) * col.std(ddof=1) / math.sqrt(col.size))
        keep.append(grid[j])
        mean.append(m)
        low.append(m - half)
        high.append(m + half)
    if not keep:
        return None
    return Band(tuple(keep), tuple(mean), tuple(low), tuple(high), len(runs))


def dynamics_figure(key: str, title: str, by_method: Mapping[str, Sequence[tuple[DynamicsFile, int | None]]]
                    ) -> InlineFigure | None:
    """Two panels, gold (the comparable signal) and proxy (not calibrated across methods)."""
    methods = sorted((m for m, rs in by_method.items() if rs), key=method_order)
    if not methods:
        return None
    with mpl.rc_context(_rc(key)):
        fig = Figure(figsize=(9.2, 3.5), layout="constrained")
        axes = fig.subplots(1, 2, sharex=True)
        panels = (("gold", "Gold rubric (gold grader)"), ("proxy", "Generated-rubric proxy (training judge)"))
        for ax, (which, panel_title) in zip(axes, panels, strict=True):
            for m in methods:
                b = band(by_method[m], which)
                if b is None:
                    continue
                color = method_color(m)
                ax.plot(b.steps, b.mean, drawstyle="steps-post", color=color, linewidth=1.8,
                        label=f"{method_label(m)} (n={b.n_seeds})")
                ax.plot(b.steps, b.mean, linestyle="none", marker="o", markersize=3, color=color)
                if b.n_seeds > 1:
                    ax.fill_between(b.steps, b.low, b.high, step="post", color=color, alpha=0.14, linewidth=0)
            ax.set_title(panel_title, loc="left")
            ax.set_xlabel("inner step")
            ax.set_ylabel("score (0-100)")
            ax.xaxis.get_major_locator().set_params(integer=True)
        handles, labels = axes[0].get_legend_handles_labels()
        if not handles:
            handles, labels = axes[1].get_legend_handles_labels()
        fig.legend(handles, labels, loc="outside lower center", ncols=min(len(labels), 5) or 1)
        description = (f"{title}: gold-rubric and generated-rubric proxy scores of each accepted solver checkpoint "
                       f"over inner steps, for {', '.join(method_label(m) for m in methods)}; lines are means over "
                       "seeds with 95% confidence bands.")
        return _svg(fig, key, description)


# ---- cost ---------------------------------------------------------------------------------------------


def cost_figure(key: str, title: str, table: CostTable) -> InlineFigure | None:
    """Mean effective tokens per run by role, as a share of the baseline's total (or absolute without one)."""
    if not table.methods:
        return None
    base = next((m for m in table.methods if m.method == table.baseline), None)
    relative = base is not None and base.total.tokens > 0
    roles = sorted({role for m in table.methods for role in m.by_role})
    colors = {role: ROLE_COLORS[i % len(ROLE_COLORS)] for i, role in enumerate(roles)}
    methods = list(reversed(table.methods))  # top-down in table order
    with mpl.rc_context(_rc(key, grid_axis="x")):
        fig = Figure(figsize=(9.2, 0.5 + 0.42 * len(methods) + 0.5), layout="constrained")
        ax = fig.subplots()
        y = np.arange(len(methods))
        left = np.zeros(len(methods))
        for role in roles:
            rows = [m.by_role.get(role) for m in methods]
            widths = np.array([0.0 if r is None else (r.tokens_ratio or 0.0) if relative else r.tokens
                               for r in rows])
            ax.barh(y, widths, left=left, color=colors[role], height=0.62, label=role, linewidth=0)
            left += widths
        for yi, total in zip(y, left, strict=True):
            ax.text(float(total), float(yi), f"  {total:.2f}×" if relative else f"  {total:,.0f}", va="center",
                    color="#0f172a", fontsize=9)
        if relative:
            ax.axvline(1.0, color="#0f172a", linewidth=0.8, linestyle=(0, (3, 3)))
        ax.set_yticks(y, [method_label(m.method) for m in methods])
        ax.set_xlabel(f"tokens (in+out, effective) relative to {method_label(table.baseline)}'s total" if relative
                      else "tokens per run (in+out, effective)")
        ax.set_xlim(0, max(float(left.max()) * 1.15, 1.2 if relative else 1.0))
        ax.grid(axis="y", visible=False)
        if roles:  # no role used a token (every call a cache hit): no legend, and no matplotlib warning
            fig.legend(loc="outside lower center", ncols=min(len(roles), 6), fontsize=8.5)
        description = f"{title}: mean tokens per run by role" + \
            (f", relative to {method_label(table.baseline)}." if relative else ".")
        return _svg(fig, key, description)


# ---- one run's gates --------------------------------------------------------------------------------


@dataclass(frozen=True)
class GatePoint:
    """One inner step's solver gate: J of the incumbent and of the candidate on V_s, and the outcome."""

    step: int
    incumbent: float | None
    candidate: float | None
    outcome: Outcome


@dataclass(frozen=True)
class RoundMark:
    """One outer round, drawn after the inner step it followed, with its candidate's outcome."""

    after_step: int | None
    round: int
    outcome: Outcome


_ACCEPT, _REJECT, _INCUMBENT = "#15803d", "#b91c1c", "#1d4ed8"
# How an inner step's candidate is drawn: gated ones at their J, the others on the incumbent's line.
_STEP_MARK = {Outcome.ACCEPTED: ("o", _ACCEPT, 6.0), Outcome.REJECTED: ("x", _REJECT, 6.0),
              Outcome.INVALID: ("D", "#b45309", 4.0), Outcome.NO_CANDIDATE: ("o", "#94a3b8", 3.5)}
_ROUND_LINE = {Outcome.ACCEPTED: ("-", _ACCEPT), Outcome.REJECTED: ((0, (4, 3)), "#64748b"),
               Outcome.INVALID: ((0, (4, 1, 1, 1)), "#b45309"), Outcome.NO_CANDIDATE: ((0, (1, 3)), "#94a3b8")}


def gates_figure(key: str, name: str, points: Sequence[GatePoint], rounds: Sequence[RoundMark]
                 ) -> InlineFigure | None:
    """J of the incumbent (a step line) and of each candidate per inner step, the candidate marked by its
    outcome in the words of rundir/outcomes.py: accepted (filled circle), rejected (cross) at its J; invalid
    (never gated) and no candidate on the incumbent's line; each outer round a vertical line after its
    step, styled by its candidate's outcome. None for a run with no scored step."""
    scored = [p for p in points if p.incumbent is not None and p.candidate is not None]
    if not scored:
        return None
    # The incumbent's J at every step: measured where the gate ran, else carried from the last measure
    # (the accepted candidate's J after an acceptance), so the line spans the run.
    line: dict[int, float] = {}
    current: float | None = None
    for p in sorted(points, key=lambda q: q.step):
        if p.incumbent is not None:
            current = p.incumbent
        if current is not None:
            line[p.step] = current
        if p.outcome is Outcome.ACCEPTED and p.candidate is not None:
            current = p.candidate
    with mpl.rc_context(_rc(key, grid_axis="y")):
        fig = Figure(figsize=(9.2, 2.9), layout="constrained")
        ax = fig.subplots()
        ax.plot(list(line), list(line.values()), drawstyle="steps-mid", color=_INCUMBENT, linewidth=1.6,
                label="J incumbent")
        for outcome, (marker, color, size) in _STEP_MARK.items():
            gated = outcome in (Outcome.ACCEPTED, Outcome.REJECTED)
            at = [(p.step, p.candidate if gated else line.get(p.step)) for p in points if p.outcome is outcome]
            chosen = [(x, y) for x, y in at if y is not None]
            if chosen:
                ax.plot([x for x, _ in chosen], [y for _, y in chosen], linestyle="none", marker=marker,
                        markersize=size, color=color, markeredgewidth=1.6 if gated else 1.0,
                        label=f"candidate {label(outcome)}" if gated else f"step: {label(outcome)}")
        drawn: set[Outcome] = set()
        for r in rounds:
            if r.after_step is None:
                continue
            style, color = _ROUND_LINE[r.outcome]
            ax.axvline(r.after_step + 0.5, linestyle=style, color=color, linewidth=1.0,
                       label=f"outer round: {label(r.outcome)}" if r.outcome not in drawn else None)
            drawn.add(r.outcome)
        ax.set_xlabel("inner step (outer rounds drawn after the step they followed)")
        ax.set_ylabel("J on the solver gate set")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        fig.legend(loc="outside lower center", ncols=4, fontsize=8.5)
        count = {o: sum(p.outcome is o for p in points) for o in Outcome}
        description = (f"{name}: J of the incumbent and of the candidate on the solver gate set at each inner step "
                       f"({count[Outcome.ACCEPTED]} {label(Outcome.ACCEPTED)}, {count[Outcome.REJECTED]} "
                       f"{label(Outcome.REJECTED)}, {count[Outcome.INVALID]} {label(Outcome.INVALID)}, "
                       f"{count[Outcome.NO_CANDIDATE]} {label(Outcome.NO_CANDIDATE)}), and {len(rounds)} outer "
                       "round(s) of the generator.")
        return _svg(fig, key, description)


# ---- test score per method -----------------------------------------------------------------------


def grading_prompt_label(prompts: Sequence[str]) -> str:
    """Which prompt graded: the benchmark's official one (fetched, verbatim), decoevo's own, or both."""
    kinds = set(prompts) or {"ours"}
    if kinds == {"official"}:
        return "the benchmark's official grading prompt"
    return "decoevo's grading prompt" if kinds == {"ours"} else "official and decoevo's grading prompts"


def scores_figure(key: str, title: str, by_method: Mapping[str, Sequence[float]],
                  prompts: Sequence[str] = ()) -> InlineFigure | None:
    """The test score of each method: a bar at the mean over seeds and a dot per seed. `prompts`: the
    grading prompts behind the scores ("official", "ours"), said on the axis."""
    methods = sorted((m for m, v in by_method.items() if v), key=method_order)
    if not methods:
        return None
    shown = list(reversed(methods))  # first method on top
    with mpl.rc_context(_rc(key, grid_axis="x")):
        fig = Figure(figsize=(9.2, 0.7 + 0.42 * len(shown)), layout="constrained")
        ax = fig.subplots()
        for y, m in enumerate(shown):
            values = [float(v) for v in by_method[m]]
            mean = float(np.mean(values))
            ax.barh(y, mean, color=method_color(m), alpha=0.35, height=0.62, linewidth=0)
            ax.plot(values, [y] * len(values), linestyle="none", marker="o", markersize=4, color=method_color(m))
            ax.text(mean, y, f"  {mean:.1f} (n={len(values)})", va="center", color="#0f172a", fontsize=9)
        ax.set_yticks(range(len(shown)), [method_label(m) for m in shown])
        ax.set_xlabel(f"test score (0-100, gold rubric; {grading_prompt_label(prompts)})")
        top = max(float(v) for m in shown for v in by_method[m])
        ax.set_xlim(0, max(top * 1.25, 1.0))
        ax.grid(axis="y", visible=False)
        description = (f"{title}: test score per method, mean over seeds (bar) and each seed (dots), for "
                       f"{', '.join(method_label(m) for m in methods)}.")
        return _svg(fig, key, description)
