"""The evaluation records, `RUN/eval/` (docs/evaluation-files.md): a graded skill, a comparison of two, the
dynamics and the alignment. Given by rundir/records.py on first use (a run never writes them)."""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

# A question's own score (0-100 style) as the benchmarks' graders give it. Most rules are 0-100 (WritingBench's
# floor is 10), but HealthBench's per-conversation score is not clipped: negative-point criteria can take it
# below 0 with no bound (the official rule clips only the benchmark mean). So a per-question score, and a
# mean of them, is any finite number up to 100; each benchmark declares its own range (`Benchmark.
# question_range`) and tests hold every grader to it and to this.
QUESTION_SCORE_MAX = 100.0


class _EvalRecord(BaseModel):
    # NaN or infinity is never a score decoevo wrote (json.loads reads `NaN`): such a file is damaged, and
    # refusing it names the file instead of showing "Δ +nan"
    model_config = ConfigDict(extra="allow", frozen=True, allow_inf_nan=False, defer_build=True)


class EvalFile(_EvalRecord):
    """`RUN/eval/<name>.json`: a solver skill graded on a split (test) or another benchmark (transfer)."""

    name: str
    kind: Literal["test", "transfer"]
    benchmark: str
    method: str
    seed: int
    skill_version: int | None = None
    grader_model: str | None = None
    # The grader's model also played these optimization roles in the run (evaluation/independence.py);
    # None in records written before it was recorded.
    self_graded: bool | None = None
    self_graded_roles: list[str] = Field(default_factory=list)
    # "official": the benchmark's official prompt, fetched and used verbatim (its sources listed);
    # "ours": decoevo's own prompt; None in records written before this was recorded (ours).
    grader_prompt: Literal["official", "ours"] | None = None
    grader_prompt_sources: list[dict[str, Any]] = Field(default_factory=list)
    not_implemented: str | None = None  # the benchmark's own headline, when decoevo does not compute it
    score: float | None = Field(ge=0, le=100)  # None when nothing could be graded
    n_graded: int = Field(ge=0)
    n_ungraded: int = Field(ge=0)
    details: dict[str, Any] = Field(default_factory=dict)
    items: list[dict[str, Any]] = Field(default_factory=list)
    # the run that was graded (its start event's run id): a result copied into another run is not that
    # run's result; None in records written before it was recorded
    run_id: str | None = None

    @model_validator(mode="after")
    def _whole(self) -> EvalFile:
        # each graded or ungraded question has its item: fewer items than counted is a file cut short
        if self.items and len(self.items) != self.n_graded + self.n_ungraded:
            raise ValueError(f"lists {len(self.items)} question(s) but counts {self.n_graded + self.n_ungraded} "
                             "(graded + ungraded): the file was cut short or edited")
        return self

    @property
    def coverage(self) -> float:
        total = self.n_graded + self.n_ungraded
        return self.n_graded / total if total else 0.0


class CompareSide(_EvalRecord):
    """One skill's answer to one question and its gold grade (GradeResult.model_dump())."""

    response: str | None = None
    score: float | None = Field(None, le=QUESTION_SCORE_MAX)  # on the benchmark's per-question range (above)
    grade: dict[str, Any] = Field(default_factory=dict)


class CompareRow(_EvalRecord):
    question_id: str
    question: str = ""  # the question's last user turn, as the solver saw it
    before: CompareSide
    after: CompareSide
    delta: float | None = None  # after - before, when both were graded
    changed: list[dict[str, Any]] = Field(default_factory=list)  # criteria scored differently: index, criterion,
    #                                                              before, after (values on the benchmark's scale)


