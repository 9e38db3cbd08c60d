"""What a run was started from, so that `resume` refuses what changed instead of continuing silently
with other splits or another method: the method and seed of its start event, the sha256 of its data
(`inputs.json`) and its splits (`splits.json`), compared with what the configuration gives now."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..fileio import sha256_file


def data_sha256(path: Path | str) -> str | None:
    """A data file's sha256; for a folder (EQ-Bench), the sha256 over its files' names and hashes.
    None when the path is neither."""
    path = Path(path)
    if path.is_file():
        return sha256_file(path)
    if path.is_dir():
        digest = hashlib.sha256()
        for f in sorted(p for p in path.rglob("*") if p.is_file()):
            digest.update(f"{f.relative_to(path).as_posix()}\0{sha256_file(f)}\n".encode())
        return digest.hexdigest()
    return None


@dataclass(frozen=True)
class RunInputs:
    method: str
    seed: int
    data_sha256: str | None  # None: not recorded (an older run) or not readable
    splits: dict[str, list[str]]


def _split_change(name: str, before: list[str], after: list[str]) -> str:
    gone, new = sorted(set(before) - set(after)), sorted(set(after) - set(before))
    if not gone and not new:
        return f"{name}: same ids in another order"
    example = f" (e.g. {(gone or new)[0]!r} {'left' if gone else 'joined'})"
    return f"{name}: {len(gone)} id(s) left and {len(new)} joined{example}"


def identity_changes(recorded: RunInputs, now: RunInputs) -> list[str]:
    """Method and seed: what a run is. A change is never accepted (it is another run)."""
    out = []
    if recorded.method != now.method:
        out.append(f"method is {now.method!r} in config.yaml, but the run started as {recorded.method!r}")
    if recorded.seed != now.seed:
        out.append(f"seed is {now.seed} in config.yaml, but the run started with seed {recorded.seed}")
    return out


def checkpoint_mismatch(checkpoint: Mapping[str, Any], run: Mapping[str, Any]) -> list[str]:
    """How a checkpoint's identity (method, seed, run_id) differs from the run's start event's: a checkpoint
    copied from another run (`cp RUN_s4/checkpoint.json RUN_s3/`) would continue that run's state under this
    run's name. A field either side does not record (an older run) is not compared."""
    return [f"{key} {checkpoint[key]!r} (this run's: {run[key]!r})" for key in ("method", "seed", "run_id")
            if checkpoint.get(key) is not None and run.get(key) is not None and checkpoint[key] != run[key]]


def data_changes(recorded: RunInputs, now: RunInputs, data_path: str) -> list[str]:
    """The data file and the splits it gives: a change may be accepted explicitly."""
    out = []
    if recorded.data_sha256 is not None and recorded.data_sha256 != now.data_sha256:
        now_sha = now.data_sha256[:12] if now.data_sha256 else "unreadable"
        out.append(f"the data {data_path} changed since the run started (sha256 {recorded.data_sha256[:12]}… "
                   f"now {now_sha}…)")
    names = sorted(set(recorded.splits) | set(now.splits))
    changed = [_split_change(n, recorded.splits.get(n, []), now.splits.get(n, []))
               for n in names if recorded.splits.get(n, []) != now.splits.get(n, [])]
    if changed:
        out.append("the splits made now differ from splits.json: " + "; ".join(changed))
    return out
