"""The cost options of `Hyper` (docs/cost.md): off by default, and when on they save the calls they
claim to save without dropping an audit."""

from __future__ import annotations

import json
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

from decoevo.domain import Skill
from decoevo.engine.audits import frozen_set_sample
from decoevo.engine.config import Hyper, config_from_dict
from decoevo.engine.run import Engine
from decoevo.lm import LM, LMConfig, RequestCache
from decoevo.testing.sim_backend import SimBackend, run_virtual
from decoevo.testing.sim_model import LatencyModel
from decoevo.testing.toy_server import write_toy_questions


def test_levers_are_off_by_default():
    h = Hyper()
    assert not (h.reuse_frozen_set or h.reuse_probe_draws or h.rollouts_early_stop)
    assert h.audit_schedule == "fixed"


def test_frozen_set_sample_is_one_range_per_skill_pair():
    def s(kind: str, v: int) -> Skill:
        return Skill(kind=kind, version=v, text=f"{kind} {v}")

    starts = {frozen_set_sample(s("solver", a), s("generator", b), 6) for a in range(8) for b in range(8)}
    assert len(starts) == 64 and all(x % 6 == 0 for x in starts)  # disjoint ranges of 6
    assert frozen_set_sample(s("solver", 2), s("generator", 1), 6) == \
        frozen_set_sample(Skill(kind="solver", version=2, text="other"), s("generator", 1), 6)


def _run(tmp: Path, method: str = "decoevo", **hyper: Any) -> tuple[Path, dict[str, dict[str, int]]]:
    data = write_toy_questions(tmp / "q.jsonl", 40)
    config = config_from_dict({
        "method": method, "seed": 3, "data": {"path": str(data), "format": "jsonl"},
        "splits": {"train": 8, "probe": 3, "solver_gate": 3, "generator_gate": 4},
        "hyper": {"steps": 6, "batch_size": 2, "audit_every": 1, "rollouts": 6, "pairs_per_question": 1,
                  "tau_tie": 0.3, **hyper}})
    lm = LM(LMConfig(), backends={"default": SimBackend(0, LatencyModel.fixed(1.0), 16)},
            cache=RequestCache(tmp / "cache.sqlite"))
    result, _ = run_virtual(Engine(config, tmp / "run", lm=lm).run_async())
    lm.cache.close()
    roles = {r: {"calls": u.calls, "cached": u.cache_hits} for r, u in result.ledger.by_role().items()}
    return tmp / "run", roles


def _rounds_by_skills(run: Path) -> dict[tuple[int, int], list[int]]:
    """Outer rounds grouped by the (solver, generator) versions they audited."""
    solver = generator = 0
    groups: dict[tuple[int, int], list[int]] = {}
    for line in (run / "events.jsonl").read_text().splitlines():
        e = json.loads(line)
        if e["event"] == "inner_step":
            solver = e["solver_version"]
        elif e["event"] == "outer_round":
            groups.setdefault((solver, generator), []).append(e["round"])
            generator = e["generator_version"]
    return groups


def _file(run: Path, rnd: int, name: str) -> str:
    path = run / "audits" / f"outer_{rnd:03d}" / name
    return path.read_text() if path.exists() else ""


@pytest.mark.parametrize("probe_too", [False, True])
def test_reuse_draws_once_per_skill_pair(tmp_path, probe_too):
    (tmp_path / "off").mkdir()
    (tmp_path / "on").mkdir()
    # Without the decision short cuts every verified round builds Γ (else a structural rejection skips it).
    off, off_roles = _run(tmp_path / "off", decision_shortcuts=False)
    on, on_roles = _run(tmp_path / "on", reuse_frozen_set=True, reuse_probe_draws=probe_too, decision_shortcuts=False)
    compared = 0
    for rounds in _rounds_by_skills(on).values():
        # rounds that audited the same skills and reached verification froze the same set
        frozen = {_file(on, r, "frozen_pairs.jsonl") for r in rounds} - {""}
        assert len(frozen) <= 1
        probe = [_file(on, r, "contrastive_probe.jsonl") for r in rounds]
        assert (len(set(probe)) == 1) == (probe_too or len(rounds) == 1)
        compared += sum(1 for r in rounds if _file(on, r, "frozen_pairs.jsonl")) > 1
    assert compared, "the schedule must verify one skill pair twice for this test to mean anything"
    assert on_roles["solve"]["calls"] < off_roles["solve"]["calls"]  # fewer rollouts paid
    for run in (off, on):  # no audit dropped: every round ran both audits and a verification
        for rounds in _rounds_by_skills(run).values():
            for r in rounds:
                assert (run / "audits" / f"outer_{r:03d}" / "structural_probe.jsonl").exists()
                assert (run / "audits" / f"outer_{r:03d}" / "contrastive_probe.jsonl").exists()


