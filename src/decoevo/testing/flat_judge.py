"""The toy world with a judge that cannot tell answers apart: every criterion of every answer gets the same
level, as the embedded SmolLM2-135M was seen to do. Every other role answers as the toy world does, so a
run on it completes; its scores are the same whatever the answer, and `analysis.discrimination` says so.
"""

from __future__ import annotations

import json
from typing import Any

from . import world
from .fake_openai import FakeOpenAI, Reply
from .toy_server import toy_reply, unwrap_repair

FLAT_LEVEL = 2


def flat_respond(messages: list[dict[str, str]], schema: dict[str, Any] | None, sample_index: int = 0) -> str:
    """`world.respond`, with every judge verdict at FLAT_LEVEL."""
    title = (schema or {}).get("title", "")
    if title.startswith("JointVerdicts"):
        n = int(title.removeprefix("JointVerdicts"))
        return json.dumps({"verdicts": [{"rationale": "looks fine", "level": FLAT_LEVEL}] * n})
    if title == "CriterionVerdict":
        return json.dumps({"rationale": "looks fine", "level": FLAT_LEVEL})
    return world.respond(messages, schema, sample_index)


def flat_judge_reply(body: dict[str, Any], n: int) -> Reply:
    title = (world.schema_of(body) or {}).get("title", "")
    if title.startswith("JointVerdicts") or title == "CriterionVerdict":
        return Reply(content=flat_respond(unwrap_repair(body["messages"]), world.schema_of(body)))
    return toy_reply(body, n)


def flat_judge_server() -> FakeOpenAI:
    """The toy world's server (model `toy`) with the flat judge."""
    return FakeOpenAI(flat_judge_reply, models=("toy",))
