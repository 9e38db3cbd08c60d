"""Whether a run's rubric and judge can tell a better answer from a worse one, read from its own records.

Every proxy score of a run (the gates' J, an exported rubric score) is the judge's levels under the
generated rubric. A judge that gives one level to every criterion of every answer (a small model echoing
the first level it saw, a rubric that copies the question so every answer "meets" it) still yields
scores, and a broken prompt then scores exactly as the shipped one. This module counts the levels the
run's judge gave, per criterion and per answer: when (nearly) all criteria got one level, or (nearly) all
answers one score (SmolLM2-135M also answers 3, 2, 1 down the rubric whatever the answer), the guard
cannot discriminate and every command that leans on it says so.

The judgements come from the run's transcripts (each judge request and its reply, joint or per
criterion); a run made before transcripts existed is read from its gate records (both arms of every
solver gate, scored under one rubric). Pure: the run is read through `RunReader`, nothing is written.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ..rundir import RunReader, RunReadError, TranscriptEntry

JUDGE_ROLE = "judge"  # roles/judge.py's ROLE: the training-time judge (gold graders are grader_* roles)
RUBRIC_ROLE = "generate_rubric"  # roles/generate_rubric.py's ROLE
COPIED = 0.5  # this share of the generated criteria only repeating words of their question: the rubric is an echo
LEVELS = 4  # the judge answers on 0-4 (roles/judge.py); a score is level / 4
MIN_JUDGEMENTS = 4  # fewer answers judged than this: too few to say anything either way
NEARLY_CONSTANT = 0.95  # this share of criterion scores at one level, or of answers at one score: it barely moves

Verdict = Literal["discriminates", "constant", "answers alike", "nearly constant", "too few"]


@dataclass(frozen=True)
class Discrimination:
    """How spread the judge's scores of one run are: per criterion, and per answer (mean over its rubric)."""

    source: str  # "transcripts", "gate records" or "none"
    judgements: int  # answers judged (one reply in joint mode, one answer's criteria in per-criterion mode)
    scores: int  # criterion scores read
    level_counts: Mapping[float, int] = field(default_factory=dict)  # score (0-1) -> how many criteria got it
    # an answer's score (the mean of its criterion scores) -> how many answers got it: a judge that varies
    # its levels over the criteria in one fixed pattern (3, 2, 1 for every answer) still scores all alike
    answer_counts: Mapping[float, int] = field(default_factory=dict)
    unreadable: int = 0  # judge replies that held no levels (counted, never guessed)
    criteria_read: int = 0  # generated criteria read from the rubric generator's replies
    criteria_copied: int = 0  # of those, criteria every word of which is a word of their question

    @property
    def rubric_warning(self) -> str | None:
        """One line when the generated rubrics mostly echo their questions ("postpartum depression")."""
        if self.criteria_read < MIN_JUDGEMENTS or self.criteria_copied < COPIED * self.criteria_read:
            return None
        return (f"{self.criteria_copied} of the {self.criteria_read} criteria the run's rubric generator wrote only "
                "repeat words of their question: such a rubric names the topic, not what a good answer does")

    @property
    def warnings(self) -> list[str]:
        return [w for w in (self.warning, self.rubric_warning) if w]

    @property
    def answer_scores(self) -> int:
        """How many distinct answer scores the judge gave."""
        return len(self.answer_counts)

    @property
    def answer_share(self) -> float | None:
        """The share of answers at the most common answer score; None with nothing read."""
        return max(self.answer_counts.values()) / self.judgements if self.answer_counts else None

    @property
    def modal_share(self) -> float | None:
        """The share of criterion scores at the most common level; None with nothing read."""
        return max(self.level_counts.values()) / self.scores if self.scores else None

    @property
    def modal_level(self) -> float | None:
        return max(self.level_counts, key=lambda k: (self.level_counts[k], -k)) if self.level_counts else None

    @property
    def verdict(self) -> Verdict:
        if self.judgements < MIN_JUDGEMENTS:
            return "too few"
        if len(self.level_counts) == 1:
            return "constant"
        alike = self.answer_share
        if alike is not None and alike >= NEARLY_CONSTANT:
            return "answers alike"
        share = self.modal_share
        if share is not None and share >= NEARLY_CONSTANT:
            return "nearly constant"
        return "discriminates"

    @property
    def discriminates(self) -> bool | None:
        """True or False when measured; None when too few answers were judged to tell."""
        return None if self.verdict == "too few" else self.verdict == "discriminates"

    @property
    def warning(self) -> str | None:
        """One line for the terminal and the report when the judge does not discriminate, else None."""
        verdict, level = self.verdict, self.modal_level
        if verdict in ("discriminates", "too few") or level is None:
            return None
        said = f"level {round(level * LEVELS)} of 0-{LEVELS}"
        if verdict == "constant":
            what = f"the same score ({said}) to every criterion of all {self.judgements} answers it judged"
        elif verdict == "answers alike":
            score = max(self.answer_counts, key=lambda k: (self.answer_counts[k], -k))
            what = (f"the same score ({score:.2f} of 1, its criteria's mean) to {self.answer_share:.0%} of the "
                    f"{self.judgements} answers it judged")
        else:
            what = (f"{self.modal_share:.0%} of {self.scores} criterion scores the same level ({said}) over "
                    f"{self.judgements} answers")
        return (f"the run's judge gave {what}: its rubric scores cannot tell a better answer from a worse one, "
                "so its gate decisions and any score of an exported rubric are not evidence of quality. Judge with "
                "a more capable model (lm.roles.judge) and check the rubrics do not just restate the question")


