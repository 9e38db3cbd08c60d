"""LLMEval-Med's official outcome of a grader reply, computed once from the pinned upstream files and kept
as a fixture (tests/fixtures/llmeval_med_upstream_cases.json) so CI checks it offline.

The upstream pipeline at llmeval/LLMEval-Med@508516f: `evaluate/Evaluate.py` asks the grader once per
answer and stores the first bracketed integer of the stripped reply as a string, -1 when the reply has
none, "" when the call failed or the reply is empty; `evaluate/Aggregate.py` reads that field, counts an
answer usable when it parses as a number in 0-5 that is 4 or more, and divides by every question.
`regenerate(aggregate_module)` runs the pinned Aggregate.py itself on the stored fields.
"""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path
from typing import Any

FIXTURE = Path(__file__).parent / "fixtures" / "llmeval_med_upstream_cases.json"
COMMIT = "508516fafd288c896691442d657b4af619609535"
AGGREGATE_SHA = "5a139fb5aac164ee8368b0e9c6b1753b848fde64deb04d87d13cf4e1bec69ead"
EVALUATE_SHA = "3d5a3165940a5476ec56ef2989d570a3edec21414f23d5677f005bc3890002c9"
# grader replies worth telling apart: scored, unscored, out of range, the first bracket deciding, empty
REPLIES = (
    '{"判断依据"："全面","得分"："[5]"}',
    '{"判断依据"："基本","得分"："[4]"}',
    '{"判断依据"："缺核心","得分"："[3]"}',
    '{"得分"："[2]"} 复核后应为 [5]',
    "无法评分",
    '{"得分"："[0]"}',
    '{"得分"："[6]"}',
    '{"得分"："[05]"}',
    "",
    "得分：(4)",
    "得分：[ 4 ]",
    "得分：[4.5]",
    '{"得分"："[10]"}',
    "  [4]  \n",
)


def stored_field(reply: str) -> Any:
    """What Evaluate.py writes to `model_answer_score` for this reply (the call itself succeeding)."""
    reply = reply.strip()  # its getresponse returns the content stripped
    if not reply:
        return ""
    match = re.search(r"\[(\d+)\]", reply)
    return match.group(1) if match else -1


def regenerate(aggregate: Any) -> dict[str, Any]:
    """The table, from the pinned Aggregate.py module: each reply alone (usable or not) and all together."""
    cases = []
    with tempfile.TemporaryDirectory() as tmp:
        def op(replies: list[str]) -> dict[str, Any]:
            rows = [{"category1": "医疗知识", "round": 1, "groupCode": i, "problem": f"问题{i}?",
                     "model_answer_score": stored_field(r)} for i, r in enumerate(replies)]
            path = Path(tmp) / "scored.json"
            path.write_text(json.dumps({"医疗知识": rows}, ensure_ascii=False), encoding="utf-8")
            return dict(aggregate.aggregate([str(path)])["overall"])

        for reply in REPLIES:
            overall = op([reply])
            cases.append({"reply": reply, "stored_score": stored_field(reply), "usable": overall["n_usable"] == 1})
        overall = op(list(REPLIES))
    return {
        "source": {"repository": "llmeval/LLMEval-Med", "commit": COMMIT,
                   "evaluate/Aggregate.py sha256": AGGREGATE_SHA, "evaluate/Evaluate.py sha256": EVALUATE_SHA},
        "how": "tests/llmeval_med_upstream.py regenerate(): Evaluate.py's stored field per reply, then the "
               "pinned Aggregate.py's aggregate() on one file per reply and on all of them",
        "cases": cases,
        "overall": overall,
    }


def load_fixture() -> dict[str, Any]:
    return json.loads(FIXTURE.read_text(encoding="utf-8"))


if __name__ == "__main__":  # python tests/llmeval_med_upstream.py PATH/TO/Aggregate.py (the pinned one)
    import hashlib
    import importlib.util
    import sys

    source = Path(sys.argv[1])
    assert hashlib.sha256(source.read_bytes()).hexdigest() == AGGREGATE_SHA, "not the pinned Aggregate.py"
    spec = importlib.util.spec_from_file_location("upstream_aggregate", source)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    FIXTURE.write_text(json.dumps(regenerate(module), ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
