"""Evaluation layer: the statistics and cost tables the paper reports, as pure functions (no model calls)."""

from .costs import (
    CostRow,
    CostTable,
    MethodCost,
    RunUsage,
    RunUsageError,
    Usage,
    cost_table,
    load_run_usage,
    load_runs,
)
from .stats import (
    COVERAGE_FLOOR,
    Coverage,
    HolmResult,
    MeanStd,
    PairedCI,
    graded_in_both,
    holm,
    mean_std,
    paired_difference,
    per_run_average,
    relative_gain,
)

__all__ = [
    "COVERAGE_FLOOR",
    "CostRow",
    "CostTable",
    "Coverage",
    "HolmResult",
    "MeanStd",
    "MethodCost",
    "PairedCI",
    "RunUsage",
    "RunUsageError",
    "Usage",
    "cost_table",
    "graded_in_both",
    "holm",
    "load_run_usage",
    "load_runs",
    "mean_std",
    "paired_difference",
    "per_run_average",
    "relative_gain",
]
