"""Non-skills are never gated: a rewrite that answers one of the questions it was shown, copies a question
or echoes the rewriter's own instructions, or tells its reader nothing to do, is invalid with its reason
(engine/validity.py). Planted through a scripted rewriter in a real engine run, and checked pure; the
skills the toy and simulated worlds write stay valid (their own tests run their full loops)."""

from __future__ import annotations

import json
import re

import pytest

from decoevo.domain import Question
from decoevo.engine.run import Engine
from decoevo.engine.validity import Shown, check_candidate, has_instruction_form
from decoevo.lm import LM, LMConfig, RequestCache
from decoevo.roles.rewrite_generator import SYSTEM as GENERATOR_REWRITER
from decoevo.roles.rewrite_solver import SYSTEM as SOLVER_REWRITER
from decoevo.rundir import RunReader
from decoevo.rundir.outcomes import Outcome
from decoevo.tasks.specs import INITIAL_GENERATOR_SKILL, INITIAL_SOLVER_SKILL
from decoevo.testing import world
from decoevo.testing.scripted import ScriptedBackend

from .engine_helpers import toy_config

COOKING = [
    "My risotto is too sticky and gluey every time I make it, even though I follow the recipe. What am I "
    "doing wrong with the arborio rice?",
    "How long should I rest a steak after grilling it on a charcoal barbecue before slicing it?",
    "Is it safe to refreeze chicken thighs that have thawed in the fridge overnight?",
    "Why does my sourdough loaf come out dense and flat even with an active starter?",
    "Can I substitute baking soda for baking powder in pancakes, and how much should I use?",
    "What is the best way to keep guacamole from turning brown before a party?",
]
# What SmolLM2 shipped as "the improved solver skill" in issue 34, in kind: the answer to one question.
RISOTTO_ANSWER = ("Your_Risotto_is_too_sticky because the arborio rice releases its starch when it is stirred "
                  "all the time. Rinse the rice, add hot stock a ladle at a time and take it off the heat "
                  "while the grains are still al dente.")
GOOD_SOLVER_SKILL = ("Answer the question directly, then explain the likely cause. State food-safety limits with "
                     "temperatures and times. For a failed recipe, name the most likely mistake first and how "
                     "to fix it next time.")


@pytest.mark.parametrize(("text", "problem", "words"), [
    (RISOTTO_ANSWER, "answer", ("answers one question", "risotto")),
    (COOKING[0] + " Answer it.", "question", ("copies 27 of the 27 words of a question",)),
    (SOLVER_REWRITER[:700], "instructions", ("echoes the rewriter's own instructions",)),
    ("Answer directly. " + SOLVER_REWRITER[:260], "instructions", ("echoes",)),
    ("The capital of France is Paris, a city on the Seine with many museums.", "not_instructions",
     ("tells its reader nothing to do",)),
    # SmolLM2's shipped "improvement" against a served model (issue 34's trial): it names a directive word
    # ("helps to avoid") but only reports on a change
    ("The new strategy is to use a combination of the original strategy and the additional information "
     "provided by the grader. The updated strategy includes a list of the key features that were mentioned "
     "in the material, which helps to avoid any potential biases or limitations that may have been introduced "
     "during the evaluation process.", "not_instructions", ("describes a rewrite", "3 mentions")),
])
def test_a_non_skill_is_invalid_with_its_reason(text: str, problem: str, words: tuple[str, ...]) -> None:
    verdict = check_candidate(text, INITIAL_SOLVER_SKILL, shown=Shown(SOLVER_REWRITER, tuple(COOKING[:3])))
    assert not verdict.valid and verdict.problem == problem, verdict
    for word in words:
        assert word in verdict.reason, verdict.reason


@pytest.mark.parametrize("skill", [
    GOOD_SOLVER_SKILL,
    # naming one question's particulars once, as an example, is still a rule
    "Name the likely cause before the fix, e.g. why a risotto turns sticky. Give times and temperatures.",
    "SAFETY first: say when to seek care.",  # the toy world's rewrite
    "Cover each requirement below in every answer.\n- R01 (dosage): always address it.",  # the truth world's
    "- Keep each answer under 200 words\n- Lead with the answer",
    # a skill may name itself once
    "Follow this strategy over the previous version's habits: answer first, then give the reason.",
    INITIAL_SOLVER_SKILL, INITIAL_GENERATOR_SKILL,
])
def test_real_skills_stay_valid(skill: str) -> None:
    assert has_instruction_form(skill)
    shown = Shown(SOLVER_REWRITER, tuple(COOKING), ("Rest the steak five minutes under foil.",))
    assert check_candidate(skill, "Answer the user.", shown=shown).valid


def test_text_inherited_from_the_parent_is_no_copy() -> None:
    """A user's initial skill may quote anything; only what the rewrite adds can be a copy."""
    parent = "Answer directly. " + SOLVER_REWRITER[:300]
    child = parent + " Then give times and temperatures."
    assert check_candidate(child, parent, shown=Shown(SOLVER_REWRITER)).valid


def _cooking_questions() -> list[Question]:
    return [Question.from_text(f"c{i:02d}", text, task="healthbench")
            for i, text in enumerate(COOKING * 3)]


def _planting_backend() -> ScriptedBackend:
    """The toy world, but its solver rewriter answers the first question it was shown, and its generator
    rewriter echoes its own instructions."""
    def script(request):
        messages = [m.as_dict() for m in request.messages]
        title = (request.json_schema or {}).get("title", "")
        if title == "SkillOut":
            first = re.search(r"<question>\n(.*?)\n</question>", messages[-1]["content"], re.S)
            assert first is not None
            question = " ".join(line.removeprefix("> ") for line in first.group(1).splitlines())
            return json.dumps({"analysis": "the answers missed the point",
                               "skill": f"About your question: {question} The answer: it depends on the "
                                        "ingredient, the heat and the time you give it."})
        if title == "GeneratorSkillOut":
            return json.dumps({"analysis": "restated", "skill": GENERATOR_REWRITER[:900]})
        return world.respond(messages, request.json_schema, request.params.sample_index)
    return ScriptedBackend(script)


async def test_planted_non_skills_are_never_gated_and_say_why(tmp_path) -> None:
    backend = _planting_backend()
    lm = LM(LMConfig(), backends={"default": backend}, cache=RequestCache(tmp_path / "cache.sqlite"))
    engine = Engine(toy_config("decoevo"), tmp_path / "run", lm=lm, questions=_cooking_questions())
    result = await engine.run_async()
    reader = RunReader(result.run_dir)
    events = reader.events()
    invalid = [e for e in events if e.event == "invalid_candidate"]
    by_skill = {e.skill: e for e in invalid}
    assert by_skill["solver"].problem in ("question", "answer"), by_skill["solver"]
    assert "instead of stating general rules" in by_skill["solver"].reason or "answers one question" in \
        by_skill["solver"].reason
    assert by_skill["generator"].problem == "instructions"
    assert "echoes the rewriter's own instructions" in by_skill["generator"].reason
    inner = [e for e in events if e.event == "inner_step"]
    outer = [e for e in events if e.event == "outer_round"]
    assert inner and all(e.candidate_outcome is Outcome.INVALID for e in inner), inner
    assert outer and all(e.candidate_outcome is Outcome.INVALID for e in outer), outer
    assert not reader.has("gates/step000.json")  # never gated
    assert result.state.solver.version == 0 and result.state.generator.version == 0  # nothing shipped
    assert reader.summary().final_solver.startswith("initial")
