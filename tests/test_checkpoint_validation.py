"""A checkpoint that cannot be resumed from is refused before any model call or any write (issue 21, item
7): one line naming the file and the field, exit 2, the run directory unchanged byte for byte, and the
server never asked anything."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from decoevo.testing.server import serve_app
from decoevo.testing.toy_server import toy_run_args, toy_server, write_toy_questions

pytest.importorskip("uvicorn")


def snapshot(root: Path) -> dict[str, str]:
    """Every entry under `root` with a digest of its content (a directory as such)."""
    return {str(p.relative_to(root)): "dir" if p.is_dir() else hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.name != ".lock"}


def edit_state(field: str, value: object) -> Callable[[Path], None]:
    def edit(path: Path) -> None:
        data = json.loads(path.read_text())
        target = data
        *parents, last = field.split(".")
        for part in parents:
            target = target[part]
        target[last] = value
        path.write_text(json.dumps(data))

    return edit


def into_directory(path: Path) -> None:
    path.unlink()
    path.mkdir()
    (path / "inside.txt").write_text("not a checkpoint")


CASES: dict[str, tuple[Callable[[Path], None], str]] = {
    "a directory": (into_directory, "is a directory"),
    "a negative skill version": (edit_state("state.solver.version", -1), "state.solver.version"),
    "a step that is not a number": (edit_state("state.next_step", "three"), "state.next_step"),
    "a skill without text": (edit_state("state.generator", {"kind": "generator", "version": 0}),
                             "state.generator.text"),
    "a ledger row without a model": (edit_state("ledger", {"rows": [{"role": "solve", "calls": 1}]}),
                                     "ledger.rows.0"),
    "a call log that is a directory": (lambda path: into_directory(path.parent / "calls.jsonl"), "calls.jsonl"),
}


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("checkpoints")
    data = write_toy_questions(root / "toy.jsonl")
    server = toy_server()
    with serve_app(server.app()) as url:
        args = toy_run_args(f"{url}/v1", data, root / "runs", "done", steps=1)
        env = {**os.environ, "DECOEVO_CACHE": str(root / "cache.sqlite")}
        proc = subprocess.run([sys.executable, "-m", "decoevo", *args], capture_output=True, text=True,
                              timeout=300, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return root / "runs" / "done"


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_bad_checkpoint_is_refused_before_any_call_or_write(case: str, finished_run: Path, tmp_path: Path) -> None:
    damage, named = CASES[case]
    run = tmp_path / "run"
    shutil.copytree(finished_run, run)
    damage(run / "checkpoint.json")
    before = snapshot(run)
    server = toy_server()
    with serve_app(server.app()) as url:
        # The resumed run asks the same server (its config names the first one's URL: point it here).
        config = run / "config.yaml"
        text = config.read_text()
        old = text.split("base_url: ")[1].split("\n")[0]
        config.write_text(text.replace(old, f"{url}/v1"))
        before = snapshot(run)
        env = {**os.environ, "DECOEVO_CACHE": str(tmp_path / "fresh.sqlite")}  # every call would reach the server
        proc = subprocess.run([sys.executable, "-m", "decoevo", "resume", str(run)], capture_output=True, text=True,
                              timeout=300, env=env)
    message = "".join(proc.stderr.split())  # the terminal wraps long lines anywhere
    assert proc.returncode == 2, proc.stdout + proc.stderr
    file = "calls.jsonl" if named == "calls.jsonl" else "checkpoint.json"
    assert f"{run}/{file}:" in message and "".join(named.split()) in message, proc.stderr
    assert "internal error" not in message and "Traceback" not in proc.stderr
    assert server.requests == [], f"{len(server.requests)} model calls before the refusal"
    assert snapshot(run) == before  # nothing written, nothing cut


def test_the_api_names_the_field_of_a_finished_runs_checkpoint(finished_run: Path, tmp_path: Path) -> None:
    """`decoevo.resume` of a finished run reads its result from disk: a bad state is named, not a bug."""
    import decoevo
    from decoevo.errors import UserError

    run = tmp_path / "run"
    shutil.copytree(finished_run, run)
    edit_state("state.solver.version", "one")(run / "checkpoint.json")
    with pytest.raises(UserError, match=r"checkpoint.json: field 'state.solver.version'"):
        decoevo.resume(run)
