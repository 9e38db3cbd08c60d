"""Display names, method groups, orders and colours: what the report shows, never what it computes."""

from __future__ import annotations

from ..benchmarks import BENCHMARKS, find
from ..methods import METHODS

BASELINE = "skillopt"
PROPOSED = "decoevo"

# The report's sections come from each method's own group (methods.py), in the registry's order.
MAIN = tuple(m.name for m in METHODS.values() if m.group in ("baseline", "method"))
ABLATIONS = tuple(m.name for m in METHODS.values() if m.group == "ablation")
CONTROLS = tuple(m.name for m in METHODS.values() if m.group == "control")

_METHOD_LABELS = {
    "zero_shot": "Zero-shot", "skillopt": "SkillOpt", "sc_coevo": "SC-CoEvo", "decoevo": "DecoEvo",
    "no_structural": "w/o structural audit", "no_contrastive": "w/o contrastive audit",
    "no_rubric_blind": "w/o rubric-blind preference", "random_pairs": "random pairs (no near-ties)",
    "no_verification": "w/o verification", "no_distillation": "w/o distillation",
    "task_prior": "Task-Prior", "budget_matched": "Budget-Matched", "direct_audit": "Direct Audit",
}

# The registry's order, which is the paper's column order (users' own data has no column of its own).
BENCHMARK_ORDER = tuple(b.name for b in BENCHMARKS.values() if b.source is not None)

# One colour per method in every figure, so a reader can follow a method from plot to plot.
_COLORS = {
    "decoevo": "#1d4ed8", "skillopt": "#475569", "sc_coevo": "#c2410c", "zero_shot": "#94a3b8",
    "no_structural": "#0f766e", "no_contrastive": "#7c3aed", "no_rubric_blind": "#be185d",
    "random_pairs": "#a16207", "no_verification": "#b91c1c", "no_distillation": "#0e7490",
    "task_prior": "#15803d", "budget_matched": "#6d28d9", "direct_audit": "#9a3412",
}
_SPARE_COLORS = ("#0369a1", "#4d7c0f", "#a21caf", "#c026d3", "#0891b2", "#65a30d")

ROLE_COLORS = ("#1d4ed8", "#0f766e", "#c2410c", "#7c3aed", "#a16207", "#be185d", "#0e7490", "#4d7c0f",
               "#475569", "#b91c1c", "#6d28d9", "#15803d")


def method_label(name: str) -> str:
    return _METHOD_LABELS.get(name, name)


def method_description(name: str) -> str:
    spec = METHODS.get(name)
    return spec.description if spec is not None else "a method this version of decoevo does not define"


def method_order(name: str) -> tuple[int, str]:
    known = [*MAIN, *ABLATIONS, *CONTROLS, *METHODS]
    return (known.index(name), "") if name in known else (len(known), name)


def method_color(name: str) -> str:
    if name in _COLORS:
        return _COLORS[name]
    return _SPARE_COLORS[sum(map(ord, name)) % len(_SPARE_COLORS)]


def benchmark_label(name: str) -> str:
    """A benchmark's display name, by format name or gold scheme; a sweep's own benchmark names as given."""
    bench = find(name)
    return bench.label if bench is not None else name


def transfer_label(name: str, graded_as: str) -> str:
    """A transfer column: the benchmark the file is named after, and, when its questions were graded under
    another benchmark's scheme (a HealthBench-format file named llmeval_med), that grader too: a column is
    labelled by what it is and how it was graded."""
    bench = find(name)
    own = (bench.label if bench is not None else name) + "†"
    if not graded_as or (bench is not None and bench.scheme == graded_as):
        return own
    return f"{own} (graded as {benchmark_label(graded_as)})"


def benchmark_order(name: str) -> tuple[int, str]:
    return (BENCHMARK_ORDER.index(name), "") if name in BENCHMARK_ORDER else (len(BENCHMARK_ORDER), name)


def is_tiny_embedded(model: str) -> bool:
    """The bundled SmolLM2-135M: fine for exercising the pipeline, far too small to grade by a rubric."""
    return "smollm2-135m" in model.lower()
