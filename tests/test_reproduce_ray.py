"""`decoevo reproduce --ray-address`: the training cells run as Ray tasks on a local Ray instance (started
here, loopback only), then the evaluations and the report as without Ray."""

from __future__ import annotations

import json

import pytest

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
        (runs / f"{m}-s0" / "eval" / "transfer-llmeval_med.json").is_file()
        for m in ("zero_shot", "skillopt", "sc_coevo", "decoevo")
    )
    assert (tmp_path / "out" / "report.html").is_file()
