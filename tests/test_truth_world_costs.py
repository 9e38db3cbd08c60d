"""The world's cost knobs (`WorldParams`, second group): each changes what it says, and only that.

Each test fails on the round-one world, where none of these knobs exists: an extra principle was free,
the specification was an exact list of gold tags, every question shared the requirements, and the reveal
named the heaviest gold requirement the preferred response met.
"""

from __future__ import annotations

import re
import statistics
from dataclasses import replace

import pytest

from decoevo.domain import Criterion, Judgement, QuestionView, Rubric, Skill
from decoevo.domain import CriterionScore as Score
from decoevo.roles import contrastive_audit, generate_rubric, judge, rewrite_generator, rewrite_solver, solve
from decoevo.roles import structural_audit as structural
from decoevo.roles.structural_audit import StructuralRecord
from decoevo.testing.truth_world import TruthWorld, WorldParams, render_skill
from decoevo.testing.truth_world_params import PRIOR, draw_params
from tests.test_truth_world import Q, ask, rubric_of

QUIET = WorldParams(spontaneous=0.0, contrast_spontaneous=0.0, judge_noise=0.0, rubric_slip=0.0)
HEADER = "Cover each requirement below in every answer."


def _coverage(world: TruthWorld, tags: list[str], n: int = 400) -> float:
    skill = Skill(kind="solver", version=1, text=render_skill(HEADER, tags, world.name))
    hits = [
        sum(t in re.findall(r"[RD]\d\d", ask(world, solve.messages(Q, skill), temperature=0.8, index=k)) for t in tags)
        for k in range(n)
    ]
    return sum(hits) / (n * len(tags))


def test_capacity_crowds_out_principles_and_makes_a_decoy_cost_gold():
    free, tight = TruthWorld(QUIET), TruthWorld(replace(QUIET, capacity=3))
    real = [r.tag for r in free.requirements]  # seven requirements
    assert free.follow_rate(7) == pytest.approx(0.9) and tight.follow_rate(7) == pytest.approx(0.9 * 3 / 7)
    assert tight.follow_rate(3) == pytest.approx(0.9)
    assert _coverage(tight, real) == pytest.approx(0.9 * 3 / 7, abs=0.04)  # what the solver does, sampled
    padded = render_skill(HEADER, [*real, "D01", "D02"], free.name)
    plain = render_skill(HEADER, real, free.name)
    assert free.expected_gold(padded) == pytest.approx(free.expected_gold(plain))  # a decoy is free without it
    assert tight.expected_gold(padded) < tight.expected_gold(plain) - 0.05  # and costs gold with it


def test_length_cost_lowers_every_principle_as_the_strategy_grows():
    world = TruthWorld(replace(QUIET, length_cost=0.1))
    assert world.follow_rate(1) == pytest.approx(0.9)
    assert world.follow_rate(5) == pytest.approx(0.9 * 0.9**4)
    assert _coverage(world, world.tags("base") + world.tags("spec") + ["D01"]) == pytest.approx(
        0.9 * 0.9**4, abs=0.04
    )


def test_forgetting_drops_principles_no_evidence_names():
    keep = WorldParams(solver_rewrite_miss=0.0, solver_rewrite_drop=0.0, solver_rewrite_decoy=0.0)
    world, forgetful = TruthWorld(keep), TruthWorld(replace(keep, solver_forget=1.0))
    base, spec = world.tags("base"), world.tags("spec")
    solver = Skill(kind="solver", version=1, text=render_skill(HEADER, base, world.name))
    rubric = rubric_of(world, [spec[0]])
    failure = rewrite_solver.Failure(Q, "Plain.", rubric, Judgement(question_id=Q.id, scores=(Score(score=0.0),)), 0.0)
    messages = rewrite_solver.messages(solver, [failure])
    kept = ask(world, messages, rewrite_solver.SkillOut).skill
    assert all(t in kept for t in [*base, spec[0]])
    forgot = ask(forgetful, messages, rewrite_solver.SkillOut).skill
    assert spec[0] in forgot and not any(t in forgot for t in base)  # the rubric no longer rewarded them


def test_loose_criteria_are_written_and_passed_loosely():
    world = TruthWorld(replace(QUIET, vague_criteria=1.0, lenient_pass=0.7))
    generator = Skill(kind="generator", version=0, text=world.initial_generator_skill())
    criteria = ask(world, generate_rubric.messages(Q, generator), generate_rubric.rubric_schema(8)).criteria
    tagged = [c.criterion for c in criteria if re.search(r"R\d\d", c.criterion)]
    assert tagged and all("loosely" in c for c in tagged)
    tag = world.tags("spec")[0]
    loose_criterion = Criterion(text=f"Touches on {tag}, loosely", weight=3)
    loose = Rubric(question_id=Q.id, generator_version=0, criteria=(loose_criterion,))
    strict = rubric_of(world, [tag])

    def passed(rubric: Rubric) -> float:
        schema = judge.joint_schema(1)
        levels = [
            ask(world, judge.joint_messages(Q, f"Plain answer {k}.", rubric), schema, 0.8, k).verdicts[0].level
            for k in range(300)
        ]
        return statistics.fmean(level == 4 for level in levels)

    assert passed(loose) == pytest.approx(0.7, abs=0.07) and passed(strict) == 0.0


