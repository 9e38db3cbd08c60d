"""Shared by the sweep tests: the toy world over HTTP (with a way to make a cell fail), a small grid spec,
and in-process `decoevo sweep` invocations."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import yaml
from typer.testing import CliRunner

from decoevo.cli import app
from decoevo.testing import world
from decoevo.testing.fake_openai import FakeOpenAI, Reply
from decoevo.testing.toy_server import unwrap_repair, write_toy_questions

runner = CliRunner()
BROKEN = "BROKEN"  # a question containing this makes the server answer HTTP 400 (a cell that fails)


def responder(body, n):
    messages = unwrap_repair(body["messages"])
    if any(BROKEN in str(m["content"]) for m in messages):
        return Reply(status=400)
    return Reply(content=world.respond(messages, world.schema_of(body), world.sample_index_of(body)))


@contextmanager
def own_ray_instance() -> Iterator[str]:
    """A Ray instance of the test's own (loopback, 2 CPUs, its own temp directory), whatever else runs on
    the machine: `address="local"` starts one instead of joining the cluster RAY_ADDRESS or Ray's record
    of the last `ray start` names (that join refuses num_cpus, and a stale record hangs). Yields its address."""
    import os
    import shutil
    import tempfile

    import ray

    saved = os.environ.pop("RAY_ADDRESS", None)
    temp = tempfile.mkdtemp(prefix="ray", dir="/tmp")  # Ray's socket paths must stay short
    try:
        context = ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False,
                           _node_ip_address="127.0.0.1", object_store_memory=80 * 1024 * 1024, _temp_dir=temp)
        try:
            yield context.address_info["address"]
        finally:
            ray.shutdown()
    finally:
        shutil.rmtree(temp, ignore_errors=True)
        if saved is not None:
            os.environ["RAY_ADDRESS"] = saved


@contextmanager
def served_toy() -> Iterator[FakeOpenAI]:
    """The toy world on 127.0.0.1; its base URL (without /v1) is `.url`, its request log `.requests`."""
    from decoevo.testing.server import serve_app

    fake = FakeOpenAI(responder)
    with serve_app(fake.app()) as url:
        fake.url = url  # type: ignore[attr-defined]
        yield fake


def write_spec(path: Path, url: str, methods, seeds, benchmarks=None, **extra) -> Path:
    data = write_toy_questions(path.parent / "toy.jsonl")
    spec = {
        "methods": methods, "seeds": seeds, "preset": "default",
        "benchmarks": benchmarks or [{"name": "toy", "data": data.name, "task": "healthbench"}],
        "splits": {"train": 6, "probe": 2, "solver_gate": 3, "generator_gate": 3, "test": 0},
        "hyper": {"steps": 2, "batch_size": 2, "audit_every": 1, "rollouts": 4, "budget_step_cap": 2},
        "lm": {"models": {"default": {"backend": "openai", "model": "toy", "base_url": f"{url}/v1",
                                      "max_retries": 0}}},
        "evaluate": [],
        **extra,
    }
    path.write_text(yaml.safe_dump(spec), encoding="utf-8")
    return path


def sweep(*args):
    result = runner.invoke(app, ["sweep", *map(str, args)])
    return result.exit_code, result.output


def status(sweep_dir: Path) -> dict:
    return json.loads((sweep_dir / "status.json").read_text())["cells"]


def events(run_dir: Path) -> list[dict]:
    return [json.loads(x) for x in (run_dir / "events.jsonl").read_text().splitlines()]


def file_stamps(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): p.stat().st_mtime_ns for p in root.rglob("*") if p.is_file()}
