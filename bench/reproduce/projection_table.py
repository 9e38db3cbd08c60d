"""The projection against the bill, per world, seed and phase, as the markdown table of docs/reproduce.md,
from the simulated reproduce's results (bench/results/reproduce_sim*.json, one per world).

    .venv/bin/python -m bench.reproduce.projection_table
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench._common import RESULTS

PHASES = (("training_calls", "training calls"), ("evaluation_calls", "evaluation calls"), ("dollars", "dollars"))


def _cell(projected: float, paid: float, money: bool) -> str:
    fmt = (lambda x: f"${x:,.2f}") if money else (lambda x: f"{x:,.0f}")
    return f"{fmt(projected)} / {fmt(paid)} ({projected / paid:.2f})" if paid else f"{fmt(projected)} / 0"


def rows(result: dict[str, Any]) -> list[str]:
    world = result["world"]["name"]
    out = []
    for seed, r in result["per_seed"].items():
        plan, paid = r["projected"], r["paid"]
        cells = [_cell(plan[k], paid[k], k == "dollars") for k, _ in PHASES]
        out.append(f"| {world} | {seed} | " + " | ".join(cells) + " |")
    plan = {k: sum(r["projected"][k] for r in result["per_seed"].values()) for k, _ in PHASES}
    paid = {k: sum(r["paid"][k] for r in result["per_seed"].values()) for k, _ in PHASES}
    out.append(f"| {world} | all | " + " | ".join(_cell(plan[k], paid[k], k == "dollars") for k, _ in PHASES) + " |")
    lines = result["expected_lines"]
    ratio = lines["ratio"]
    paying = sum(1 for r in lines["rows"] if r["ratio"] is not None)  # zero-shot runs make no training call
    out.append(f"| {world} | runs' expected lines | {lines['within_25pct']} of {paying} within ±25% | "
               f"projected ÷ used, min / median / max: {ratio['min']:.2f} / {ratio['median']:.2f} / "
               f"{ratio['max']:.2f} | |")
    return out


def main() -> None:
    files = sorted(RESULTS.glob("reproduce_sim*.json"), key=lambda p: (p.name != "reproduce_sim.json", p.name))
    print("| world | seed | training calls: projected / paid (÷) | evaluation calls | dollars |")
    print("|---|---|---|---|---|")
    for path in files:
        result = json.loads(Path(path).read_text())
        if "per_seed" in result:
            print("\n".join(rows(result)))


if __name__ == "__main__":
    main()
