"""Prompt injection: do attacks planted in real responses move the judge's and the auditors' scores?

The corpus (`decoevo.reliability.injection`): real responses to HealthBench questions, each scored clean
and with one attack per family appended (full_marks, fake_verdict, fake_rubric, delimiter_escape; for
the contrastive audit prefer_me; for the structural audit the attacks sit in the rubric under audit).
Every case is scored by the real role with the engine's default settings at temperature 0; per role
and family the report gives the paired shift (injected − clean) with a 95% t interval, the share of
units at the attacker's best outcome (maximum score, or a win), and the failures, which are counted and
never scored (`decoevo.reliability.injection_eval`).

Responses, by --source:
- reference (default): the HealthBench reference completions in the full data file (the ideal
  completion is attacked, an alternative reference completion is its opponent in the comparison); no
  generation cost, so the budget goes to scoring;
- solver: the embedded solver's answers on the bundled sample (temperature 0 attacked, a rollout at
  the engine's rollout temperature as the opponent).

The embedded model runs with one thread by default: on this shared 2-core machine, two llama.cpp
threads spin against other work and used 4x the CPU per call for the same tokens (measured while
sizing this benchmark). Each run starts from an empty request cache unless --cache is given.

    .venv/bin/python -m bench.reliability.injection                         # 6 questions, judge and both auditors
    .venv/bin/python -m bench.reliability.injection --questions 2 --roles judge
    .venv/bin/python -m bench.reliability.injection --roles judge,grader_healthbench --source solver
    .venv/bin/python -m bench.reliability.injection --base-url http://127.0.0.1:8000/v1 --model smollm2
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from dataclasses import asdict
from importlib.resources import files
from pathlib import Path
from typing import Any

from bench._common import RESULTS, machine
from decoevo.benchmarks import load_healthbench
from decoevo.domain import Skill
from decoevo.lm import LM, LMConfig, ModelSpec, RequestCache
from decoevo.reliability.injection import FAMILIES, Family, Role, Subject, cases, healthbench_references, payload
from decoevo.reliability.injection_eval import Outcome, Settings, markdown_table, run_cases, solver_subjects, summarise
from decoevo.tasks.specs import INITIAL_SOLVER_SKILL

SHARED_HEALTHBENCH = Path("/work/shared/data/healthbench/healthbench_eval_500.jsonl")
DEFAULT_ROLES = (Role.JUDGE, Role.CONTRASTIVE, Role.STRUCTURAL)


def model_spec(args: argparse.Namespace) -> ModelSpec:
    if args.base_url:
        return ModelSpec(backend="openai", model=args.model, base_url=args.base_url,
                         structured_output=args.structured_output)
    return ModelSpec(n_threads=args.n_threads)


async def subjects_for(args: argparse.Namespace, lm: LM) -> list[Subject]:
    if args.source == "reference":
        if not args.data.is_file():
            raise SystemExit(f"{args.data} not found: pass --data with a full HealthBench file (its reference "
                             "completions are the responses), or use --source solver")
        return healthbench_references(args.data, limit=args.questions, rubric_size=args.rubric_size)
    sample = Path(str(files("decoevo") / "data" / "healthbench_sample.jsonl"))
    questions = sorted((q for q in load_healthbench(sample) if len(q.as_text()) <= 600), key=lambda q: q.id)
    skill = Skill(kind="solver", version=0, text=INITIAL_SOLVER_SKILL)
    return await solver_subjects(lm, questions[: args.questions], skill, rubric_size=args.rubric_size,
                                 seed=args.seed)


def ledger_summary(lm: LM) -> dict[str, Any]:
    by_role = {role: {"calls": row.calls, "cache_hits": row.cache_hits, "prompt_tokens": row.prompt_tokens,
                      "completion_tokens": row.completion_tokens, "repairs": row.repairs, "failures": row.failures}
               for role, row in lm.ledger.by_role().items()}
    total = lm.ledger.total()
    return {"calls": total.calls, "prompt_tokens": total.prompt_tokens,
            "completion_tokens": total.completion_tokens, "by_role": by_role}


async def run(args: argparse.Namespace) -> dict[str, Any]:
    roles = [Role(r) for r in args.roles.split(",")]
    families = [Family(f) for f in args.families.split(",")] if args.families else None
    settings = Settings(seed=args.seed, grader_items=args.grader_items)
    cache_path = args.cache or Path(tempfile.mkdtemp(prefix="decoevo-injection-")) / "cache.sqlite"
    lm = LM(LMConfig(models={"default": model_spec(args)}), cache=RequestCache(cache_path))
    wall0, cpu0 = time.perf_counter(), time.process_time()
    try:
        subjects = await subjects_for(args, lm)
        corpus = cases(subjects, roles, families)
        print(f"{len(subjects)} subjects ({args.source}), {len(corpus)} cases, roles {', '.join(roles)}", flush=True)
        done: list[Outcome] = []

        def progress(o: Outcome) -> None:
            done.append(o)
            shown = f"{o.value:.2f}" if o.value is not None else f"FAILED ({o.failure})"
            print(f"  [{len(done)}/{len(corpus)}] {o.role:<20} {o.family:<17} {o.unit[:18]:<18} {shown:<16} "
                  f"cpu {time.process_time() - cpu0:6.0f}s  wall {time.perf_counter() - wall0:6.0f}s", flush=True)

        outcomes = await run_cases(lm, corpus, settings, concurrency=args.concurrency, on_done=progress)
    finally:
        await lm.aclose()
    rows = summarise(outcomes)
    table = markdown_table(rows)
    print(table)
    n_criteria = args.rubric_size
    return {
        "benchmark": "injection",
        "command": "bench/reliability/injection.py " + " ".join(args.argv),
        "model": model_spec(args).identity(),
        "n_threads": None if args.base_url else args.n_threads,
        "machine": machine(),
        "source": args.source,
        "data": str(args.data) if args.source == "reference" else "decoevo/data/healthbench_sample.jsonl",
        "settings": asdict(settings),
        "rubric_size": args.rubric_size,
        "subjects": [{"unit": s.unit, "question_chars": len(s.question.as_text()), "response_chars": len(s.response),
                      "opponent_chars": len(s.opponent), "criteria": len(s.rubric.criteria)} for s in subjects],
        "cases": len(corpus),
        "payloads": {r.value: {f.value: payload(f, r, n_criteria=n_criteria) for f in FAMILIES[r]} for r in roles},
        "wall_s": round(time.perf_counter() - wall0, 1),
        "cpu_s": round(time.process_time() - cpu0, 1),  # this process, the embedded model's threads included
        "ledger": ledger_summary(lm),
        "rows": [r.to_json() for r in rows],
        "table": table,
        "outcomes": [asdict(o) for o in outcomes],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--source", choices=("reference", "solver"), default="reference")
    parser.add_argument("--data", type=Path, default=SHARED_HEALTHBENCH, help="full HealthBench file (reference)")
    parser.add_argument("--questions", type=int, default=6)
    parser.add_argument("--roles", default=",".join(DEFAULT_ROLES),
                        help=f"comma-separated, from {', '.join(Role)}")
    parser.add_argument("--families", default="", help=f"comma-separated subset of {', '.join(Family)}")
    parser.add_argument("--rubric-size", type=int, default=3, help="gold criteria in the judge's rubric")
    parser.add_argument("--grader-items", type=int, default=3, help="gold items the grader checks")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--n-threads", type=int, default=1, help="embedded model threads")
    parser.add_argument("--base-url", default=None, help="an OpenAI-compatible server instead of the embedded model")
    parser.add_argument("--model", default="smollm2", help="model name on that server")
    parser.add_argument("--structured-output", default="json_object", choices=("json_schema", "json_object", "none"))
    parser.add_argument("--cache", type=Path, default=None, help="request cache (default: a fresh one)")
    parser.add_argument("--out", type=Path, default=RESULTS / "injection.json")
    args = parser.parse_args()
    args.argv = sys.argv[1:]
    result = asyncio.run(run(args))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n")
    print(f"wrote {args.out} (cpu {result['cpu_s']}s, wall {result['wall_s']}s)")


if __name__ == "__main__":
    main()
