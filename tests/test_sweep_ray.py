"""`decoevo sweep --ray-address`: the same grid run as Ray tasks on a local Ray instance gives the same runs
as the local executor. The instance is started by this test (loopback only) and shut down after it."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import yaml

from .sweep_helpers import own_ray_instance, served_toy, status, sweep, write_spec

ray = pytest.importorskip("ray")
pytest.importorskip("uvicorn")


@pytest.fixture(scope="module")
def server():
    with served_toy() as fake:
        yield fake


@pytest.fixture(scope="module")
def ray_address():
    with own_ray_instance() as address:  # not a cluster that happens to run on the machine
        yield address


def final_states(sweep_dir):
    out = {}
    for cell_id, cell in status(sweep_dir).items():
        run = sweep_dir / cell["run_dir"]
        state = json.loads((run / "checkpoint.json").read_text())["state"]
        out[cell_id] = (state["solver"], state["generator"], json.loads((run / "splits.json").read_text()))
    return out


@pytest.mark.slow  # starts Ray (~35 s with its setup); the sweep's local executor is tested in the default run
def test_a_sweep_on_ray_matches_the_local_executor(tmp_path, server, ray_address, monkeypatch):
    spec = write_spec(tmp_path / "grid.yaml", server.url, ["budget_matched", "decoevo"], [0])

    monkeypatch.setenv("DECOEVO_CACHE", str(tmp_path / "local.sqlite"))
    code, out = sweep(tmp_path / "LOCAL", "--spec", spec)
    assert code == 0, out

    # A second driver process connects to the running instance, as a user would to a cluster. The cells
    # get their own request cache, so the Ray runs are paid afresh and not just replayed from the local ones.
    env = {**os.environ, "DECOEVO_CACHE": str(tmp_path / "ray.sqlite")}
    before = len(server.requests)
    proc = subprocess.run([sys.executable, "-m", "decoevo", "sweep", str(tmp_path / "RAY"), "--spec", str(spec),
                           "--ray-address", ray_address], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "ray:" in proc.stdout and len(server.requests) > before
    cells = status(tmp_path / "RAY")
    assert all(c["state"] == "done" and c["action"] == "new" for c in cells.values()), cells
    assert final_states(tmp_path / "RAY") == final_states(tmp_path / "LOCAL")
    matched = yaml.safe_load((tmp_path / "RAY/runs/toy/budget_matched-s0/config.yaml").read_text())
    assert matched["budget"]["match_run"] == str((tmp_path / "RAY/runs/toy/decoevo-s0").resolve())

    before = len(server.requests)  # and nothing is rerun on Ray either
    proc = subprocess.run([sys.executable, "-m", "decoevo", "sweep", str(tmp_path / "RAY"), "--ray-address",
                           ray_address], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert len(server.requests) == before
    assert all(c["action"] == "skip" for c in status(tmp_path / "RAY").values())


@pytest.mark.slow  # ~19 s; the shared slots themselves: tests/test_sweep_slots.py (local cells, the same files)
def test_cells_on_ray_share_the_endpoint_limit(tmp_path, ray_address):
    """4 cells as Ray tasks (1/8 CPU each: they only call a server) keep the endpoint within its limit."""
    from decoevo.testing.server import serve_app
    from decoevo.testing.sim_model import LatencyModel
    from decoevo.testing.sim_server import SimServer, SimServerConfig

    limit = 3
    server = SimServer(SimServerConfig(seed=0, slots=64, latency=LatencyModel.fixed(0.05)))
    with serve_app(server.app()) as url:
        spec = write_spec(tmp_path / "grid.yaml", url, ["decoevo", "skillopt"], [0, 1])
        grid = yaml.safe_load(spec.read_text())
        grid["lm"]["models"]["default"]["max_concurrency"] = limit
        spec.write_text(yaml.safe_dump(grid))
        env = {k: v for k, v in os.environ.items() if not k.startswith("DECOEVO_")}
        env["DECOEVO_CACHE"] = str(tmp_path / "ray.sqlite")
        proc = subprocess.run([sys.executable, "-m", "decoevo", "sweep", str(tmp_path / "SW"), "--spec", str(spec),
                               "--ray-address", ray_address], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "ray: 4 cell(s) at once" in proc.stdout
    stats = server.stats.snapshot()
    assert stats["max_in_flight"] == limit, stats  # reached, never passed (4 cells × 3 without the slots)
