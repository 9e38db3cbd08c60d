"""`decoevo reproduce --ray-address`: the training cells run as Ray tasks on a local Ray instance (started
here, loopback only), then the evaluations and the report as without Ray."""

from __future__ import annotations

import json
import os

import pytest

from .result_files import has_result
from .sweep_helpers import own_ray_instance
from .test_reproduce import invoke, sim  # noqa: F401  (the simulated server fixture)

ray = pytest.importorskip("ray")


@pytest.mark.slow
def test_reproduce_on_ray(tmp_path, sim):  # noqa: F811
    with own_ray_instance() as address:  # not a cluster that happens to run on the machine
        code, out = invoke(
            tmp_path,
            sim.url,
            "--grader-model",
            "sim-grader",
            "--grader-base-url",
            f"{sim.url}/v1",
            "--yes",
            "--ray-address",
            address,
        )
    assert code == 0, out
    assert "ray" in out.lower()
    sweep = tmp_path / "out" / "sweeps" / "healthbench"
    cells = json.loads((sweep / "status.json").read_text())["cells"]
    assert len(cells) == 4 and all(c["state"] == "done" for c in cells.values())
    runs = sweep / "runs" / "healthbench"
    assert all(
        has_result(runs / f"{m}-s0", "transfer-llmeval_med")
        for m in ("zero_shot", "skillopt", "sc_coevo", "decoevo")
    )
    assert (tmp_path / "out" / "report.html").is_file()


@pytest.mark.slow
def test_the_cost_cap_holds_for_cells_run_as_ray_tasks(tmp_path, sim, monkeypatch):  # noqa: F811
    """Issue 25 item 3: Ray workers reserve in OUT/spend.log like cell processes, so the experiment's
    spend stays under the cap there too."""
    from decoevo.lm.spend import read_spend, read_state

    monkeypatch.setenv("DECOEVO_CACHE", str(tmp_path / "cache.sqlite"))
    priced = {"backend": "openai", "base_url": f"{sim.url}/v1", "input_price_per_mtok": 50.0,
              "output_price_per_mtok": 50.0}
    models = tmp_path / "models.yaml"
    models.write_text(json.dumps({"solver": {**priced, "model": "sim"}, "grader": {**priced, "model": "sim-grader"}}))
    with own_ray_instance() as address:
        code, out = invoke(tmp_path, sim.url, "--models", str(models), "--yes", "--ray-address", address,
                           "--max-cost", "0.5")
    assert code == 2 and "at its cost cap" in " ".join(out.split()), out
    spend = tmp_path / "out" / "spend.log"
    pids = {int(f[3]) for f in map(str.split, spend.read_text().splitlines()) if f[0] == "r"}
    assert pids - {os.getpid()}  # the Ray workers running the cells reserved there, not only this driver
    assert read_spend(spend) <= 0.5 and read_state(spend).stopped_at == 0.5
