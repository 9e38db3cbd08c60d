"""Tokens per grader call of a data file, from the requests its benchmark's grader really builds.

Each benchmark grades with its own prompts (ours or the official ones), one call per rubric item or per
batch or per answer. To know what one call costs before paying for it, the grader is run on a few of the
file's questions with an answer of the expected length, against a stand-in LM that records every request
(its messages, its token limit, its schema) and refuses it: nothing is sent. A structured verdict is
expected as long as its fields (rationales as our prompts ask for them), a free-text reply as long as an
answer; both capped by the request's token limit.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from ..benchmarks.templates import OfficialPrompts
from ..domain import Question
from ..engine.tokens import CHARS_PER_TOKEN, CallTokens, capped_mean, json_reply_chars
from ..lm import GenParams, Message
from ..lm.errors import RefusalError
from ..reply_lengths import ANSWER_CHARS

SAMPLE = 4  # questions of a file the grader is run on


@dataclass
class _Recorder:
    """Stands in for `LM` in a grader: records each request and refuses it."""

    calls: list[CallTokens] = field(default_factory=list)

    def model_for(self, role: str) -> str:
        return "probe"

    def _record(self, messages: Iterable[Message], schema: type[BaseModel] | None, params: GenParams | None) -> None:
        prompt = sum(len(m.content) for m in messages) / CHARS_PER_TOKEN
        cap = params.max_tokens if params is not None and params.max_tokens else None
        written = (json_reply_chars(schema) if schema is not None
                   else capped_mean(ANSWER_CHARS, None if cap is None else cap * CHARS_PER_TOKEN))
        completion = written / CHARS_PER_TOKEN
        self.calls.append(CallTokens(prompt, completion if cap is None else min(completion, float(cap))))

    async def complete(self, messages: Iterable[Message], *, role: str, schema: type[BaseModel] | None = None,
                       params: GenParams | None = None) -> Any:
        self._record(list(messages), schema, params)
        raise RefusalError("token probe: not sent", role=role)

    async def structured(self, messages: Iterable[Message], schema: type[BaseModel], *, role: str,
                         params: GenParams | None = None) -> Any:
        return await self.complete(messages, role=role, schema=schema, params=params)


def grading_tokens(questions: Sequence[Question], answer_chars: float,
                   official: OfficialPrompts | None = None) -> CallTokens | None:
    """Mean tokens of one grader call over the requests that grading `SAMPLE` of `questions` (evenly
    spread) with an answer of `answer_chars` characters builds; None when none could be built."""
    from ..benchmarks.graders import grade

    picked = [questions[round(i * (len(questions) - 1) / max(1, SAMPLE - 1))] for i in range(SAMPLE)] \
        if len(questions) > SAMPLE else list(questions)
    recorder = _Recorder()
    answer = "x" * max(1, round(answer_chars))

    async def run() -> None:
        for q in picked:
            if q.gold is None:
                continue
            try:
                await grade(recorder, q, answer, official=official)  # type: ignore[arg-type]
            except Exception:  # a probe: a grader that cannot be probed falls back to the default
                continue

    asyncio.run(run())
    if not recorder.calls:
        return None
    n = len(recorder.calls)
    return CallTokens(sum(c.prompt for c in recorder.calls) / n, sum(c.completion for c in recorder.calls) / n)


def matcher_tokens(questions: Sequence[Question], criterion_chars: float) -> CallTokens:
    """Mean tokens of one matcher call (alignment: one generated criterion against the question's gold
    criteria), from the matcher's own request on `SAMPLE` of `questions`."""
    from ..evaluation.matcher import PARAMS, match_schema, messages

    picked = [q for q in questions if q.gold is not None and q.gold.items][:SAMPLE]
    cap = float(PARAMS.max_tokens or 0) or None
    calls = []
    for q in picked:
        assert q.gold is not None
        prompt = sum(len(m.content) for m in messages(q.view(), "x" * round(criterion_chars), q.gold.items))
        completion = json_reply_chars(match_schema(len(q.gold.items))) / CHARS_PER_TOKEN
        calls.append(CallTokens(prompt / CHARS_PER_TOKEN, completion if cap is None else min(completion, cap)))
    if not calls:
        return CallTokens(500.0, 40.0)  # no gold criteria to match against: nothing is aligned anyway
    return CallTokens(sum(c.prompt for c in calls) / len(calls), sum(c.completion for c in calls) / len(calls))
