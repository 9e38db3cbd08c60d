"""Evaluation layer: the statistics and cost tables the paper reports, as pure functions (no model calls).

The names below are loaded from their modules when first asked for: a run imports `criterion_drift` and
`discrimination` (which run after its last step), and importing this package used to import the cost tables and
the statistics with them, before every run's first call (tests/test_startup.py)."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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


# name -> the module that defines it
_FROM = {
    **dict.fromkeys(("CostRow", "CostTable", "MethodCost", "RunUsage", "RunUsageError", "Usage", "cost_table",
                     "load_run_usage", "load_runs"), ".costs"),
    **dict.fromkeys(("COVERAGE_FLOOR", "Coverage", "HolmResult", "MeanStd", "PairedCI", "graded_in_both", "holm",
                     "mean_std", "paired_difference", "per_run_average", "relative_gain"), ".stats"),
}


def __getattr__(name: str) -> Any:
    if name in _FROM:
        return getattr(importlib.import_module(_FROM[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
