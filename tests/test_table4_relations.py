"""The `paper` preset stands in Table 4's cost relations in a simulated world its sizes were not chosen in
(bench/cost/cost_sim.py's held-out world: shorter answers, closer qualities, a noisier judge and auditor, more
blind "equivalent" verdicts and position flips). Mean of 3 seeds, computed by the function
bench/cost/cost_table4.py uses; the runs are deterministic (the simulated replies are a pure function of the
request), so this fails only when the preset, the method's calls or the simulator change."""

from __future__ import annotations

import pytest

from bench.cost.cost_worlds import relations_many, slack


@pytest.mark.slow  # 12 simulated paper-preset runs (~35 s); bench/cost/cost_table4.py measures the same relations
def test_paper_preset_meets_table4_in_the_held_out_world() -> None:
    # as the bench; the 12 runs are independent and deterministic, so two spawned workers give the same result
    [by_world] = relations_many([({}, {})], ["held_out"], [0, 1, 2], "paper", workers=2)
    mean, rounds = by_world["held_out"]["mean"], by_world["held_out"]["outer_rounds"]
    assert abs(mean["decoevo_over_skillopt"] - 1.89) <= 0.15, mean
    assert mean["sc_coevo_over_decoevo"] >= 0.85, mean
    assert mean["direct_audit_over_decoevo"] >= 0.85, mean
    assert slack(mean) >= 0
    assert all(r > 0 for m in ("decoevo", "sc_coevo", "direct_audit") for r in rounds[m])  # every audit ran
