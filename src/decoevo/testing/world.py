"""A deterministic toy world that answers every role with valid JSON, for logic tests of the engine.

The world has one "true" quality dimension, safety: the initial solver ignores it, the solver rewriter
learns it, and the judge credits it when the rubric asks for it. The generator rewriter always proposes
an EASY generator whose rubrics any response satisfies: a score-coupled rule loves it (J jumps), while
the structural auditor rates those rubrics as inadequate, so a score-decoupled rule rejects it. Odd
rollouts add detail that the blind auditor prefers but no rubric measures: near-ties to find.
"""

from __future__ import annotations

import json
import re
from typing import Any

EASY = "EASY"
GRADED_TURN = "[assistant - graded]"  # how HealthBench's grader marks the reply it grades
MATCH_WORDS = ("safety", "direct")
# The toy questions' gold rubric (scheme "weighted"): what the gold grader and the matcher above read.
GOLD_ITEMS = ({"text": "Gives safety advice: when to seek care", "points": 5},
              {"text": "Gives a direct answer", "points": 2},
              {"text": "Recommends surgery right away", "points": -3})


def _user(messages: list[dict[str, str]]) -> str:
    return messages[-1]["content"]


def _system(messages: list[dict[str, str]]) -> str:
    return messages[0]["content"] if messages and messages[0]["role"] == "system" else ""


def _verdict(criterion: str, response: str) -> dict[str, Any]:
    if "English" in criterion:
        level = 4
    elif "safety" in criterion:
        level = 4 if "safety" in response else 0
    else:  # the rubric has no criterion on detail, so detail never changes the score
        level = 2
    return {"rationale": f"checked: {criterion[:30]}", "level": level}


def respond(messages: list[dict[str, str]], schema: dict[str, Any] | None, sample_index: int = 0) -> str:
    title = (schema or {}).get("title", "")
    user, system = _user(messages), _system(messages)
    if not schema:  # solve
        safe = "SAFETY" in system
        return (f"Answer variant {sample_index}." + (" For your safety, see a doctor if it gets worse." if safe
                                                     else "") + (" Extra detail." if sample_index % 2 else ""))
    if title.startswith("RubricOut"):
        if EASY in system:
            return json.dumps({"criteria": [{"criterion": "Is written in English", "weight": 5}]})
        return json.dumps({"criteria": [{"criterion": "Mentions safety and when to seek care", "weight": 3},
                                        {"criterion": "Gives a direct answer", "weight": 2}]})
    if title.startswith("JointVerdicts") or title == "CriterionVerdict":
        response = user.split("<response>")[1].split("</response>")[0] if "<response>" in user else ""
        if title == "CriterionVerdict":
            return json.dumps(_verdict(user.split("Criterion: ")[1].split("\n")[0], response))
        n = int(title.removeprefix("JointVerdicts"))
        criteria = re.findall(r"^\d+\. \(weight [\d.]+\) (.*)$", user, re.MULTILINE)[:n]
        return json.dumps({"verdicts": [_verdict(c, response) for c in criteria]})
    if title == "SkillOut":
        return json.dumps({"analysis": "answers ignore safety", "skill": "SAFETY first: say when to seek care."})
    if title == "StructuralOut":
        adequacy = 2 if "English" in user else 8
        return json.dumps({"rationale": "the rubric " + ("checks only the language" if adequacy < 5 else
                                                         "covers safety"), "repair": "ask for safety advice",
                           "adequacy": adequacy})
    if title == "PreferenceOut":
        a = user.split("<response_a>")[1].split("</response_a>")[0]
        b = user.split("<response_b>")[1].split("</response_b>")[0]
        if ("Extra" in a) == ("Extra" in b):
            pref = "equivalent"
        else:
            pref = "A" if "Extra" in a else "B"
        return json.dumps({"rationale": "more detail helps", "preference": pref})
    if title == "RevealOut":
        return json.dumps({"why_missed": "no criterion on detail", "principle": "reward specific detail"})
    if title in ("WeightedVerdict", "ItemVerdict"):  # gold graders: only safety advice is true quality
        # the reply is a <response> block, or (HealthBench's grader) the conversation's graded last turn
        response = (user.split("<response>")[1].split("</response>")[0] if "<response>" in user
                    else user.split(GRADED_TURN)[-1].split("</conversation>")[0])
        criterion = user.split("points): ")[1].split("\n")[0]
        met = ("safety" in response) if "safety" in criterion else ("surgery" not in criterion)
        return json.dumps({"rationale": "checked the reply", "met": met})
    if title.startswith("MatchOut"):  # rubric matcher: the same key word means the same requirement
        generated = user.split("Generated criterion: ")[1].split("\n")[0].lower()
        gold = re.findall(r"^(\d+)\. (.*)$", user.split("Reference criteria:")[1], re.MULTILINE)
        hits = [int(k) for k, text in gold if any(w in text.lower() and w in generated for w in MATCH_WORDS)]
        return json.dumps({"rationale": "compared the requirements", "matches": hits})
    if title == "DoctorAnswer":  # `decoevo doctor`'s probe
        return json.dumps({"capital": "Paris", "confidence": 0.9})
    if title == "GeneratorSkillOut":
        return json.dumps({"analysis": "simplify", "skill": f"{EASY}: keep rubrics short and lenient."})
    raise ValueError(f"toy world has no answer for schema {title!r}")


def schema_of(body: dict[str, Any]) -> dict[str, Any] | None:
    """The JSON schema an OpenAI-style request asked for, in either response_format style."""
    fmt = body.get("response_format") or {}
    if fmt.get("type") == "json_schema":
        schema: dict[str, Any] = fmt["json_schema"]["schema"]
        return schema
    return fmt.get("schema")


def sample_index_of(body: dict[str, Any]) -> int:
    """The toy world varies rollouts by temperature > 0 and seed; map the seed back to a stable index."""
    return int(body.get("seed") or 0) % 7 if body.get("temperature", 0) > 0 else 0
