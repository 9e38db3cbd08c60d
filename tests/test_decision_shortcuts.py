"""The decision short cuts (`hyper.decision_shortcuts`, on by default) skip only work that cannot change
a decision: the full and the short computation, on the same draws, accept and reject the same
candidates and ship the same skills (docs/cost.md). bench/cost/cost_shortcuts.py runs the same comparison at
the `paper` preset."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from decoevo.engine.config import Hyper, config_from_dict
from decoevo.engine.run import Engine
from decoevo.engine.verify import decided_by_structural
from decoevo.lm import LM, LMConfig, RequestCache
from decoevo.policies import ParetoAcceptance
from decoevo.testing.sim_backend import SimBackend, run_virtual
from decoevo.testing.sim_model import LatencyModel
from decoevo.testing.toy_server import write_toy_questions


def _run(tmp: Path, seed: int, shortcuts: bool) -> dict[str, Any]:
    tmp.mkdir()
    data = write_toy_questions(tmp / "q.jsonl", 40)
    config = config_from_dict(
        {
            "method": "decoevo",
            "seed": seed,
            "data": {"path": str(data), "format": "jsonl"},
            "splits": {"train": 8, "probe": 3, "solver_gate": 3, "generator_gate": 5},
            "hyper": {
                "steps": 8,
                "batch_size": 2,
                "audit_every": 2,
                "rollouts": 5,
                "pairs_per_question": 2,
                "tau_tie": 0.3,
                "decision_shortcuts": shortcuts,
            },
        }
    )
    lm = LM(
        LMConfig(),
        backends={"default": SimBackend(0, LatencyModel.fixed(1.0), 16)},
        cache=RequestCache(tmp / "cache.sqlite"),
    )
    result, _ = run_virtual(Engine(config, tmp / "run", lm=lm).run_async())
    lm.cache.close()
    decisions = []
    for line in (tmp / "run" / "events.jsonl").read_text().splitlines():
        e = json.loads(line)
        if e["event"] == "inner_step":
            decisions.append(("inner", e["step"], e["accepted"], e["J_incumbent"], e["J_candidate"]))
        elif e["event"] == "outer_round":
            decisions.append(
                (
                    "outer",
                    e["round"],
                    e["accepted"],
                    e["structural_records"],
                    e["contrastive_records"],
                    e["generator_version"],
                )
            )
    skipped = sum(
        "contrastive_not_computed" in json.loads(p.read_text())
        for p in (tmp / "run" / "audits").glob("*/verification.json")
    )
    return {
        "decisions": decisions,
        "solver": result.state.solver.text,
        "generator": result.state.generator.text,
        "calls": result.ledger.total().calls,
        "skipped": skipped,
        "blind": result.ledger.by_role().get("contrastive_audit_blind"),
    }


def test_shortcuts_are_on_by_default():
    assert Hyper().decision_shortcuts


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_short_and_full_computation_make_the_same_decisions(tmp_path, seed):
    full, short = _run(tmp_path / "full", seed, False), _run(tmp_path / "short", seed, True)
    assert short["decisions"] == full["decisions"]
    assert (short["solver"], short["generator"]) == (full["solver"], full["generator"])
    assert any(d[0] == "outer" and d[2] is not None for d in full["decisions"])  # candidates were verified
    assert short["calls"] < full["calls"]
    assert short["blind"] is not None and short["blind"].calls < full["blind"].calls  # equivalents asked once


def test_some_round_is_settled_by_the_structural_objective(tmp_path):
    # Over the seeds above, the structural short cut fires (else the equivalence test would not test it).
    assert sum(_run(tmp_path / f"s{seed}", seed, True)["skipped"] for seed in (0, 1, 2)) > 0


@pytest.mark.parametrize(
    ("old", "new", "settled"),
    [
        (0.60, 0.50, False),  # Δ_str = −0.10 < −η: rejected whatever Φ_ctr says
        (0.60, 0.59, None),  # within η: Φ_ctr may still improve by more than δ
        (0.60, 0.70, None),  # improved: acceptance still needs Δ_ctr ≥ −η
    ],
)
def test_structural_settles_eq10_only_on_a_regression_beyond_eta(old, new, settled):
    decision = decided_by_structural(ParetoAcceptance(delta=0.02, eta=0.02), old, new)
    assert (None if decision is None else decision.accepted) == settled
