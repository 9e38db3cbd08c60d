"""A sweep's cells share each endpoint's concurrency: 4 cells (child processes) against a simulated server
that counts requests in flight on its side, with `max_concurrency` = the endpoint's slot count. Before
the shared slots, each cell's own limiter allowed max_concurrency, so the server saw up to cells × that.
The utilisation is reported; it is a property of the load and the machine, asserted only loosely."""

from __future__ import annotations

import json

import pytest
import yaml

from decoevo.lm.shared_slots import ENV
from decoevo.sweep.executors import split_cores
from decoevo.sweep.plan import waits_on_servers
from decoevo.testing.sim_model import LatencyModel
from decoevo.testing.sim_server import SimServer, SimServerConfig

from .sweep_helpers import status, sweep, write_spec

pytest.importorskip("uvicorn")

LIMIT = 4  # the endpoint's slots, as max_concurrency of its model


@pytest.mark.slow  # a timed sweep (~12 s); the shared limiter is unit-tested in the default run
def test_cells_share_the_endpoint_limit_and_keep_it_busy(tmp_path, monkeypatch):
    from decoevo.testing.server import serve_app

    monkeypatch.setenv("DECOEVO_CACHE", str(tmp_path / "cache.sqlite"))
    monkeypatch.delenv(ENV, raising=False)
    # The server itself would take 64 at once: only the client side keeps the sweep to LIMIT.
    server = SimServer(SimServerConfig(seed=0, slots=64, latency=LatencyModel.fixed(0.05)))
    with serve_app(server.app()) as url:
        spec = write_spec(tmp_path / "grid.yaml", url, ["decoevo", "skillopt"], [0, 1])
        grid = yaml.safe_load(spec.read_text())
        grid["lm"]["models"]["default"]["max_concurrency"] = LIMIT
        spec.write_text(yaml.safe_dump(grid))
        code, out = sweep(tmp_path / "SW", "--spec", spec)
    assert code == 0, out
    assert all(c["state"] == "done" for c in status(tmp_path / "SW").values())
    assert "4 worker(s)" in out  # I/O-bound cells are not limited to the 2 cores of a small machine
    stats = server.stats.snapshot()
    busy = stats["busy_slot_s"] / (LIMIT * stats["active_s"])
    print(f"\nshared endpoint: {stats['served']} requests, at most {stats['max_in_flight']} in flight of "
          f"{LIMIT}, {busy:.0%} of the slots busy while any request was in flight")
    (tmp_path / "utilisation.json").write_text(json.dumps({**stats, "slot_utilisation": busy}))
    assert stats["max_in_flight"] <= LIMIT  # never over the endpoint's limit (4 cells × 4 before)
    assert stats["max_in_flight"] == LIMIT  # and the cells together did fill it
    assert busy > 0.3  # loose: a loaded test machine starves the cells, not the slots


def test_workers_follow_what_the_cells_wait_on():
    assert split_cores(2, cells=20, workers=None, threads=None, io_bound=True) == (16, 1)
    assert split_cores(2, cells=4, workers=None, threads=None, io_bound=True) == (4, 1)
    assert split_cores(64, cells=400, workers=None, threads=None, io_bound=True) == (32, 1)  # memory, not cores
    assert split_cores(2, cells=4, workers=3, threads=2, io_bound=True) == (3, 2)
    assert split_cores(2, cells=4, workers=None, threads=None) == (2, 1)  # the embedded model: core-bound
    server = {"lm": {"models": {"default": {"backend": "openai", "base_url": "http://x/v1"}}}}
    mixed = {"lm": {"models": {**server["lm"]["models"], "judge": {"backend": "local"}}}}
    assert waits_on_servers(server) and not waits_on_servers(mixed) and not waits_on_servers({})
