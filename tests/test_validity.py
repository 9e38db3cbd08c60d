"""Pure policies and role-level fidelity: candidate validity, stage-1 labels, record rendering, schemas
sent to servers versus the embedded model's grammar caps, and token limits by backend."""

from __future__ import annotations

import json
import re

import pytest

from decoevo.domain import Question
from decoevo.engine.config import config_from_dict, with_backend_token_limits
from decoevo.engine.validity import MAX_CODE_SHARE, MIN_LETTER_SHARE, check_candidate
from decoevo.engine.validity import _shares as shares_of
from decoevo.lm import GenParams
from decoevo.lm.config import ModelSpec
from decoevo.lm.local import cut_at_grammar_cap, grammar_schema
from decoevo.lm.structured import schema_for
from decoevo.lm.types import BackendRequest, Message
from decoevo.roles.contrastive_audit import ContrastiveRecord, blind_preference
from decoevo.roles.generate_rubric import rubric_schema
from decoevo.roles.judge import joint_schema
from decoevo.roles.rewrite_generator import record_entries
from decoevo.roles.rewrite_solver import SkillOut
from decoevo.roles.structural_audit import StructuralOut, StructuralRecord
from decoevo.tasks.specs import INITIAL_SOLVER_SKILL

# What the embedded model's rewrite shipped as final_solver_skill.md in issue 9, verbatim.
ISSUE_9_SKILL = "{\n    content: {"
# The embedded model's solver rewrite that a noisy gate accepted on the README's first command, verbatim.
LOOPED_SKILL = ("skill is a medical AI, and it's designed to assist users. It's not a medical AI, but it's a "
                "medical AI, and it's designed to assist users. It's not a medical AI, but it's a medical AI, "
                "and it's designed to assist users. It's not a medical AI, but it's a medical AI, and it's "
                "designed to assist users.")
LONG_PARENT = " ".join(["Answer directly, cover what matters most first, and state the caveats that apply."] * 6)


@pytest.mark.parametrize(("text", "kwargs", "problem"), [
    (ISSUE_9_SKILL, {}, "fragment"),
    ("{\n    \"content\": {\"rules\": \"Answer the user directly and state caveats\"", {}, "fragment"),
    ("def rewrite(skill):\n    return skill.strip() + '\\n' + '; '.join(map(str, range(9)))", {}, "fragment"),
    ("   \n  ", {}, "empty"),
    ("Be safe.", {}, "empty"),
    (LOOPED_SKILL, {}, "repetitive"),
    ("Answer the user directly and accurately, then stop", {"truncated": True}, "truncated"),
    (INITIAL_SOLVER_SKILL.upper() + "  ", {}, "copy"),
    ("Answer directly and state the caveats.", {"parent": LONG_PARENT}, "collapsed"),
])
def test_invalid_candidates_are_named_with_a_reason(text, kwargs, problem):
    parent = kwargs.pop("parent", INITIAL_SOLVER_SKILL)
    verdict = check_candidate(text, parent, **kwargs)
    assert not verdict.valid and verdict.problem == problem and verdict.reason


def test_valid_candidates_pass_including_a_cut_the_rewriter_explains():
    rewrite = "Put safety first: say when to seek care. Answer directly, then give the caveats that apply."
    assert check_candidate(rewrite, INITIAL_SOLVER_SKILL).valid
    short = "Answer directly and state the caveats."
    assert check_candidate(short, LONG_PARENT, analysis="merged six duplicate rules into one").valid
    # frozen: a decision cannot be edited after the fact
    with pytest.raises(AttributeError):
        check_candidate(rewrite, INITIAL_SOLVER_SKILL).valid = False  # type: ignore[misc]


class _Positional:
    """A stage-1 auditor that prefers the response containing GOOD and says so by its position."""

    def __init__(self) -> None:
        self.ledger = None

    async def structured(self, messages, schema, *, role, params):
        user = messages[-1].content
        a = user.split("<response_a>")[1].split("</response_a>")[0]
        letter = "A" if "GOOD" in a else "B"
        return schema(rationale=f"Response {letter} names the warning signs", preference=letter)

    def model_for(self, role):
        return "default"


async def test_stage1_rationale_always_names_the_preferred_response_as_a():
    view = Question.from_text("q1", "My head hurts. What now?", task="healthbench").view()
    lm = _Positional()
    for first, second, winner in (("GOOD answer", "weak answer", 0), ("weak answer", "GOOD answer", 1)):
        won, rationale = await blind_preference(lm, view, first, second, params=GenParams())  # type: ignore[arg-type]
        # stage 2 shows the preferred response as A: the reason it reads must call it A too
        assert won == winner and rationale == "Response A names the warning signs"


