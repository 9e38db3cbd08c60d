"""Where the paid calls and tokens of a paper-preset run go, role by role (for issue 13's cost work).

Runs each method in process on the simulated model and a virtual clock (`bench/scale/paper_scale.py`'s first
run: the same calls as over HTTP, in seconds of CPU), and prints each role's paid calls and tokens.

    .venv/bin/python -m bench.scale.paper_scale_roles --methods skillopt,decoevo --seed 0
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

from bench._common import RESULTS
from decoevo.engine.config import config_from_dict, deep_merge
from decoevo.engine.run import Engine
from decoevo.lm import LM, RequestCache
from decoevo.presets import PRESETS
from decoevo.testing.sim_backend import SimBackend, run_virtual
from decoevo.testing.sim_model import LatencyModel
from decoevo.testing.toy_server import write_toy_questions


async def _run(config: Any, workdir: Path) -> dict[str, dict[str, int]]:
    lm = LM(config.lm, backends={"default": SimBackend(0, LatencyModel.fixed(1.0), 64)},
            cache=RequestCache(workdir / "cache.sqlite"))
    try:
        result = await Engine(config, workdir / "run", lm=lm).run_async()
    finally:
        await lm.aclose()
    return {role: {"calls": row.calls, "tokens": row.tokens, "cached": row.cache_hits,
                   "prompt": row.prompt_tokens, "completion": row.completion_tokens}
            for role, row in sorted(result.ledger.by_role().items())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--methods", default="skillopt,decoevo")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=RESULTS / "paper_scale_roles.json")
    args = parser.parse_args()
    out: dict[str, Any] = {"seed": args.seed, "methods": {}}
    with tempfile.TemporaryDirectory() as tmp:
        data = write_toy_questions(Path(tmp) / "questions.jsonl", 300)
        for method in args.methods.split(","):
            raw = deep_merge(PRESETS["paper"], {"method": method, "seed": args.seed,
                                                "data": {"path": str(data), "format": "jsonl"}})
            workdir = Path(tmp) / method
            workdir.mkdir()
            out["methods"][method], _ = run_virtual(_run(config_from_dict(raw), workdir))
    args.out.write_text(json.dumps(out, indent=2) + "\n")
    roles = sorted({r for m in out["methods"].values() for r in m})
    print("| role | " + " | ".join(f"{m} calls | {m} tokens" for m in out["methods"]) + " |")
    print("|---|" + "---:|---:|" * len(out["methods"]))
    for role in roles:
        cells = [out["methods"][m].get(role, {"calls": 0, "tokens": 0}) for m in out["methods"]]
        print(f"| {role} | " + " | ".join(f"{c['calls']:,} | {c['tokens']:,}" for c in cells) + " |")


if __name__ == "__main__":
    main()
