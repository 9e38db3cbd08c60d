"""The report's per-benchmark tables that do not depend on evaluations: rubric alignment with the gold
rubrics and the cost of each method (with its token parity to DecoEvo), from finished runs."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..analysis.costs import CostTable, cost_table
from ..analysis.parity import ParityRow, parity_rows
from ..analysis.stats import MeanStd, mean_std
from .labels import BASELINE, PROPOSED, benchmark_order, method_order
from .run_record import RunRecord


@dataclass(frozen=True)
class AlignmentRow:
    method: str
    n_seeds: int
    precision: MeanStd | None
    recall: MeanStd | None
    f1: MeanStd | None
    n_questions: int
    n_failed: int
    matchers: tuple[str, ...]


@dataclass(frozen=True)
class AlignmentTable:
    benchmark: str
    rows: tuple[AlignmentRow, ...]
    missing: tuple[RunRecord, ...]


@dataclass(frozen=True)
class CostSection:
    benchmark: str
    table: CostTable | None
    excluded: tuple[RunRecord, ...]  # unfinished, or without a readable ledger
    error: str | None = None
    parity: tuple[ParityRow, ...] = ()  # each method's effective tokens relative to its paired DecoEvo run


def alignment_tables(runs: Sequence[RunRecord]) -> tuple[AlignmentTable, ...]:
    out = []
    for bench in sorted({r.benchmark for r in runs}, key=benchmark_order):
        group = [r for r in runs if r.benchmark == bench]
        rows = []
        for method in sorted({r.method for r in group}, key=method_order):
            files = [r.alignment for r in group if r.method == method and r.alignment is not None]
            if not files:
                continue

            def stat(values: list[float | None]) -> MeanStd | None:
                xs = [100 * v for v in values if v is not None]
                return mean_std(xs) if xs else None

            rows.append(AlignmentRow(method, len(files), stat([f.precision for f in files]),
                                     stat([f.recall for f in files]), stat([f.f1 for f in files]),
                                     sum(f.n_questions for f in files), sum(f.n_failed for f in files),
                                     tuple(sorted({f.matcher_model for f in files if f.matcher_model}))))
        missing = tuple(r for r in group if r.alignment is None)
        out.append(AlignmentTable(bench, tuple(rows), missing))
    return tuple(out)


def cost_sections(runs: Sequence[RunRecord]) -> tuple[CostSection, ...]:
    """One cost table per benchmark (costs of different question sets do not average), from finished runs."""
    out = []
    for bench in sorted({r.benchmark for r in runs}, key=benchmark_order):
        group = [r for r in runs if r.benchmark == bench]
        usable = [r for r in group if r.usage is not None and r.finished]
        excluded = tuple(r for r in group if r not in usable)
        if not usable:
            out.append(CostSection(bench, None, excluded))
            continue
        try:
            table = cost_table([r.usage for r in usable if r.usage is not None], baseline=BASELINE)
        except ValueError as e:
            out.append(CostSection(bench, None, excluded, error=str(e)))
            continue
        parity = tuple(sorted(parity_rows([r.usage for r in usable if r.usage is not None], PROPOSED),
                              key=lambda p: method_order(p.method)))
        out.append(CostSection(bench, table, excluded, parity=parity))
    return tuple(out)