def test_default_draws_a_new_frozen_set_every_round(tmp_path):
    run, _ = _run(tmp_path)
    repeats = [rs for rs in _rounds_by_skills(run).values() if len(rs) > 1]
    assert repeats
    texts = [_file(run, r, "frozen_pairs.jsonl") for r in repeats[0]]
    assert len(set(texts)) == len(texts) or not any(texts)


def test_early_stop_draws_fewer_rollouts_only_for_near_tie_selection(tmp_path):
    for sub in ("off", "on", "random_off", "random_on"):
        (tmp_path / sub).mkdir()
    _, off = _run(tmp_path / "off")
    _, on = _run(tmp_path / "on", rollouts_early_stop=True)
    assert on["solve"]["calls"] < off["solve"]["calls"]
    assert on.get("contrastive_audit_blind", {}).get("calls", 0) > 0  # pairs still found and audited
    _, r_off = _run(tmp_path / "random_off", method="random_pairs")
    _, r_on = _run(tmp_path / "random_on", method="random_pairs", rollouts_early_stop=True)
    assert r_on == r_off  # random pairs need no scores to stop on: the option does nothing there


def _round_steps(run_dir: Path) -> tuple[list[bool], list[int]]:
    """Each inner step's acceptance, and the steps after which an outer round ran (from events.jsonl)."""
    accepted: list[bool] = []
    rounds: list[int] = []
    for line in (run_dir / "events.jsonl").read_text().splitlines():
        event = json.loads(line)
        if event["event"] == "inner_step":
            accepted.append(event["accepted"])
        elif event["event"] == "outer_round":
            rounds.append(len(accepted) - 1)
    return accepted, rounds


@pytest.mark.parametrize("schedule", ["fixed", "since_last_round"])
def test_the_engine_runs_its_rounds_where_the_schedule_says(tmp_path, schedule):
    import asyncio

    from decoevo.policies import should_audit

    from .engine_helpers import toy_engine

    engine, _ = toy_engine(tmp_path, "decoevo", steps=8, audit_every=4, max_stalls=2, audit_schedule=schedule)
    asyncio.run(engine.run_async())
    accepted, rounds = _round_steps(engine.run.path)
    expected, stalls, last = [], 0, -1
    for step, ok in enumerate(accepted):
        stalls = 0 if ok else stalls + 1
        if should_audit(step, 4, stalls, 2, last_round=last if schedule == "since_last_round" else None):
            expected.append(step)
            stalls, last = 0, step
    assert rounds == expected and len(accepted) == 8
    if schedule == "since_last_round":  # K counts from the last round: no scheduled round right after one
        assert all(b - a >= 2 for a, b in pairwise(rounds))
    else:  # on the toy world a stall round after step 2 is followed by the scheduled one after step 3
        assert any(b - a == 1 for a, b in pairwise(rounds))


def test_gate_answers_are_drawn_once_per_solver_version(tmp_path):
    """`reuse_gate_answers`: rounds verifying under the same solver version build Γ from the same answers
    (judged again under the current generator), so fewer rollouts are paid; no audit is dropped."""
    (tmp_path / "off").mkdir()
    (tmp_path / "on").mkdir()
    _, off_roles = _run(tmp_path / "off", decision_shortcuts=False)
    on, on_roles = _run(tmp_path / "on", reuse_gate_answers=True, decision_shortcuts=False)
    assert on_roles["solve"]["calls"] < off_roles["solve"]["calls"]
    by_solver: dict[int, set[str]] = {}
    for (solver, _generator), rounds in _rounds_by_skills(on).items():
        for r in rounds:
            pairs = [json.loads(x) for x in _file(on, r, "frozen_pairs.jsonl").splitlines()]
            by_solver.setdefault(solver, set()).update(p["preferred"] for p in pairs)
            by_solver[solver].update(p["other"] for p in pairs)
            assert (on / "audits" / f"outer_{r:03d}" / "structural_probe.jsonl").exists()
    # at most L answers per V_g question and solver version, however many rounds verified under it
    assert all(len(answers) <= 6 * 4 for answers in by_solver.values())
    assert sum(len(v) for v in by_solver.values()) > 0