# ---- reading judge replies --------------------------------------------------------------------------

def _json(text: str) -> Any:
    """The reply's JSON object: as sent, or the first {...} in it (a reply in a code fence)."""
    try:
        return json.loads(text)
    except ValueError:
        match = re.search(r"\{.*\}", text, re.DOTALL)
        if match is None:
            return None
        try:
            return json.loads(match.group(0))
        except ValueError:
            return None


def _level(verdict: Any) -> float | None:
    level = verdict.get("level") if isinstance(verdict, Mapping) else None
    if isinstance(level, int) and not isinstance(level, bool) and 0 <= level <= LEVELS:
        return level / LEVELS
    return None


def _criterion_answer(entry: TranscriptEntry) -> str:
    """A per-criterion request's answer: its user message without the criterion line, so the replies
    about one answer's criteria group together."""
    user = next((str(m.get("content", "")) for m in reversed(entry.messages) if m.get("role") == "user"), "")
    return re.sub(r"^Criterion: .*$", "", user, flags=re.MULTILINE)


def judged_answers(entries: Iterable[TranscriptEntry]) -> tuple[list[tuple[float, ...]], int]:
    """(each judged answer's criterion scores, unreadable replies) from a run's judge transcripts."""
    answers: list[tuple[float, ...]] = []
    per_criterion: dict[str, list[float]] = {}
    unreadable = 0
    for e in entries:
        if e.role != JUDGE_ROLE:
            continue
        data = _json(e.reply)
        if isinstance(data, Mapping) and isinstance(data.get("verdicts"), list):
            levels = [_level(v) for v in data["verdicts"]]
            if levels and None not in levels:
                answers.append(tuple(x for x in levels if x is not None))
                continue
        elif (level := _level(data)) is not None:
            per_criterion.setdefault(_criterion_answer(e), []).append(level)
            continue
        unreadable += 1
    return answers + [tuple(v) for v in per_criterion.values()], unreadable


def gate_answers(records: Iterable[Mapping[str, Any]]) -> list[tuple[float, ...]]:
    """Both arms of every solver gate (RUN/gates/stepNNN.json), each question's criterion scores."""
    out = []
    for r in records:
        for q in r.get("questions") or ():
            if not isinstance(q, Mapping):
                continue
            for arm in ("incumbent", "candidate"):
                scores = q.get(arm)
                if isinstance(scores, list) and scores and all(
                        isinstance(s, int | float) and not isinstance(s, bool) for s in scores):
                    out.append(tuple(float(s) for s in scores))
    return out


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]+", text.lower()))


def copied_criteria(entries: Iterable[TranscriptEntry]) -> tuple[int, int]:
    """(criteria read, criteria every word of which is in their question) from the rubric generator's replies."""
    read = copied = 0
    for e in entries:
        if e.role != RUBRIC_ROLE:
            continue
        data = _json(e.reply)
        items = data.get("criteria") if isinstance(data, Mapping) else None
        user = next((str(m.get("content", "")) for m in reversed(e.messages) if m.get("role") == "user"), "")
        question = _words(user.split("</question>")[0])
        for item in items if isinstance(items, list) else ():
            text = item.get("criterion") if isinstance(item, Mapping) else None
            if isinstance(text, str) and _words(text):
                read += 1
                copied += _words(text) <= question
    return read, copied


def discrimination_of(answers: Sequence[tuple[float, ...]], source: str, unreadable: int = 0,
                      criteria: tuple[int, int] = (0, 0)) -> Discrimination:
    """The spread of the criterion scores of `answers` (pure); `criteria`: (read, copied) of the rubrics."""
    counts = Counter(round(s, 6) for a in answers for s in a)
    means = Counter(round(sum(a) / len(a), 6) for a in answers if a)
    return Discrimination(source if answers else "none", len(answers), sum(counts.values()), dict(counts),
                          dict(means), unreadable, *criteria)


def run_discrimination(run_dir: Path | str, transcripts: Sequence[TranscriptEntry] | None = None) -> Discrimination:
    """The discrimination of a run's judge, from its transcripts (or, without any judge reply there, its gate
    records). `transcripts` spares a caller that has read them already a second read. Raises RunReadError
    for a gate record that is not JSON; a torn transcript member is skipped by its reader."""
    reader = RunReader(Path(run_dir))
    entries = reader.transcripts() if transcripts is None else transcripts
    answers, unreadable = judged_answers(entries)
    criteria = copied_criteria(entries)
    if answers or unreadable:
        return discrimination_of(answers, "transcripts", unreadable, criteria)
    records = [reader.json(rel) for rel in reader.files("gates/step*.json")]
    return discrimination_of(gate_answers(r for r in records if isinstance(r, Mapping)), "gate records", 0, criteria)


def discrimination_warnings(run_dir: Path | str) -> list[str]:
    """`decoevo rubric` and `export`: the warning when the run's judge does not discriminate (else none).
    An unreadable record is no reason to refuse the command; it says it could not check."""
    try:
        return run_discrimination(run_dir).warnings
    except RunReadError as e:
        return [f"could not check whether the run's judge discriminates: {e}"]
