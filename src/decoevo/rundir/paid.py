"""What the runs under a directory say they paid, from their append-only call records, for a cost cap
(`decoevo reproduce --max-cost`'s experiment, a sweep cell's grading under its run's `--max-cost`).

OUT/spend.log and the ledgers are one file each: emptied, zeroed or deleted between two invocations, they
would let `decoevo reproduce` pay the cap again from $0. Every paid call is also a line of its directory's
`calls.jsonl` (RUN/ and RUN/eval/), and every request sent is a line of `requests.jsonl` before it leaves
(rundir/requests.py): the experiment's spent amount at start is the largest of what the log, the ledgers
and these records say, so lifting the cap takes editing every record of every call.

The experiment counts only its own directory: a linked directory (or record) inside OUT would put another
experiment's runs under this one's cap, or this one's calls where its count does not look. It is refused.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from ..errors import ConfigError
from .files import RunReadError
from .reader import parse_call_lines
from .records import CALLS, REQUESTS
from .requests import unanswered


def refuse_links(out: Path) -> None:
    """One line naming the first symbolic link inside OUT (not followed: the count would miss or borrow runs)."""
    if not out.is_dir():
        return
    for folder, dirs, files in os.walk(out, followlinks=False):
        for name in sorted([*dirs, *files]):
            path = Path(folder) / name
            if path.is_symlink():
                raise ConfigError(f"{path}: is a symbolic link (to {os.readlink(path)}); an experiment's runs "
                                  "and records are its own files, counted under its own cost cap: replace it with "
                                  "the directory or file itself, or start the experiment in another directory")


def paid_in_records(out: Path, cost_of: Callable[[str, int, int], float]) -> float:
    """The dollars the call records under `out` say were paid: each paid line of every `calls.jsonl` at
    `cost_of(model, prompt_tokens, completion_tokens)`, and each request recorded as sent that no answer
    completed at its bound (the provider got it). `cost_of` is the caller's prices (`lm.pricing.cost_of_models`)."""
    total = 0.0
    for folder, _dirs, files in os.walk(out, followlinks=False) if out.is_dir() else []:
        if CALLS not in files and REQUESTS not in files:
            continue
        root = Path(folder)
        path = root / CALLS
        calls = parse_call_lines(path.read_bytes(), path) if CALLS in files else []
        try:
            lost = unanswered(root, calls, live=set())
        except RunReadError as exc:  # an edited token count: refused where it would be billed too
            raise ConfigError(str(exc)) from None
        total += sum(cost_of(c.model, c.prompt_tokens, c.completion_tokens) for c in [*calls, *lost] if not c.cached)
    return total
