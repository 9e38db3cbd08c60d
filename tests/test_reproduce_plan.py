"""The reproduce plan (reproduce/plan.py), pure: Table 4 alone runs the five methods of the paper's cost
table, a source benchmark limited to N questions runs N of them (sampled by the plan's seed) and an
unlimited one all, and a transfer is planned for Table 1 only, and only for a source that has one. Each
case failed a mutant that the mutation bench found the older tests let pass (issue 46.2)."""

from __future__ import annotations

from pathlib import Path

from decoevo.lm import ModelSpec
from decoevo.reproduce import DataChoice, ReproducePlan

DATA = {b: DataChoice(f"/d/{b}.jsonl", "jsonl")
        for b in ("healthbench", "writingbench", "researchqa", "llmeval_med", "eqbench_cw")}


def _plan(**kw: object) -> ReproducePlan:
    return ReproducePlan(out=Path("/x"), solver=ModelSpec(), grader=None, **{"data": DATA, **kw})  # type: ignore[arg-type]


def test_table_4_alone_runs_the_five_methods_of_the_cost_table() -> None:
    # the full plan's union hides a method missing from Table 4's list (Table 3 runs the controls too)
    assert _plan(tables=("4",)).methods_for("healthbench") == [
        "skillopt", "sc_coevo", "decoevo", "budget_matched", "direct_audit"]


def test_a_limited_source_runs_that_many_questions_sampled_by_the_plan_s_seed() -> None:
    limited = _plan(data={**DATA, "healthbench": DataChoice("/d/hb.jsonl", "jsonl", 30)}, tables=("1",))
    (bench,) = limited.sweep_spec("healthbench").benchmarks
    assert (bench.limit, bench.sample_seed) == (30, 0)
    (whole,) = _plan(tables=("1",)).sweep_spec("healthbench").benchmarks
    assert (whole.limit, whole.sample_seed) == (None, None)


def test_a_transfer_is_planned_for_table_1_only_and_only_where_a_source_has_one() -> None:
    with_table_1 = _plan()
    assert with_table_1.transfer_for("healthbench") == DataChoice("/d/llmeval_med.jsonl", "jsonl")
    assert with_table_1.transfer_for("writingbench") == DataChoice("/d/eqbench_cw.jsonl", "jsonl")
    assert with_table_1.transfer_for("researchqa") is None  # no transfer benchmark
    without = _plan(tables=("2", "3", "4", "5", "fig3"))  # the transfer's data given, Table 1 not asked for
    assert without.transfer_for("healthbench") is None and without.transfer_for("writingbench") is None
