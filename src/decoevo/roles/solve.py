"""Role: solve. The solver skill is prepended to the system prompt; the question's turns follow."""

from __future__ import annotations

from ..domain import QuestionView, Response, Skill
from ..lm import LM, GenParams, Message

ROLE = "solve"

BASE_INSTRUCTIONS = "You are the assistant in the conversation below. Write your reply to the user's last message."


def messages(question: QuestionView, skill: Skill) -> list[Message]:
    system = f"{BASE_INSTRUCTIONS}\n\nStrategy to follow:\n{skill.text}" if skill.text.strip() else BASE_INSTRUCTIONS
    turns = [Message(t.role, t.content) for t in question.turns if t.role != "system"]
    # A question's own system turn (rare) is kept, after ours, so the feature's context survives.
    own_system = [t.content for t in question.turns if t.role == "system"]
    if own_system:
        system += "\n\n" + "\n".join(own_system)
    return [Message("system", system), *turns]


async def solve(
    lm: LM, question: QuestionView, skill: Skill, *, params: GenParams, sample_index: int = 0
) -> Response:
    p = GenParams(params.temperature, params.max_tokens, params.seed, sample_index)
    result = await lm.complete(messages(question, skill), role=ROLE, params=p)
    return Response(question_id=question.id, text=result.text.strip(), skill_version=skill.version,
                    sample_index=sample_index)
