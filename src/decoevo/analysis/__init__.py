"""Evaluation layer: the statistics and cost tables the paper reports, as pure functions (no model calls)."""

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
    "HolmResult",
    "MeanStd",
    "PairedCI",
    "holm",
    "mean_std",
    "paired_difference",
    "per_run_average",
    "relative_gain",
]
