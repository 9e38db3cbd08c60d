"""A run as an Inspect AI task that `inspect eval` runs as is.

DIR/task.py          the task: dataset, the skill as a system message, decoevo's rubric scorer
DIR/dataset.jsonl    one sample per question: input, id, and in metadata its rubric (criterion, weight)
DIR/decoevo.json     the skills, the endpoint (URL, model, the key's variable name: never the key), the
                     judge's settings and the run's model configuration for the scorer
"""

from __future__ import annotations

import json
from pathlib import Path

from .bundle import Bundle, solver_system
from .outdir import OutDir, json_text

# The task file is the same for every export: nothing of the run (a path, a name, a skill) is written into
# Python source; what differs lives in decoevo.json and dataset.jsonl, which the task reads as data.
TASK_PY = '''"""Written by `decoevo export --to inspect`: an Inspect AI task over a decoevo run's questions and
co-evolved rubrics. It needs decoevo with its `inspect` extra in the same environment (pip install
'decoevo[inspect]'). Run it in this folder:

    inspect eval task.py                              # the shipped skill
    inspect eval task.py -T skill=initial             # the run's initial skill
    inspect eval task.py -T system_prompt=FILE        # an edited system prompt, read from FILE as it is

then `inspect view`. decoevo.json names the run, the endpoint and the environment variable holding its key.
The scorer judges each criterion with decoevo's judge and reports the weighted score (0-1)."""

from pathlib import Path

from inspect_ai import Task, task

from decoevo.interop.inspect_task import decoevo_task


@task
def decoevo_rubric(skill: str = "shipped", system_prompt: str | None = None) -> Task:
    return decoevo_task(Path(__file__).parent, skill, system_prompt)
'''


def samples(bundle: Bundle) -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    for q in bundle.questions:
        rubric = bundle.rubrics[q.id]
        turns = [t.model_dump() for t in q.turns]
        # the judge reads the question as decoevo's does (its text, a conversation as a transcript)
        out.append({"id": q.id, "input": q.as_text() if len(turns) == 1 else turns,
                    "metadata": {"rubric": [{"criterion": c.text, "weight": c.weight} for c in rubric.criteria],
                                 "generator_version": rubric.generator_version, "question": q.as_text()}})
    return out


def settings(bundle: Bundle) -> dict[str, object]:
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
        "lm": bundle.lm.model_dump(mode="json"),  # the run's own record (config.yaml): names, URLs, no key
    }


def write_inspect(bundle: Bundle, out: OutDir) -> list[Path]:
    return out.write({
        "dataset.jsonl": "".join(json.dumps(s, ensure_ascii=False) + "\n" for s in samples(bundle)),
        "decoevo.json": json_text(settings(bundle)),
        "task.py": TASK_PY,
    })
