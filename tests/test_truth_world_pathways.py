"""One mechanism-level check per audit-to-rewriter pathway and per policy, each with its broken variant.

Every check runs the real engine in a world built so that exactly one pathway (or policy) can produce
the outcome it asserts, and each broken variant (monkeypatched at the place the engine uses it) must fail
the check on every seed the check passes on. The default suite runs two seeds; `DECOEVO_PATHWAY_SEEDS`
widens them (measured: on seeds 0-19 every check passes and every broken variant fails, 80 cases in 43 s).
"""

from __future__ import annotations

import json
import os
from itertools import combinations
from pathlib import Path
from typing import Any

import pytest

import decoevo.engine.audits as audits_module
import decoevo.engine.outer as outer_module
import decoevo.engine.run as run_module
import decoevo.policies as policies_module
from decoevo.policies import AuditObjectives, GeneratorDecision
from decoevo.roles.common import own_verdict
from decoevo.roles.contrastive_audit import STAGE1_ROLE, PreferenceOut, stage1_messages
from decoevo.testing.truth_world import TruthWorld, WorldParams, question_number, render_skill
from decoevo.testing.truth_world_run import world_config, write_world_files
from tests.test_truth_world_mechanism import GENERATOR_HEADER, SPLITS, _run

SEEDS = [int(s) for s in os.environ.get("DECOEVO_PATHWAY_SEEDS", "0,1").split(",")]
SOLVER_HEADER = "Cover each requirement below in every answer."
FAITHFUL = {"generator_rewrite_miss": 0.0, "generator_rewrite_drop": 0.0, "generator_rewrite_decoy": 0.0}


def generator_candidates(run_dir: Path) -> list[str]:
    """Every generator skill the rewriter proposed: accepted (skills/generator/v001...) or not (candidates/)."""
    accepted = sorted((run_dir / "skills" / "generator").glob("v*.md"))[1:]
    rejected = sorted((run_dir / "candidates").glob("generator_round*.md"))  # rejected or invalid
    return [p.read_text() for p in accepted + rejected]


def reaches_generator(tmp: Path, world: TruthWorld, tag: str, seed: int, **hyper: Any) -> bool:
    """The tag, which only one audit can see, reaches a candidate of the generator rewriter."""
    run = _run(tmp, world, "decoevo", seed=seed, steps=2, audit_every=1, **hyper)
    return any(tag in text for text in generator_candidates(run["run_dir"]))


def _withhold(monkeypatch: pytest.MonkeyPatch, which: str) -> None:
    """The broken engine: outer.py's call to the generator rewriter loses one kind of audit record."""
    real = outer_module.rewrite_generator

    async def without(lm: Any, skill: Any, structural: list[Any], contrastive: list[Any], **kw: Any) -> Any:
        if which == "structural":
            structural = []
        else:
            contrastive = []
        return await real(lm, skill, structural, contrastive, **kw)

    monkeypatch.setattr(outer_module, "rewrite_generator", without)


# ---- the structural pathway: a requirement only the specification names ----------------------------------
# No response ever meets it unasked (spontaneous 0), so no near-tie pair can differ in it.
STRUCTURAL_WORLD = WorldParams(n_base=1, n_spec=1, n_contrast=0, n_hidden=0, spontaneous=0.0, **FAITHFUL)


def structural_pathway(tmp: Path, seed: int) -> bool:
    world = TruthWorld(STRUCTURAL_WORLD, seed=seed)
    return reaches_generator(tmp, world, world.tags("spec")[0], seed)


@pytest.mark.parametrize("seed", SEEDS)
def test_structural_records_reach_the_generator_rewriter(tmp_path, seed, monkeypatch):
    assert structural_pathway(tmp_path / "ok", seed)
    _withhold(monkeypatch, "structural")
    assert not structural_pathway(tmp_path / "broken", seed)


# ---- the contrastive pathway: a requirement only near-tie contrast reveals --------------------------------
CONTRAST_WORLD = WorldParams(n_base=1, n_spec=0, n_contrast=1, n_hidden=0, contrast_spontaneous=0.5, **FAITHFUL)


def contrastive_pathway(tmp: Path, seed: int) -> bool:
    world = TruthWorld(CONTRAST_WORLD, seed=seed)
    # Eight rollouts in four disjoint pairs: an odd number meeting the requirement forces a pair that differs
    # in it (six probe questions, two rounds), whatever the near-tie order.
    splits = {**SPLITS, "probe": 6}
    return reaches_generator(
        tmp, world, world.tags("contrast")[0], seed, rollouts=8, pairs_per_question=4, splits=splits
    )


