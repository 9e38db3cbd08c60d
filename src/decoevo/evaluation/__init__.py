"""Post-hoc evaluation of runs: gold grading of the solver skill (test split or transfer), training
dynamics, and rubric alignment. Files written are described in docs/evaluation-files.md."""

from .alignment import Overlap, alignment, macro, overlap
from .dynamics import dynamics
from .evaluate import EvalTarget, evaluate
from .models import evaluation_lm_config
from .run_view import Checkpoint, RunView, parse_skill_markdown, timeline
from .session import EvalSession, GradedResponse

__all__ = [
    "Checkpoint",
    "EvalSession",
    "EvalTarget",
    "GradedResponse",
    "Overlap",
    "RunView",
    "alignment",
    "dynamics",
    "evaluate",
    "evaluation_lm_config",
    "macro",
    "overlap",
    "parse_skill_markdown",
    "timeline",
]