def test_a_misspecified_specification_lists_unrewarded_items_and_vague_ones_the_audit_cannot_check():
    p = WorldParams(audit_miss=0.0, audit_noise=0.0)
    world = TruthWorld(replace(p, spec_decoys=2))
    listed = world.tags("base") + world.tags("spec")
    spec = world.spec_text()
    assert "D01" in spec and "D02" in spec and world.gold("It addresses D01 and D02.") == 0.0
    out = ask(world, structural.messages(spec, Q, rubric_of(world, listed)), structural.StructuralOut)
    assert "D01" in out.repair and out.adequacy == 7  # four of six listed items: the decoys count as missing
    vague = TruthWorld(replace(p, spec_vague=1.0))
    assert not re.findall(r"R\d\d", vague.spec_text())
    assert all(r.name in vague.spec_text() for r in vague.requirements[:4])
    out = ask(vague, structural.messages(vague.spec_text(), Q, rubric_of(vague, ["D03"])), structural.StructuralOut)
    assert not re.findall(r"R\d\d", out.repair)  # nothing checkable to name


def test_requirements_can_vary_by_question():
    world = TruthWorld(WorldParams(question_share=0.5), seed=1)
    rows = world.questions(20)
    sets = {tuple(i["text"][10:13] for i in row["gold"]["items"]) for row in rows}
    assert len(sets) > 3  # the gold rubric differs between questions
    every = " ".join(r.tag for r in world.requirements)
    assert all(world.gold(every, i) == 1.0 for i in range(20))
    tag = world.requirements[0].tag
    absent = [i for i in range(20) if not world.applies(tag, i)]
    assert absent and world.gold(tag, absent[0]) == 0.0  # it does not count where it does not apply
    assert TruthWorld(seed=1).questions(3)[0]["gold"] == TruthWorld(seed=1).questions(3)[1]["gold"]  # default


def _reveal(world: TruthWorld, preferred: str, other: str, measured: list[str]) -> str:
    rubric = rubric_of(world, measured)
    judged = Judgement(question_id=Q.id, scores=tuple(Score(score=1.0) for _ in measured))
    messages = contrastive_audit.stage2_messages(Q, preferred, other, "A is better", rubric, judged, judged)
    return ask(world, messages, contrastive_audit.RevealOut).principle


def test_the_reveal_explains_the_auditors_preference_never_the_truth():
    world = TruthWorld(WorldParams(reveal_error=0.0, n_style=2))
    base, contrast = world.tags("base")[0], world.tags("contrast")[0]
    # a style tag (no gold weight) is the only unmeasured difference: it is what the preference is explained by
    assert "D05" in _reveal(world, f"It addresses {base}. D05.", f"It addresses {base}.", [base])
    # a difference the rubric measures explains the preference: nothing is missing, whatever else differs
    assert not re.findall(r"[RD]\d\d", _reveal(world, f"{base}. {contrast}.", "Plain.", [base]))
    # the same texts in worlds whose truths differ (weights, kinds) get the same explanation
    other = TruthWorld(WorldParams(reveal_error=0.0, n_style=2, n_base=1, n_hidden=3, weight_min=5))
    pair = (f"It addresses {base}. It addresses {contrast}. D05.", f"It addresses {base}.", [base])
    assert _reveal(world, *pair) == _reveal(other, *pair)


def test_a_generator_rewrite_can_soften_a_principle_and_evidence_restores_it():
    p = WorldParams(generator_rewrite_miss=0.0, generator_rewrite_drop=0.0, generator_rewrite_decoy=0.0)
    world = TruthWorld(replace(p, generator_rewrite_soften=1.0, rubric_slip=0.0))
    generator = Skill(kind="generator", version=0, text=world.initial_generator_skill())
    silent = StructuralRecord(
        question_id=Q.id, adequacy=1.0, rationale="fine", repair="keep", question=Q.as_text(), rubric="1. x"
    )
    softened = ask(world, rewrite_generator.messages(generator, [silent], []), rewrite_generator.GeneratorSkillOut)
    assert "brief mention" in softened.skill
    soft = Skill(kind="generator", version=1, text=softened.skill)
    criteria = ask(world, generate_rubric.messages(Q, soft), generate_rubric.rubric_schema(8)).criteria
    assert sum("loosely" in c.criterion for c in criteria) == 1
    (loose,) = [t for t in world.tags("base") if f"{t} ({world.name(t)}): a brief" in softened.skill]
    named = silent.model_copy(update={"repair": f"Add a criterion that checks {loose}."})
    calm = TruthWorld(p)
    restored = ask(calm, rewrite_generator.messages(soft, [named], []), rewrite_generator.GeneratorSkillOut)
    assert "brief mention" not in restored.skill and loose in restored.skill


