"""Shared by the cost benches: one run in process on the simulated model and a virtual clock (the same
calls as over HTTP, in seconds of CPU), with what the cost pages report of it.

`world` selects the simulated world: `SimModel`'s defaults (the project's `decoevo.testing` world) or
any other `SimWorld` (bench/cost/cost_table4.py's held-out world)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from decoevo.engine.config import config_from_dict, deep_merge
from decoevo.engine.run import Engine
from decoevo.lm import LM, RequestCache
from decoevo.presets import PRESETS
from decoevo.testing.sim_backend import SimBackend, run_virtual
from decoevo.testing.sim_model import LatencyModel, SimWorld


def config(data: Path, method: str, seed: int, preset: str = "paper", hyper: dict[str, Any] | None = None,
           splits: dict[str, Any] | None = None) -> Any:
    return config_from_dict(deep_merge(PRESETS[preset], {
        "method": method, "seed": seed, "data": {"path": str(data), "format": "jsonl"}, "hyper": hyper or {},
        "splits": splits or {}}))


def decisions(run: Path) -> list[tuple[Any, ...]]:
    """Every accept/reject decision of a run, in order, from its events."""
    out: list[tuple[Any, ...]] = []
    for line in (run / "events.jsonl").read_text().splitlines():
        e = json.loads(line)
        if e["event"] == "inner_step":
            out.append(("inner", e["step"], e["accepted"], e.get("J_incumbent"), e.get("J_candidate")))
        elif e["event"] == "outer_round":
            out.append(("outer", e["round"], e["accepted"], e["structural_records"], e["contrastive_records"],
                        e["generator_version"]))
    return out


def run(cfg: Any, workdir: Path, world: SimWorld | None = None, sim_seed: int = 0) -> dict[str, Any]:
    """Paid calls and tokens (total and by role), outer rounds, decisions and final skills of one run."""
    workdir.mkdir(parents=True)

    async def go() -> Any:
        backend = SimBackend(sim_seed, LatencyModel.fixed(1.0), 64, world=world)
        lm = LM(cfg.lm, backends={"default": backend}, cache=RequestCache(workdir / "cache.sqlite"))
        try:
            return await Engine(cfg, workdir / "run", lm=lm).run_async()
        finally:
            await lm.aclose()

    result, waves = run_virtual(go())
    total = result.ledger.total()
    roles = {role: {"calls": row.calls, "tokens": row.tokens, "cached": row.cache_hits}
             for role, row in sorted(result.ledger.by_role().items())}
    skipped = sum("contrastive_not_computed" in json.loads(p.read_text())
                  for p in (workdir / "run" / "audits").glob("*/verification.json"))
    return {"calls": total.calls, "tokens": total.tokens, "cached": total.cache_hits,
            "outer_rounds": result.state.outer_rounds, "generator_accepts": result.state.generator_accepts,
            "solver_accepts": result.state.solver_accepts, "waves": round(waves),
            "verifications_settled_by_structural": skipped, "decisions": decisions(workdir / "run"),
            "final_solver": result.state.solver.text, "final_generator": result.state.generator.text,
            "roles": roles}


# A second world for checking figures calibrated in the default one, fixed before any figure was
# computed in it (bench/cost/cost_table4.py): shorter answers, a noisier judge, closer qualities (more
# near-ties, fewer gate acceptances), about three times as many blind "equivalent" verdicts, twice the
# position flips, noisier structural audits, and its own seed for every reply.
HELD_OUT_WORLD = SimWorld(answer_length=0.6, quality_spread=0.6, judge_noise=1.2, equivalent_gap=0.2,
                          position_flip=0.2, adequacy_noise=1.5)
HELD_OUT_SIM_SEED = 7
WORLDS: dict[str, tuple[SimWorld | None, int]] = {"default": (None, 0), "held_out": (HELD_OUT_WORLD, HELD_OUT_SIM_SEED)}
