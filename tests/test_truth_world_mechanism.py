"""The paper's mechanism as checks in a world whose truth is known (`decoevo.testing.truth_world`).

Each check runs the real engine against the world and asserts what a correct implementation must do;
each is also run on a deliberately broken engine (monkeypatched here), and must then fail: a check that
passes on a broken engine checks nothing.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import decoevo.engine.audits as audits_module
import decoevo.engine.outer as outer_module
from decoevo.domain import Skill
from decoevo.engine.verify import Objective, solver_score_objective
from decoevo.policies import AuditObjectives
from decoevo.roles.contrastive_audit import ContrastiveRecord
from decoevo.roles.structural_audit import StructuralRecord
from decoevo.tasks.load import load_questions
from decoevo.testing.truth_world import TruthWorld, WorldParams, render_skill
from decoevo.testing.truth_world_run import gold_score, run_in_process, views, world_config, write_world_files

SPLITS = {"train": 6, "probe": 3, "solver_gate": 4, "generator_gate": 3, "test": 12}
HYPER = {"batch_size": 3, "audit_every": 2, "max_stalls": 2, "rollouts": 4, "pairs_per_question": 2, "concurrency": 8}
GENERATOR_HEADER = "Write one checkable criterion per requirement below."


def _run(
    tmp: Path,
    world: TruthWorld,
    method: str,
    *,
    seed: int = 0,
    steps: int = 6,
    audit_every: int = 2,
    solver_skill: str | None = None,
    generator_skill: str | None = None,
    splits: dict[str, int] | None = None,
    **hyper: Any,
) -> dict[str, Any]:
    files = write_world_files(world, tmp / "world", 40)
    config = world_config(
        world,
        files,
        method,
        seed,
        splits=splits or SPLITS,
        initial_solver_skill=solver_skill,
        hyper={**HYPER, "steps": steps, "audit_every": audit_every, **hyper},
    )
    if generator_skill is not None:
        config = config.model_copy(update={"initial_generator_skill": generator_skill})
    run_dir = tmp / method
    result, trace = run_in_process(world, config, run_dir)
    test = views(load_questions(config.data), json.loads((run_dir / "splits.json").read_text())["test"])
    return {"result": result, "trace": trace, "run_dir": run_dir, "test": test, "config": config}


# ---- 1. a requirement only the specification names ------------------------------------------------
SPEC_WORLD = WorldParams(n_base=1, n_spec=1, n_contrast=0, n_hidden=0)


def spec_requirement_learned(world: TruthWorld, run: dict[str, Any], within_rounds: int = 3) -> bool:
    """DecoEvo's generator gains a criterion for the specification-only requirement within a few outer
    rounds, and the solver's gold score is higher at the end than when the generator gained it."""
    (tag,) = world.tags("spec")
    rounds = [e for e in run["trace"].events if e["event"] == "outer_round"][:within_rounds]
    gained = next((e for e in rounds if e.get("accepted")), None)
    if gained is None:
        return False
    generator = (run["run_dir"] / "skills" / "generator" / f"v{gained['generator_version']:03d}.md").read_text()
    if tag not in generator:
        return False
    steps = run["trace"].steps  # (step, solver, generator) in force after each inner step
    first = next((i for i, (_, _, g) in enumerate(steps) if tag in g), None)
    if not first:  # gained after the last step (nothing to rise afterwards), or before any
        return False
    at_gain = steps[first - 1][1]  # the solver in force when the generator gained the criterion
    final = run["result"].state.solver.text
    return gold_score(world, final, run["test"]) > gold_score(world, at_gain, run["test"]) and tag in final


def _drop_diagnoses(monkeypatch: pytest.MonkeyPatch) -> None:
    """The broken engine: audit records reach the generator rewriter without their findings (ξ, κ)."""
    real = outer_module.rewrite_generator

    async def without(
        lm: Any, skill: Skill, structural: list[StructuralRecord], contrastive: list[ContrastiveRecord], **kw: Any
    ) -> Any:
        structural = [r.model_copy(update={"rationale": "(none)", "repair": "(none)"}) for r in structural]
        contrastive = [r.model_copy(update={"missed": "", "principle": "(none)"}) for r in contrastive]
        return await real(lm, skill, structural, contrastive, **kw)

    monkeypatch.setattr(outer_module, "rewrite_generator", without)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_decoevo_learns_a_requirement_only_the_specification_names(tmp_path, seed):
    world = TruthWorld(SPEC_WORLD, seed=seed)
    run = _run(tmp_path, world, "decoevo", seed=seed)
    assert spec_requirement_learned(world, run)
    skillopt = _run(tmp_path, world, "skillopt", seed=seed)  # the fixed generator never names it
    assert world.tags("spec")[0] not in skillopt["result"].state.solver.text


def test_the_check_fails_when_diagnoses_do_not_reach_the_generator_rewriter(tmp_path, monkeypatch):
    _drop_diagnoses(monkeypatch)
    world = TruthWorld(SPEC_WORLD, seed=0)
    assert not spec_requirement_learned(world, _run(tmp_path, world, "decoevo"))


