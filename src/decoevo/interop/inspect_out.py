"""A run as an Inspect AI task that `inspect eval` runs as is.

DIR/task.py          the task: dataset, the skill as a system message, decoevo's rubric scorer
DIR/dataset.jsonl    one sample per question: input, id, and in metadata its rubric (criterion, weight)
DIR/decoevo.json     the skills, the endpoint (URL, model, the key's variable name: never the key), the
                     judge's settings and the run's model configuration for the scorer
"""

from __future__ import annotations

import json
from pathlib import Path

from ..evaluation.run_view import RunView
from ..fileio import atomic_write_text
from .bundle import Bundle, solver_system

TASK_PY = '''"""Written by `decoevo export {run} --to inspect`. Run, in this folder: `inspect eval task.py` (the
shipped skill) or `inspect eval task.py -T skill=initial`; then `inspect view`. The model is the run's
endpoint; its key is read from ${key}. The scorer judges each criterion with decoevo's judge and reports
the weighted score."""

from pathlib import Path

from inspect_ai import Task, task

from decoevo.interop.inspect_task import decoevo_task


@task
def decoevo_rubric(skill: str = "shipped") -> Task:
    return decoevo_task(Path(__file__).parent, skill)
'''


def samples(bundle: Bundle) -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    for q in bundle.questions:
        rubric = bundle.rubrics[q.id]
        turns = [t.model_dump() for t in q.turns]
        out.append({"id": q.id, "input": q.as_text() if len(turns) == 1 else turns,
                    "metadata": {"rubric": [{"criterion": c.text, "weight": c.weight} for c in rubric.criteria],
                                 "generator_version": rubric.generator_version}})
    return out


def settings(bundle: Bundle) -> dict[str, object]:
    lm = RunView(bundle.run).config.lm
    return {
        "run": bundle.run,
        "skills": {"shipped": {"version": bundle.shipped.version, "system": solver_system(bundle.shipped)},
                   "initial": {"version": bundle.initial.version, "system": solver_system(bundle.initial)}},
        "solver": {"base_url": bundle.solver.base_url, "model": bundle.solver.model,
                   "api_key_env": bundle.solver.api_key_env, "max_tokens": bundle.max_tokens_solve,
                   "seed": bundle.seed},
        "judge": {"mode": bundle.judge_mode, "max_tokens": bundle.max_tokens_judge, "seed": bundle.seed,
                  "base_url": bundle.judge.base_url, "model": bundle.judge.model,
                  "api_key_env": bundle.judge.api_key_env},
        "lm": lm.model_dump(mode="json"),  # the run's own record (config.yaml): names, URLs, no key
    }


def write_inspect(bundle: Bundle, out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    files = {
        out / "dataset.jsonl": "".join(json.dumps(s, ensure_ascii=False) + "\n" for s in samples(bundle)),
        out / "decoevo.json": json.dumps(settings(bundle), indent=2, ensure_ascii=False) + "\n",
        out / "task.py": TASK_PY.format(run=bundle.run, key=bundle.solver.api_key_env),
    }
    for path, text in files.items():
        atomic_write_text(path, text)
    return list(files)