def test_generator_rewriter_reads_bounded_record_tuples():
    structural = [StructuralRecord(question_id=f"s{i}", adequacy=i / 100, rationale="omits dosing " * 60,
                                   repair="ask for the dose " * 40, question=f"Question {i}? " + "x" * 2000,
                                   rubric="1. (weight 3) Mentions rest") for i in range(40)]
    contrastive = [ContrastiveRecord(question_id=f"c{i}", question="Knee pain?", preferred="r plus " * 400,
                                     other="r minus " * 400, rationale="A names red flags",
                                     missed="no criterion on red flags", principle="reward red flags")
                   for i in range(40)]
    entries = record_entries(structural, contrastive, max_chars=6000)
    text = "\n\n".join(entries)
    assert len(text) < 6000 + 200 and entries[-1].endswith("more records left out for length)")
    first_s, first_c = entries[0], entries[1]  # the least adequate rubric first; both kinds survive
    assert "Question 0?" in first_s and "Rubric audited:\n1. (weight 3) Mentions rest" in first_s
    assert "Omitted or unclear: omits dosing" in first_s and "Suggested repair: ask for the dose" in first_s
    for field in ("Question: Knee pain?", "Preferred answer (r+): r plus", "Other answer (r-): r minus",
                  "judged without the rubric: A names red flags", "What the rubric missed: no criterion on "
                  "red flags", "Principle: reward red flags"):
        assert field in first_c


def _strings(schema) -> list[dict]:
    out = []
    if isinstance(schema, dict):
        if schema.get("type") == "string":
            out.append(schema)
        for v in schema.values():
            out += _strings(v)
    elif isinstance(schema, list):
        for v in schema:
            out += _strings(v)
    return out


def test_role_schemas_carry_no_small_caps_and_the_wire_carries_no_length_caps():
    from decoevo.lm.openai_backend import OpenAIBackend

    for model in (rubric_schema(8), joint_schema(3), StructuralOut, SkillOut):
        caps = [s["maxLength"] for s in _strings(schema_for(model)) if "maxLength" in s]
        assert all(c >= 4000 for c in caps), (model, caps)  # only the skill's own 4000-character bound
    for mode in ("json_schema", "json_object"):
        backend = OpenAIBackend(ModelSpec(backend="openai", model="m", base_url="http://127.0.0.1:9/v1",
                                          structured_output=mode))
        for model in (rubric_schema(8), SkillOut):
            body = backend._body(BackendRequest("default", (Message("user", "q"),), GenParams(),
                                                schema_for(model)))
            assert b"maxLength" not in body
            assert json.loads(body)["response_format"]


def test_the_embedded_grammar_keeps_small_caps_by_field_name():
    g = grammar_schema(schema_for(rubric_schema(3)), 1000)
    assert _strings(g["$defs"]["CriterionOut"])[0]["maxLength"] == 120
    skill = grammar_schema(schema_for(SkillOut), 1000)["properties"]
    assert skill["skill"]["maxLength"] == 1000 and skill["analysis"]["maxLength"] == 200
    own = grammar_schema({"type": "object", "properties": {"rationale": {"type": "string", "maxLength": 90}}}, 1000)
    assert own["properties"]["rationale"]["maxLength"] == 90  # a schema's own bound wins


def test_a_skill_closed_by_the_embedded_grammar_counts_as_cut_off():
    cut = json.dumps({"analysis": "a" * 200, "skill": ("Answer directly. " * 60)[:1000]})
    assert cut_at_grammar_cap(cut, 1000)
    assert not cut_at_grammar_cap(json.dumps({"analysis": "a" * 200, "skill": "Answer directly."}), 1000)
    assert not cut_at_grammar_cap("not json", 1000)


def test_token_limits_fit_the_backend_serving_each_role():
    server = {"models": {"default": {"backend": "openai", "base_url": "http://127.0.0.1:8000/v1"}}}
    base = {"data": {"path": "x.jsonl"}}
    local = with_backend_token_limits(config_from_dict(base)).hyper
    assert local.max_tokens_solve == 320  # the embedded model keeps its small default
    remote = with_backend_token_limits(config_from_dict({**base, "lm": server})).hyper
    assert remote.max_tokens_solve >= 2048 and remote.max_tokens_judge > local.max_tokens_judge
    chosen = with_backend_token_limits(config_from_dict({**base, "lm": server,
                                                         "hyper": {"max_tokens_solve": 100}})).hyper
    assert chosen.max_tokens_solve == 100  # what the user set is kept


PROSE = ("Answer the question the user asked first, in plain words. State the main risk and when to see a "
         "clinician. Keep it short and concrete")


@pytest.mark.parametrize(("text", "says"), [
    (PROSE + " {", "breaks off at a trailing '{'"),  # prose whose numbers are prose's: the reason is the end
    (PROSE + ":", "breaks off at a trailing ':'"),
    ("<rules>" + PROSE, "starts with '<'"),
    ('{"a": [1, 2], "b": {"c": (3)}} ' * 3, "of its characters are letters"),
    (PROSE + " (a) [b] {c} <d> x=y; z|w (e) [f] {g} <h>", "brackets and the like"),
])
def test_a_fragment_reason_names_the_test_it_failed_and_agrees_with_its_numbers(text: str, says: str) -> None:
    result = check_candidate(text, "Be brief.")
    assert result.problem == "fragment" and says in result.reason, result.reason
    for share in re.findall(r"(\d+)% of its characters are (letters|brackets)", result.reason):
        letters, code = shares_of(text)
        value = letters if share[1] == "letters" else code
        assert round(value * 100) == int(share[0])
        assert (value < MIN_LETTER_SHARE) if share[1] == "letters" else (value > MAX_CODE_SHARE)
