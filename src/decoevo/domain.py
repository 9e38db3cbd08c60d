"""The data model: questions, rubrics, scores, responses and skills.

Gold rubrics live on `Question` and nowhere else. Every optimization role receives a
`QuestionView`, which has no gold field, so no prompt can leak one by construction.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

TurnRole = Literal["system", "user", "assistant"]

# How an open assistant turn reads in a transcript shown to a judge or a rubric generator.
OPEN_TURN_TEXT = "(the assistant's own earlier answer in this conversation)"


class Turn(BaseModel):
    """One turn. An assistant turn with empty content is *open*: an earlier answer of a multi-turn
    conversation that the solver writes itself when it answers (its own earlier answer, never a
    reference answer, which is gold)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    role: TurnRole
    content: str

    @classmethod
    def open_assistant(cls) -> Turn:
        return cls(role="assistant", content="")

    @property
    def is_open(self) -> bool:
        return self.role == "assistant" and not self.content


class QuestionView(BaseModel):
    """What optimization roles may see of a question."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(min_length=1)
    task: str = Field("generic", description="task family; selects the structural-audit specification")
    turns: tuple[Turn, ...] = Field(min_length=1)

    @field_validator("turns")
    @classmethod
    def _ends_with_user(cls, turns: tuple[Turn, ...]) -> tuple[Turn, ...]:
        if turns[-1].role != "user":
            raise ValueError("the last turn of a question must be from the user")
        return turns

    @classmethod
    def from_text(cls, qid: str, text: str, task: str = "generic") -> QuestionView:
        return cls(id=qid, task=task, turns=(Turn(role="user", content=text),))

    def as_text(self) -> str:
        """The question as one block of text: the prompt itself, or a transcript for conversations."""
        if len(self.turns) == 1:
            return self.turns[0].content
        return "\n\n".join(f"[{t.role}]\n{OPEN_TURN_TEXT if t.is_open else t.content}" for t in self.turns)


class GoldItem(BaseModel):
    """One gold criterion as the benchmark defines it (points may be negative, scales differ)."""

    model_config = ConfigDict(frozen=True)

    text: str
    points: float = 1.0
    tags: tuple[str, ...] = ()
    extra: dict[str, Any] = Field(default_factory=dict)


class GoldRubric(BaseModel):
    model_config = ConfigDict(frozen=True)

    scheme: str = Field(description="which official grading rule applies, e.g. 'healthbench'")
    items: tuple[GoldItem, ...]


class Question(QuestionView):
    """A question with what only the final grader and post-hoc analyses may use."""

    gold: GoldRubric | None = None
    meta: dict[str, Any] = Field(default_factory=dict)

    def view(self) -> QuestionView:
        return QuestionView(id=self.id, task=self.task, turns=self.turns)


class Criterion(BaseModel):
    """A positively weighted requirement; bad behaviour is phrased as something to avoid."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    text: str = Field(min_length=1)
    weight: float = Field(gt=0)


class Rubric(BaseModel):
    model_config = ConfigDict(frozen=True)

    question_id: str
    generator_version: int
    criteria: tuple[Criterion, ...] = Field(min_length=1)

    @property
    def weights(self) -> tuple[float, ...]:
        return tuple(c.weight for c in self.criteria)


class CriterionScore(BaseModel):
    model_config = ConfigDict(frozen=True)

    score: float = Field(ge=0.0, le=1.0)
    rationale: str = ""


class Judgement(BaseModel):
    """The judge's scores for one response under one rubric, one entry per criterion, in order."""

    model_config = ConfigDict(frozen=True)

    question_id: str
    scores: tuple[CriterionScore, ...]


class Response(BaseModel):
    model_config = ConfigDict(frozen=True, defer_build=True)  # built at the first reply, not at import

    question_id: str
    text: str
    skill_version: int
    sample_index: int = 0


SkillKind = Literal["solver", "generator"]


class Skill(BaseModel):
    """A versioned plain-text artifact. Version 0 is the initial skill."""

    model_config = ConfigDict(frozen=True)

    kind: SkillKind
    version: int = Field(ge=0)
    text: str
    parent: int | None = None
    reason: str = "initial"
