"""`compare` on the real embedded model: two solver skills answer the same real HealthBench question, each
answer is graded by the model, and the pair is reported per question; every grade is a verdict or a
categorised failure (never a silent 0)."""

from __future__ import annotations

import pytest

from decoevo.domain import Skill
from decoevo.engine.config import config_from_dict
from decoevo.engine.run import Engine
from decoevo.evaluation import EvalSession, EvalTarget, RunView
from decoevo.evaluation.compare import compare
from decoevo.lm import LM, LMConfig, RequestCache
from decoevo.presets import PRESETS, bundled_healthbench
from decoevo.rundir import skill_markdown

from .real_model import requires_model

# slow: one question answered under two skills and graded criterion by criterion (about 25 model calls)
pytestmark = [pytest.mark.real_model, pytest.mark.slow, requires_model]


async def test_compare_two_skills_on_the_embedded_model(tmp_path):
    cache = RequestCache(tmp_path / "requests.sqlite")
    config = config_from_dict({
        "method": "zero_shot", "seed": 2, "data": {"path": bundled_healthbench(), "format": "healthbench"},
        "splits": {"train": 0, "probe": 0, "solver_gate": 0, "generator_gate": 0, "test": 1},
        "hyper": {**PRESETS["quick"]["hyper"], "max_tokens_solve": 80},
    })
    run = tmp_path / "run"
    await Engine(config, run, lm=LM(LMConfig(), cache=cache)).run_async()
    # a second solver version beside the initial one (zero-shot never rewrites): a different instruction
    rewritten = Skill(kind="solver", version=1, parent=0, reason="test",
                      text="Answer in two short sentences. Say when to see a doctor.")
    (run / "skills" / "solver" / "v001.md").write_text(skill_markdown(rewritten), encoding="utf-8")

    session = EvalSession(RunView(run), lm=LM(LMConfig(), cache=cache))
    try:
        record = await compare(session, EvalTarget(), after=1)
    finally:
        await session.aclose()

    (row,) = record["rows"]
    assert record["before_version"] == 0 and record["after_version"] == 1
    assert row["before"]["response"] and row["after"]["response"]
    assert row["before"]["response"] != row["after"]["response"]  # two skills, two answers
    for side in (row["before"], row["after"]):
        items = side["grade"]["items"]
        assert items and all(i["value"] in (0.0, 1.0) or (i["value"] is None and i["error"] in ("parse", "refusal"))
                             for i in items)
        assert (side["score"] is None) == any(i["value"] is None for i in items)
    graded = row["before"]["score"] is not None and row["after"]["score"] is not None
    assert record["n_paired"] == int(graded)
    if graded:
        assert row["delta"] == pytest.approx(row["after"]["score"] - row["before"]["score"])
        assert record["mean_delta"] == pytest.approx(row["delta"])
        assert (run / "eval" / f"{record['file'].removeprefix('eval/')}").is_file()
    changed = {c["index"] for c in row["changed"]}
    before = {i["index"]: i["value"] for i in row["before"]["grade"]["items"]}
    after = {i["index"]: i["value"] for i in row["after"]["grade"]["items"]}
    assert changed == {k for k in before if before[k] != after.get(k)}
