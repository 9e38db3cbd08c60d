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
    HolmResult,
    MeanStd,
    PairedCI,
    holm,
    mean_std,
    paired_difference,
    per_run_average,
    relative_gain,
)

__all__ = [
    "CostRow",
    "CostTable",
    "HolmResult",
    "MeanStd",
    "MethodCost",
    "PairedCI",
    "RunUsage",
    "RunUsageError",
    "Usage",
    "cost_table",
    "holm",
    "load_run_usage",
    "load_runs",
    "mean_std",
    "paired_difference",
    "per_run_average",
    "relative_gain",
]