@pytest.mark.parametrize("seed", SEEDS)
def test_contrastive_records_reach_the_generator_rewriter(tmp_path, seed, monkeypatch):
    assert contrastive_pathway(tmp_path / "ok", seed)
    _withhold(monkeypatch, "contrastive")
    assert not contrastive_pathway(tmp_path / "broken", seed)


# ---- the pair-selection policy: near ties, not the farthest pairs -----------------------------------------
# Half the answers meet the measured requirement; the contrast requirement weighs the same, so the blind
# auditor (never wrong here) says "equivalent" when each response has one of them. A pair apart on the
# measured requirement is explained by it; only a pair the rubric scores alike can point at the other.
PAIR_WORLD = WorldParams(
    n_base=1,
    n_spec=0,
    n_contrast=1,
    n_hidden=0,
    weight_min=3,
    weight_max=3,
    solver_slip=0.5,
    contrast_spontaneous=0.5,
    judge_noise=0.0,
    rubric_slip=0.0,
    pref_accuracy=1.0,
    reveal_error=0.0,
    solver_rewrite_drop=0.0,
    solver_rewrite_decoy=0.0,
    **FAITHFUL,
)


def near_ties_find_the_unmeasured_requirement(tmp: Path, seed: int) -> bool:
    world = TruthWorld(PAIR_WORLD, seed=seed)
    tag = world.tags("contrast")[0]
    solver = render_skill(SOLVER_HEADER, world.tags("base"), world.name)
    run = _run(
        tmp, world, "decoevo", seed=seed, steps=2, audit_every=1, rollouts=10, pairs_per_question=1, solver_skill=solver
    )
    records = [
        json.loads(line)
        for folder in sorted((run["run_dir"] / "audits").glob("outer_*"))
        for line in (folder / "contrastive_probe.jsonl").read_text().splitlines()
    ]
    return any(tag in r["principle"] for r in records)


def _farthest(scores: Any, tau: float, max_pairs: int) -> list[tuple[int, int]]:
    """The broken policy: the pairs the rubric separates most (disjoint, largest gaps first)."""
    ranked = sorted(combinations(range(len(scores)), 2), key=lambda p: -abs(scores[p[0]] - scores[p[1]]))
    used: set[int] = set()
    out: list[tuple[int, int]] = []
    for i, j in ranked:
        if len(out) < max_pairs and not {i, j} & used:
            out.append((i, j))
            used |= {i, j}
    return out


@pytest.mark.parametrize("seed", SEEDS)
def test_near_tie_pairs_not_farthest_pairs_find_what_the_rubric_misses(tmp_path, seed, monkeypatch):
    assert near_ties_find_the_unmeasured_requirement(tmp_path / "ok", seed)
    monkeypatch.setattr(audits_module, "select_near_tie_pairs", _farthest)
    assert not near_ties_find_the_unmeasured_requirement(tmp_path / "broken", seed)


# ---- the acceptance policy: an improvement never excuses a regression ------------------------------------
# The incumbent names one specification requirement; answers meet only the contrast requirement (never a
# specification one), so the contrastive audit names it and nothing else, and the structural auditor names
# nothing. The rewriter always drops a principle and adds what the audit named: the candidate trades the
# specification requirement (Φ_str falls) for the contrast one (Φ_ctr rises on the frozen near ties).
TRADE_WORLD = WorldParams(
    n_base=1,
    n_spec=1,
    n_contrast=1,
    n_hidden=0,
    spontaneous=0.0,
    contrast_spontaneous=0.5,
    rubric_slip=0.0,
    judge_noise=0.0,  # a pair apart only in the unmeasured requirement has margin 0 under the incumbent
    pref_accuracy=1.0,
    reveal_error=0.0,
    audit_miss=1.0,
    generator_rewrite_miss=0.0,
    generator_rewrite_drop=1.0,
    generator_rewrite_decoy=0.0,
)


def trade_rejected(tmp: Path, seed: int) -> bool:
    """Round 0's candidate regressed on Φ_str, and eq. 10 rejected it."""
    world = TruthWorld(TRADE_WORLD, seed=seed)
    run = _run(
        tmp,
        world,
        "decoevo",
        seed=seed,
        steps=1,
        audit_every=1,
        rollouts=8,
        pairs_per_question=4,
        generator_skill=render_skill(GENERATOR_HEADER, world.tags("spec"), world.name),
    )
    (round0,) = [e for e in run["trace"].events if e["event"] == "outer_round"]
    return round0["deltas"]["structural"] < -0.02 and not round0["accepted"]


