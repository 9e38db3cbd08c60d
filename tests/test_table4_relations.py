"""The `paper` preset stands in Table 4's cost relations in a simulated world its sizes were not chosen in
(bench/cost_sim.py's held-out world: shorter answers, closer qualities, a noisier judge and auditor, more
blind "equivalent" verdicts and position flips). Mean of 3 seeds, as in bench/cost_table4.py; the runs
are deterministic (the simulated replies are a pure function of the request), so this fails only when
the preset, the method's calls or the simulator change."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

from cost_sim import WORLDS, config, run
from cost_worlds import METHODS, slack, summarize

from decoevo.testing.toy_server import write_toy_questions


def test_paper_preset_meets_table4_in_the_held_out_world(tmp_path: Path) -> None:
    data = write_toy_questions(tmp_path / "questions.jsonl", 300)
    world, sim_seed = WORLDS["held_out"]
    tokens: dict[str, list[int]] = {m: [] for m in METHODS}
    rounds: dict[str, list[int]] = {m: [] for m in METHODS}
    for seed in (0, 1, 2):
        for method in METHODS:
            cell = run(config(data, method, seed, "paper"), tmp_path / f"{method}-{seed}", world, sim_seed)
            tokens[method].append(cell["tokens"])
            rounds[method].append(cell["outer_rounds"])
    mean = summarize(tokens, rounds)["mean"]
    assert abs(mean["decoevo_over_skillopt"] - 1.89) <= 0.15, mean
    assert mean["sc_coevo_over_decoevo"] >= 0.85, mean
    assert mean["direct_audit_over_decoevo"] >= 0.85, mean
    assert slack(mean) >= 0
    assert all(r > 0 for m in ("decoevo", "sc_coevo", "direct_audit") for r in rounds[m])  # every audit ran