class CompareFile(_EvalRecord):
    """`RUN/eval/compare-<name>-v<A>-v<B>-<grader>.json`: two solver versions (the initial and the shipped
    one) graded on the same questions, paired per question (docs/evaluation-files.md)."""

    name: str
    kind: Literal["test", "transfer"]
    benchmark: str
    method: str
    seed: int
    before_version: int = Field(ge=0)
    after_version: int | None = Field(ge=0)  # None: the after side is a skill file (`after_skill`)
    # `compare --skill FILE`: the skill compared against the run's (path as given, sha256 of its text)
    after_skill: dict[str, Any] | None = None
    grader_model: str | None = None
    self_graded: bool | None = None
    self_graded_roles: list[str] = Field(default_factory=list)
    grader_prompt: Literal["official", "ours"] | None = None
    n_questions: int = Field(ge=0)
    n_paired: int = Field(ge=0)  # graded under both skills: the only questions the difference uses
    # means over the paired questions (the Δ's questions), unclipped: HealthBench's may be below 0
    before_score: float | None = Field(None, le=QUESTION_SCORE_MAX)
    after_score: float | None = Field(None, le=QUESTION_SCORE_MAX)
    mean_delta: float | None = None
    ci_low: float | None = None  # paired t-based 95% interval of the mean difference (None: fewer than 2 pairs)
    ci_high: float | None = None
    p_value: float | None = Field(None, ge=0, le=1)
    note: str | None = None  # why the interval is missing or degenerate
    rows: list[CompareRow] = Field(default_factory=list)
    run_id: str | None = None  # as in EvalFile

    @model_validator(mode="after")
    def _consistent(self) -> CompareFile:
        """The summary is what the rows say: every question has its row, and both means and the Δ are over
        the same paired questions (a file whose numbers disagree with its rows was edited or cut short)."""
        if self.after_version is None and self.after_skill is None:
            raise ValueError("after_version is missing and no after_skill names the skill compared")
        if not self.rows:
            return self
        if len(self.rows) != self.n_questions:
            raise ValueError(f"holds {len(self.rows)} row(s) but counts {self.n_questions} question(s): "
                             "the file was cut short or edited")
        paired = [r for r in self.rows if r.before.score is not None and r.after.score is not None]
        if len(paired) != self.n_paired:
            raise ValueError(f"{len(paired)} row(s) are graded under both skills but n_paired is {self.n_paired}")
        if not paired:
            return self
        means = {"before_score": sum(r.before.score for r in paired) / len(paired),  # type: ignore[misc]
                 "after_score": sum(r.after.score for r in paired) / len(paired)}  # type: ignore[misc]
        means["mean_delta"] = means["after_score"] - means["before_score"]
        for key, want in means.items():
            got = getattr(self, key)
            if got is None or not math.isclose(got, want, rel_tol=1e-6, abs_tol=1e-6):
                raise ValueError(f"{key} is {got} but the {len(paired)} paired row(s) give {want:.6g}: the "
                                 "means and the Δ must be over the same paired questions")
        return self


class DynamicsPoint(_EvalRecord):
    step: int = Field(ge=0)
    skill_version: int = Field(ge=0)
    generator_version: int | None = Field(None, ge=0)
    proxy: float | None = Field(ge=0, le=100)  # J x 100 under the generated rubric
    gold: float | None = Field(ge=0, le=100)
    n_gold_graded: int | None = Field(None, ge=0)


class DynamicsFile(_EvalRecord):
    """`RUN/eval/dynamics.json` (paper Figure 3): accepted solver checkpoints on the diagnostic split."""

    method: str
    seed: int
    split: str = "diagnostic"
    n_questions: int | None = Field(None, ge=0)
    grader_model: str | None = None
    self_graded: bool | None = None  # as in EvalFile; None in records written before it was recorded
    self_graded_roles: list[str] = Field(default_factory=list)
    points: list[DynamicsPoint]


class AlignmentFile(_EvalRecord):
    """`RUN/eval/alignment.json` (paper Table 5): generated vs gold criteria, macro-averaged."""

    method: str
    seed: int
    split: str = "test"
    generator_version: int | None = None
    matcher_model: str | None = None
    matcher_self_graded: bool | None = None  # the matcher's model also played an optimization role in the run
    precision: float | None = Field(ge=0, le=1)
    recall: float | None = Field(ge=0, le=1)
    f1: float | None = Field(ge=0, le=1)
    n_questions: int = Field(ge=0)
    n_failed: int = Field(0, ge=0)