def test_the_prior_draws_every_knob_from_its_stated_range():
    drawn = [draw_params(i) for i in range(200)]
    assert drawn[3] == draw_params(3)
    for name, values in PRIOR.items():
        seen = {getattr(p, name) for p in drawn}
        assert seen == set(values), name
    assert {p.judge_noise for p in drawn} == {WorldParams().judge_noise}  # the round-one knobs stay


def test_a_position_biased_auditor_answers_a_whatever_the_pair():
    """`position_bias`: the first shown wins that often, even when the second is the better; asked in both
    orders, the two answers then disagree, which the engine reads as equivalent."""
    for bias, expect in ((0.0, 0.0), (0.5, 0.5), (1.0, 1.0)):
        world = TruthWorld(replace(QUIET, pref_accuracy=1.0, position_bias=bias))
        worse, better = "Here is a short answer.", " ".join(f"It addresses {r.tag}." for r in world.requirements)
        said = [ask(world, contrastive_audit.stage1_messages(Q, worse, better), contrastive_audit.PreferenceOut,
                    temperature=0.8, index=k).preference for k in range(300)]
        assert said.count("A") / len(said) == pytest.approx(expect, abs=0.08)
        assert set(said) <= {"A", "B"}


def test_a_local_requirement_counts_only_on_its_questions():
    """`n_local` / `local_questions`: an idiosyncrasy of some questions (e.g. V_g's), worth nothing elsewhere."""
    world = TruthWorld(replace(QUIET, n_local=1, local_questions=(1, 5)))
    (tag,) = world.tags("local")
    other = world.tags("base")[0]
    with_it, without = f"It addresses {other} and {tag}.", f"It addresses {other}."
    assert world.gold(with_it, 1) > world.gold(without, 1)
    assert world.gold(with_it, 2) == world.gold(without, 2)
    assert tag not in world.spec_text() and tag not in world.initial_generator_skill()


def test_a_scoped_specification_requirement_is_a_gap_only_on_its_questions():
    """`scoped_spec`: the specification lists a requirement for some questions only; the structural auditor
    names it, and counts it in adequacy, only when it audits one of them; gold counts it only there."""
    world = TruthWorld(replace(QUIET, n_base=1, n_spec=0, audit_miss=0.0, audit_noise=0.0, scoped_spec=((1, 5), (2,))))
    ones, twos = world.tags("scoped")
    assert f"{ones} ({world.name(ones)}), on questions 1, 5 only" in world.spec_text()
    base = world.tags("base")
    with_it, without = f"It addresses {' '.join(base)} {ones}.", f"It addresses {' '.join(base)}."
    assert world.gold(with_it, 1) > world.gold(without, 1) and world.gold(with_it, 2) == world.gold(without, 2)

    def audit(number: int, tags: list[str]) -> structural.StructuralOut:
        q = QuestionView.from_text(f"q{number:03d}", f"Question {number}: what should I do about a rash?")
        rubric = rubric_of(world, tags).model_copy(update={"question_id": q.id})
        return ask(world, structural.messages(world.spec_text(), q, rubric), structural.StructuralOut)

    assert ones in audit(1, base).repair and ones in audit(5, base).repair
    assert twos in audit(2, base).repair and ones not in audit(2, base).repair
    assert "Keep" in audit(3, base).repair and audit(3, base).adequacy == 10  # no scoped item is question 3's
    assert audit(1, base).adequacy == 5 and audit(1, [*base, ones]).adequacy == 10


def test_the_prior_draws_worlds_with_nothing_to_find_and_wrong_auditors():
    """Round three's prior draws the requirement mix: worlds where no audit can find a rewarded requirement,
    and worlds where a wrong preference can name an unrewarded style tag, each at the rate its values state."""
    drawn = [draw_params(i) for i in range(2000)]
    nothing = sum(p.n_spec == 0 and p.n_contrast == 0 for p in drawn) / len(drawn)
    assert nothing == pytest.approx(4 / 25, abs=0.025)
    misled = sum(p.n_style > 0 and p.pref_accuracy <= 0.5 for p in drawn) / len(drawn)
    assert misled == pytest.approx(2 / 3 * 2 / 5, abs=0.03)
    assert all(len(TruthWorld(p).requirements) >= 1 for p in drawn[:50])
