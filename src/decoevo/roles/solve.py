"""Role: solve. The solver skill is prepended to the system prompt; the question's turns follow."""

from __future__ import annotations

from dataclasses import replace

from ..domain import QuestionView, Response, Skill, Turn
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


async def own_history(lm: LM, question: QuestionView, skill: Skill, params: GenParams) -> QuestionView:
    """The question with each open assistant turn filled by the solver's own answer to the conversation
    up to it, in order (each earlier answer sees the ones before it). Those calls go through the cache,
    so every question of a conversation shares one set of earlier answers."""
    turns = list(question.turns)
    for k, turn in enumerate(turns):
        if turn.is_open:
            earlier = question.model_copy(update={"turns": tuple(turns[:k])})
            result = await lm.complete(messages(earlier, skill), role=ROLE, params=params)
            turns[k] = Turn(role="assistant", content=result.text.strip())
    return question.model_copy(update={"turns": tuple(turns)})


async def solve(
    lm: LM, question: QuestionView, skill: Skill, *, params: GenParams, sample_index: int = 0
) -> Response:
    p = replace(params, sample_index=sample_index)
    if any(t.is_open for t in question.turns):
        question = await own_history(lm, question, skill, p)
    result = await lm.complete(messages(question, skill), role=ROLE, params=p)
    return Response(question_id=question.id, text=result.text.strip(), skill_version=skill.version,
                    sample_index=sample_index)
