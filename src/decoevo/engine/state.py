"""The loop state saved at every checkpoint: enough to resume, small enough to read."""

from __future__ import annotations

from pydantic import BaseModel, Field

from ..domain import Skill


class LoopState(BaseModel):
    next_step: int = 0
    solver: Skill
    generator: Skill
    consecutive_rejections: int = 0
    outer_rounds: int = 0
    last_round_step: int = -1  # the inner step after which the last outer round ran
    solver_accepts: int = 0
    generator_accepts: int = 0
    audit_notes: list[str] = Field(default_factory=list)
    failed_steps: int = 0  # steps or rounds voided by an unusable model output (see events.jsonl)
    generator_tokens: int = 0  # effective tokens paid inside outer rounds (the co-evolution budget reads it)
    idle_steps: int = 0  # steps of a topped-up run that spent nothing (engine/top_up.py): not counted to its cap
    stopped: str | None = None