# ---- 2. dropping a hard requirement raises J: score-coupled accepts, Pareto rejects -------------------
# The incumbent generator names only the hard specification requirement (R02), which the solver never
# meets; the generator rewriter drops a principle and adds nothing, so the candidate's rubrics hold only
# a generic criterion, on which the solver scores higher.
DROP_WORLD = WorldParams(
    n_base=1,
    n_spec=1,
    n_contrast=0,
    n_hidden=0,
    weight_min=5,
    weight_max=5,
    spontaneous=0.0,
    solver_rewrite_miss=1.0,
    solver_rewrite_drop=0.0,
    solver_rewrite_decoy=0.0,
    generator_rewrite_miss=1.0,
    generator_rewrite_drop=1.0,
    generator_rewrite_decoy=0.0,
)


def _drop_round(tmp: Path, method: str) -> dict[str, Any]:
    world = TruthWorld(DROP_WORLD, seed=0)
    base, hard = world.tags("base")[0], world.tags("spec")[0]
    run = _run(
        tmp,
        world,
        method,
        steps=1,
        audit_every=1,
        solver_skill=render_skill("Cover each requirement below in every answer.", [base], world.name),
        generator_skill=render_skill(GENERATOR_HEADER, [hard], world.name),
    )
    (round0,) = [e for e in run["trace"].events if e["event"] == "outer_round"]
    return round0


def score_coupled_accepts_and_pareto_rejects(tmp: Path) -> bool:
    sc, deco = _drop_round(tmp / "sc", "sc_coevo"), _drop_round(tmp / "deco", "decoevo")
    return bool(sc["accepted"]) and sc["deltas"]["solver_score"] > 0 and not deco["accepted"]


def test_score_coupled_acceptance_takes_the_candidate_that_drops_a_hard_requirement(tmp_path):
    assert score_coupled_accepts_and_pareto_rejects(tmp_path)
    deco = _drop_round(tmp_path / "again", "decoevo")
    assert deco["deltas"]["structural"] < 0 and "regressed" in deco["reason"]


def test_the_check_fails_when_the_pareto_rule_reads_the_solver_score(tmp_path, monkeypatch):
    world = TruthWorld(DROP_WORLD, seed=0)
    solver = Skill(
        kind="solver",
        version=0,
        text=render_skill("Cover each requirement below in every answer.", world.tags("base"), world.name),
    )

    async def leaky(ctx: Any, questions: Any, generator: Skill, frozen: Any) -> Any:
        j = await solver_score_objective(ctx, questions, solver, generator)  # J disguised as an audit objective
        return AuditObjectives(structural=j), {}

    async def leaky_structural(ctx: Any, questions: Any, generator: Skill) -> Objective:
        return Objective(await solver_score_objective(ctx, questions, solver, generator), {}, [])

    # both verification paths: all objectives at once, and structural first (the decision short cut)
    monkeypatch.setattr(outer_module, "audit_objectives", leaky)
    monkeypatch.setattr(outer_module, "structural_objective", leaky_structural)
    assert not score_coupled_accepts_and_pareto_rejects(tmp_path)


# ---- 3. a requirement only near-tie contrast reveals ---------------------------------------------------
CONTRAST_WORLD = WorldParams(n_base=1, n_spec=0, n_contrast=1, n_hidden=0, contrast_spontaneous=0.5)


def contrast_requirement_found(tmp: Path, seed: int = 0) -> tuple[bool, bool]:
    """(found by the contrastive audit, found by the structural audit) in the first two outer rounds."""
    world = TruthWorld(CONTRAST_WORLD, seed=seed)
    (tag,) = world.tags("contrast")
    run = _run(tmp, world, "decoevo", seed=seed, steps=2, audit_every=1, rollouts=6, pairs_per_question=3)
    folders = sorted((run["run_dir"] / "audits").glob("outer_*"))
    assert len(folders) == 2

    def records(name: str) -> list[dict[str, Any]]:
        return [json.loads(line) for f in folders for line in (f / name).read_text().splitlines()]

    contrastive, structural = records("contrastive_probe.jsonl"), records("structural_probe.jsonl")
    return (
        any(tag in r["principle"] for r in contrastive),
        any(tag in r["rationale"] + r["repair"] for r in structural),
    )


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_contrast_only_requirement_is_found_by_the_contrastive_audit_not_the_structural(tmp_path, seed):
    assert contrast_requirement_found(tmp_path, seed) == (True, False)


def test_the_check_fails_when_stage_two_confuses_the_preferred_and_the_other_response(tmp_path, monkeypatch):
    real = audits_module.reveal

    async def swapped(lm: Any, question: Any, preferred: str, other: str, *args: Any, **kw: Any) -> Any:
        return await real(lm, question, other, preferred, *args, **kw)

    monkeypatch.setattr(audits_module, "reveal", swapped)
    assert contrast_requirement_found(tmp_path) != (True, False)