def _excusing(self: Any, incumbent: AuditObjectives, candidate: AuditObjectives) -> GeneratorDecision:
    """The broken rule: any improvement beyond δ accepts, whatever regressed."""
    old, new = incumbent.available(), candidate.available()
    deltas = {k: new[k] - old[k] for k in sorted(set(old) & set(new))}
    improved = [k for k, d in deltas.items() if d > self.delta]
    return GeneratorDecision(bool(improved), self.name, f"improved {improved}", deltas)


@pytest.mark.parametrize("seed", SEEDS)
def test_an_improvement_does_not_excuse_a_regression(tmp_path, seed, monkeypatch):
    assert trade_rejected(tmp_path / "ok", seed)
    monkeypatch.setattr(policies_module.ParetoAcceptance, "decide", _excusing)
    assert not trade_rejected(tmp_path / "broken", seed)


# ---- the probe/V_g split: proposals come from the probe set, never from the set that verifies them ----------
# One requirement is an idiosyncrasy of V_g's questions: answers meet it unasked half the time, but gold counts
# it only on V_g's questions. Every answer meets the measured base requirement, so every pair is a near tie.
# Audited on the probe set, no pair differs in gold by it (the auditor calls them equivalent); audited on V_g,
# the reveal names it, and V_g's own frozen pairs then confirm the rule: the gate is overfitted.
def split_numbers(tmp: Path, seed: int) -> dict[str, tuple[int, ...]]:
    """The question numbers of the probe set and of V_g for this seed, as the engine will draw the splits."""
    from decoevo.tasks.load import load_questions
    from decoevo.tasks.splits import SplitSizes, make_splits

    world = TruthWorld(WorldParams(), seed=seed)
    files = write_world_files(world, tmp / "splits", 40)
    questions = load_questions(world_config(world, files, "decoevo", seed, splits=SPLITS, hyper={}).data)
    cut = make_splits(questions, SplitSizes(**SPLITS), seed, required=[])
    return {name: tuple(sorted(int(q.id[1:]) for q in getattr(cut, name))) for name in ("probe", "generator_gate")}


def local_rule_accepted(tmp: Path, seed: int) -> bool:
    """The V_g-only requirement ends in the accepted generator skill."""
    params = WorldParams(n_base=1, n_spec=0, n_contrast=0, n_hidden=0, n_local=1, contrast_spontaneous=0.5,
                         local_questions=split_numbers(tmp, seed)["generator_gate"], solver_slip=0.0, judge_noise=0.0,
                         rubric_slip=0.0, audit_noise=0.0, pref_accuracy=1.0, reveal_error=0.0, solver_rewrite_drop=0.0,
                         solver_rewrite_decoy=0.0, **FAITHFUL)
    world = TruthWorld(params, seed=seed)
    tag = world.tags("local")[0]
    solver = render_skill(SOLVER_HEADER, world.tags("base"), world.name)
    run = _run(tmp, world, "decoevo", seed=seed, steps=2, audit_every=1, rollouts=8, pairs_per_question=4,
               solver_skill=solver)
    return tag in run["result"].state.generator.text


def _audit_on_generator_gate(monkeypatch: pytest.MonkeyPatch, which: str = "both") -> None:
    """The broken engine: the proposal audits (`both`, or only the `structural` or the `contrastive` one) run
    on V_g instead of the probe set. outer.py's own names are patched: verification's structural audit of V_g
    (verify.py) is left as it is."""
    real = run_module.outer_step
    gate: list[Any] = []

    async def on_gate(ctx: Any, round_idx: int, solver: Any, generator: Any, probe: Any, generator_gate: Any,
                      *rest: Any) -> Any:
        gate[:] = generator_gate
        return await real(ctx, round_idx, solver, generator, generator_gate if which == "both" else probe,
                          generator_gate, *rest)

    monkeypatch.setattr(run_module, "outer_step", on_gate)
    if which == "structural":
        real_structural = outer_module.structural_records

        async def structural_on_gate(ctx: Any, questions: Any, generator: Any) -> Any:
            return await real_structural(ctx, list(gate), generator)

        monkeypatch.setattr(outer_module, "structural_records", structural_on_gate)
    elif which == "contrastive":
        real_contrastive = outer_module.contrastive_records

        async def contrastive_on_gate(ctx: Any, questions: Any, *args: Any) -> Any:
            return await real_contrastive(ctx, list(gate), *args)

        monkeypatch.setattr(outer_module, "contrastive_records", contrastive_on_gate)


