"""The tables of docs/performance.md § 3 from bench/results/paper_scale.json (written by paper_scale.py).

    .venv/bin/python -m bench.scale.paper_scale_report [bench/results/paper_scale.json]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from bench._common import RESULTS


def _n(value: Any, digits: int = 0) -> str:
    if value is None:
        return "–"
    return f"{value:,.{digits}f}"


def _pair(before: dict[str, Any] | None, after: dict[str, Any], key: str, digits: int = 0) -> str:
    if before is None:
        return _n(after.get(key), digits)
    return f"{_n(before.get(key), digits)} → **{_n(after.get(key), digits)}**"


def _same(versions: dict[str, Any], method: str) -> str:
    """Whether every seed made the same paid calls, tokens and outer rounds in both code versions."""
    if "before" not in versions:
        return "–"
    keys = ("calls", "tokens", "outer_rounds")
    runs = {code: {c["seed"]: tuple(c[k] for k in keys) for c in data["cells"] if c["method"] == method}
            for code, data in versions.items()}
    common = set(runs["before"]) & set(runs["after"])
    return "yes" if common and all(runs["before"][s] == runs["after"][s] for s in common) else "**no**"


def render(report: dict[str, Any]) -> str:
    versions = report["versions"]
    after = versions["after"]["rows"]
    before = versions.get("before", {}).get("rows")
    seeds = {m: r["seeds"] for m, r in after.items()}
    lines = ["| method | seeds | paid calls | tokens | outer rounds | cached answers | same calls, tokens and rounds "
             "before and after |", "|---|---:|---:|---:|---:|---:|---|"]
    for method, row in after.items():
        lines.append(f"| {method} | {seeds[method]} | {_n(row['calls'])} | {_n(row['tokens'])} | "
                     f"{_n(row['outer_rounds'], 1)} | {_n(row['cache_hits'])} | {_same(versions, method)} |")
    lines += ["", "| method | dependency waves | waves per outer round (mean / max) | critical path s | wall s | "
              "wall ÷ critical path | slots busy | in flight while busy | client CPU ms / request |",
              "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for method, row in after.items():
        b = before.get(method) if before else None
        rounds = f"{_n(row['outer_round_waves_mean'], 1)} / {_n(row['outer_round_waves_max'])}"
        if b is not None:
            rounds = f"{_n(b['outer_round_waves_mean'], 1)} / {_n(b['outer_round_waves_max'])} → **{rounds}**"
        lines.append(f"| {method} | {_pair(b, row, 'waves')} | {rounds} | {_pair(b, row, 'critical_path_s', 1)} | "
                     f"{_pair(b, row, 'wall_s', 1)} | {_pair(b, row, 'wall_over_critical_path', 2)} | "
                     f"{_pair(b, row, 'slot_utilisation', 3)} | {_pair(b, row, 'in_flight_while_active', 1)} | "
                     f"{_pair(b, row, 'client_cpu_ms_per_request', 2)} |")
    lines += ["", "| DecoEvo ÷ SkillOpt | paid calls | tokens |", "|---|---:|---:|"]
    for code, data in versions.items():
        ratio = data["decoevo_over_skillopt"]
        if ratio:
            lines.append(f"| {code} | {ratio['calls']:.2f}× | {ratio['tokens']:.2f}× |")
    return "\n".join(lines)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results", nargs="?", type=Path, default=RESULTS / "paper_scale.json")
    print(render(json.loads(parser.parse_args().results.read_text())))
