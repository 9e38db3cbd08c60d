"""docs/sweeps.md's recipe as users run it: a `ray start --head` cluster in its own process and a separate
`decoevo sweep --ray-address 127.0.0.1:PORT` driver. Ray (2.5x) turns token authentication on in
`ray start --head` whenever this machine holds a token (~/.ray/auth_token, written by any local
`ray.init()`), but a driver given HOST:PORT does not look for the token: before, the sweep retried for
20 s and failed with "cannot connect to the Ray cluster". The head is stopped by its own process group
(never `ray stop`, which stops every Ray on the machine)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from decoevo.testing.server import free_port

from .sweep_helpers import served_toy, status, write_spec

pytest.importorskip("ray")
pytest.importorskip("uvicorn")
pytestmark = pytest.mark.slow

RAY = str(Path(sys.executable).parent / "ray")


@contextmanager
def ray_head(env: dict[str, str]) -> Iterator[tuple[str, str]]:
    """`ray start --head --block` on 127.0.0.1; yields its address and its log so far."""
    port = free_port()
    temp = tempfile.mkdtemp(prefix="ray", dir="/tmp")  # Ray's socket paths must stay short
    log = Path(temp) / "head.log"
    with log.open("w") as out:
        head = subprocess.Popen([RAY, "start", "--head", "--block", "--port", str(port), "--node-ip-address",
                                 "127.0.0.1", "--num-cpus", "2", "--include-dashboard", "false", "--temp-dir",
                                 temp, "--disable-usage-stats"], env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while "Ray runtime started" not in log.read_text():
            assert head.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.5)
        yield f"127.0.0.1:{port}", log.read_text()
    finally:
        os.killpg(head.pid, signal.SIGTERM)  # the head drains, then stops its processes and workers
        try:
            head.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(head.pid, signal.SIGKILL)
            head.wait(timeout=10)
        shutil.rmtree(temp, ignore_errors=True)


def test_sweep_connects_to_a_ray_start_head_cluster_with_token_authentication(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("DECOEVO_", "RAY_")) and k != "MLFLOW_TRACKING_URI"}
    env.update(HOME=str(home), DECOEVO_CACHE=str(tmp_path / "cache.sqlite"))
    # The token any earlier local `ray.init()` leaves on a machine; `ray get-auth-token --generate` makes it.
    subprocess.run([RAY, "get-auth-token", "--generate"], env=env, check=True, capture_output=True, timeout=120)
    assert (home / ".ray" / "auth_token").is_file()
    with served_toy() as server, ray_head(env) as (address, head_log):
        assert "Token authentication is enabled" in head_log  # the situation users meet
        spec = write_spec(tmp_path / "grid.yaml", server.url, ["decoevo"], [0, 1])
        started = time.monotonic()
        proc = subprocess.run([sys.executable, "-m", "decoevo", "sweep", str(tmp_path / "SW"), "--spec", str(spec),
                               "--ray-address", address], env=env, capture_output=True, text=True, timeout=600,
                              cwd=tmp_path)
        took = time.monotonic() - started
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "ray: " in proc.stdout
    assert all(c["state"] == "done" for c in status(tmp_path / "SW").values())
    assert took < 300


def test_a_cluster_that_refuses_the_driver_says_what_to_set(tmp_path):
    """The head has a token the driver does not: one line naming RAY_AUTH_TOKEN, not a bare 'cannot connect'."""
    head_home, driver_home = tmp_path / "head", tmp_path / "driver"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DECOEVO_", "RAY_"))}
    head_env = {**env, "HOME": str(head_home)}
    head_home.mkdir()
    driver_home.mkdir()
    subprocess.run([RAY, "get-auth-token", "--generate"], env=head_env, check=True, capture_output=True, timeout=120)
    with ray_head(head_env) as (address, _):
        proc = subprocess.run([sys.executable, "-m", "decoevo", "sweep", str(tmp_path / "SW"), "--methods", "decoevo",
                               "--seeds", "0", "--ray-address", address],
                              env={**env, "HOME": str(driver_home), "DECOEVO_CACHE": str(tmp_path / "c.sqlite")},
                              capture_output=True, text=True, timeout=300, cwd=tmp_path)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 2, output
    assert "cannot connect to the Ray cluster" in output and "RAY_AUTH_TOKEN" in output
    assert "Traceback" not in output