@pytest.mark.parametrize("moved", ["both", "contrastive"])
@pytest.mark.parametrize("seed", SEEDS)
def test_proposals_from_the_probe_set_do_not_overfit_the_generator_gate(tmp_path, seed, moved, monkeypatch):
    """The V_g-only requirement is one only contrast reveals: moving the contrastive audit alone is caught."""
    assert not local_rule_accepted(tmp_path / "ok", seed)
    _audit_on_generator_gate(monkeypatch, moved)
    assert local_rule_accepted(tmp_path / "broken", seed)


# ---- the probe/V_g split, structural side: the probe set's specification gaps are not V_g's -----------------
# The specification covers every question, so in a world where it lists the same requirements for all of them the
# structural audit finds the same gaps on any question set, and no check can tell where it ran. Here it lists two
# requirements scoped to some questions (`scoped_spec`): one for the probe questions, one for V_g's. Audited on the
# probe set, the structural auditor names the first (it reaches a generator candidate) and never the second;
# audited on V_g, the reverse. Nothing else can name either: no answer meets them unasked (spontaneous 0), so no
# pair differs in them, and the initial generator names only the base requirement.
def probe_gaps_reach_the_rewriter(tmp: Path, seed: int) -> bool:
    """The probe-scoped requirement reaches a generator candidate, the V_g-scoped one none."""
    cut = split_numbers(tmp, seed)
    params = WorldParams(n_base=1, n_spec=0, n_contrast=0, n_hidden=0, spontaneous=0.0,
                         scoped_spec=(cut["probe"], cut["generator_gate"]), audit_miss=0.0, **FAITHFUL)
    world = TruthWorld(params, seed=seed)
    probe_tag, gate_tag = world.tags("scoped")
    solver = render_skill(SOLVER_HEADER, world.tags("base"), world.name)
    run = _run(tmp, world, "decoevo", seed=seed, steps=2, audit_every=1, solver_skill=solver)
    candidates = generator_candidates(run["run_dir"])
    return any(probe_tag in text for text in candidates) and not any(gate_tag in text for text in candidates)


@pytest.mark.parametrize("moved", ["both", "structural"])
@pytest.mark.parametrize("seed", SEEDS)
def test_structural_proposals_come_from_the_probe_set(tmp_path, seed, moved, monkeypatch):
    assert probe_gaps_reach_the_rewriter(tmp_path / "ok", seed)
    _audit_on_generator_gate(monkeypatch, moved)
    assert not probe_gaps_reach_the_rewriter(tmp_path / "broken", seed)


# ---- the blind preference: both orders, a flip is "equivalent" ---------------------------------------------
# The auditor answers "A" (the first shown) half the time whatever the pair; otherwise it is always right. Asked
# in both orders, a pair stands only when both answers name the same response, which position bias alone never
# does: every record then prefers the truly better response. Asked once, half the near ties (equal gold) become
# records preferring whichever was shown first.
POSITION_WORLD = WorldParams(n_base=1, n_spec=0, n_contrast=1, n_hidden=0, n_style=2, contrast_spontaneous=0.5,
                             pref_accuracy=1.0, position_bias=0.5, reveal_error=0.0, **FAITHFUL)


def records_prefer_the_better(tmp: Path, seed: int) -> bool:
    world = TruthWorld(POSITION_WORLD, seed=seed)
    run = _run(tmp, world, "decoevo", seed=seed, steps=2, audit_every=1, rollouts=8, pairs_per_question=4)
    records = [json.loads(line) for folder in sorted((run["run_dir"] / "audits").glob("outer_*"))
               for line in (folder / "contrastive_probe.jsonl").read_text().splitlines()]
    assert records, "no pair was decided: the check would pass on anything"
    number = [question_number(r["question"]) for r in records]
    return all(world.gold(r["preferred"], n) > world.gold(r["other"], n) for r, n in zip(records, number, strict=True))


async def _one_order(lm: Any, question: Any, first: str, second: str, *, params: Any, rubric: Any = None,
                     second_order_if_decisive: bool = False) -> tuple[int | None, str]:
    """The broken policy: the preference of one order (first shown as A) decides the pair."""
    out = await own_verdict(lm, stage1_messages(question, first, second, rubric), PreferenceOut, role=STAGE1_ROLE,
                            params=params)
    return (None if out.preference == "equivalent" else 0 if out.preference == "A" else 1), out.rationale


@pytest.mark.parametrize("seed", SEEDS)
def test_a_blind_preference_stands_only_when_both_orders_agree(tmp_path, seed, monkeypatch):
    assert records_prefer_the_better(tmp_path / "ok", seed)
    monkeypatch.setattr(audits_module, "blind_preference", _one_order)
    assert not records_prefer_the_better(tmp_path / "broken", seed)
