"""Where cells run: child processes on this machine, or Ray tasks on a cluster. Both run `execute_cell`.

An executor has a number of slots (cells at once) and a thread count per cell; the scheduler submits
a cell when a slot is free and its dependencies are done, and waits for any cell to finish.
"""

from __future__ import annotations

import logging
import os
import socket
import subprocess
import sys
import threading
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_futures
from pathlib import Path
from typing import Any, Protocol

from ..lm.errors import ConfigError
from ..lm.local import available_cores
from .cell import CellOutcome, CellRequest, execute_cell

Result = CellOutcome | BaseException


class Executor(Protocol):
    name: str
    slots: int
    threads: int

    def submit(self, request: CellRequest) -> Any: ...

    def wait(self, handles: list[Any], timeout: float) -> list[tuple[Any, Result]]: ...

    def close(self, cancel: bool) -> None: ...


#: cells per core when every cell waits on a server: a cell spends most of its time waiting for replies
#: (about 7 CPU-seconds in a 92 s paper-scale cell), and the shared slots keep the server within its limit
IO_CELLS_PER_CORE = 8
#: and at most this many: a cell kept about 16 of a server's 64 slots busy at paper scale, so a few cells
#: fill a server, and each further process only costs memory (~100 MB)
IO_CELLS_MAX = 32


def split_cores(cores: int, cells: int, workers: int | None, threads: int | None,
                io_bound: bool = False) -> tuple[int, int]:
    """(workers, threads per worker). Cells on the embedded model are core-bound: by default as many
    workers as cells or cores, whichever is fewer, and the cores shared evenly between them, so no two
    cells' thread pools fight for one core. Cells that only wait on servers (`io_bound`) are not limited
    to the core count: up to IO_CELLS_PER_CORE per core (at most IO_CELLS_MAX), one thread each (threads
    only feed a local model); the endpoints' shared slots, not the workers, bound what reaches a server."""
    if io_bound:
        n = workers or max(1, min(cells, cores * IO_CELLS_PER_CORE, IO_CELLS_MAX))
        return n, threads or 1
    n = workers or max(1, min(cells, cores))
    return n, threads or max(1, cores // n)


class LocalExecutor:
    """Each cell in a child process, at most `slots` at once; threads here only wait for the children."""

    name = "local"

    def __init__(self, cells: int, workers: int | None = None, threads: int | None = None,
                 cores: int | None = None, io_bound: bool = False) -> None:
        self.slots, self.threads = split_cores(cores or available_cores(), cells, workers, threads, io_bound)
        self._pool = ThreadPoolExecutor(max_workers=self.slots, thread_name_prefix="decoevo-cell")
        self._procs: list[subprocess.Popen[bytes]] = []
        self._lock = threading.Lock()

    def describe(self) -> str:
        return f"local: {self.slots} worker(s) × {self.threads} thread(s)"

    def _started(self, proc: subprocess.Popen[bytes]) -> None:
        with self._lock:
            self._procs.append(proc)

    def submit(self, request: CellRequest) -> Future[CellOutcome]:
        return self._pool.submit(execute_cell, request, self._started)

    def wait(self, handles: list[Any], timeout: float) -> list[tuple[Any, Result]]:
        done, _ = wait_futures(handles, timeout=timeout, return_when=FIRST_COMPLETED)
        out: list[tuple[Any, Result]] = []
        for fut in done:
            exc = fut.exception()
            out.append((fut, exc if exc is not None else fut.result()))
        return out

    def close(self, cancel: bool) -> None:
        if cancel:
            with self._lock:
                procs = [p for p in self._procs if p.poll() is None]
            for p in procs:  # the run directories are kill-safe; the next sweep resumes these cells
                p.terminate()
            for p in procs:
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    p.kill()
        self._pool.shutdown(wait=True, cancel_futures=True)


def import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise ConfigError("running a sweep on Ray needs the ray extra: pip install 'decoevo[ray]' "
                          "(on the driver and on every machine of the cluster)") from None
    return ray


RAY_AUTH_ENV = "RAY_AUTH_MODE"


def ray_token_available() -> bool:
    """Whether this machine holds a Ray authentication token where Ray looks for one: $RAY_AUTH_TOKEN,
    the file $RAY_AUTH_TOKEN_PATH names, or ~/.ray/auth_token (which any local `ray.init()` writes)."""
    if os.environ.get("RAY_AUTH_TOKEN"):
        return True
    path = os.environ.get("RAY_AUTH_TOKEN_PATH")
    return Path(path).expanduser().is_file() if path else (Path.home() / ".ray" / "auth_token").is_file()


def token_auth_for(address: str | None) -> bool:
    """Turn on Ray's token authentication for connecting to `address` when a token is here and the mode is
    not set; True when it did. `ray start --head` enables token authentication whenever a token exists,
    but a driver given HOST:PORT does not look for one (Ray does so only for `auto`): it then retries for
    20 s and fails with "Authentication token is missing or incorrect". RAY_AUTH_MODE=disabled opts out."""
    if address in (None, "auto") or RAY_AUTH_ENV in os.environ or not ray_token_available():
        return False
    os.environ[RAY_AUTH_ENV] = "token"
    return True


def _reload_ray_config() -> None:
    """Make an already imported Ray read RAY_AUTH_MODE again (it caches its configuration at import)."""
    try:
        from ray._raylet import Config  # type: ignore[attr-defined]

        Config.initialize("")
    except (ImportError, AttributeError):  # another Ray version: the variable alone must do
        pass


def ray_connect_problem(address: str | None, exc: BaseException, token_mode: bool) -> str:
    """The one line for a failed connection, with what to set for the authentication case."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    where = f"cannot connect to the Ray cluster at {address!r}: {text[:300]}"
    if token_mode:
        return (f"{where} (connected with token authentication, from the token on this machine: if the cluster "
                f"uses another token, set RAY_AUTH_TOKEN to it; if it has none, set {RAY_AUTH_ENV}=disabled)")
    if os.environ.get(RAY_AUTH_ENV, "").lower() != "token":
        return (f"{where} (if the cluster uses token authentication, as `ray start --head` does when a token "
                f"exists: set {RAY_AUTH_ENV}=token and RAY_AUTH_TOKEN to the output of `ray get-auth-token` "
                "on the head node)")
    return where


RAY_PROBE_S = 5.0  # how long the cluster's head gets to accept a connection before the driver gives up


def ray_head_problem(address: str | None) -> str | None:
    """Why the Ray cluster `address` names cannot be reached, or None. `auto` (and no address) use the
    address of the cluster last started on this machine, which Ray keeps in its temp directory after the
    head has gone: Ray itself then retries "Failed to connect to GCS" without end. So the head is asked
    for a TCP connection first, for at most RAY_PROBE_S."""
    try:
        from ray._private.services import canonicalize_bootstrap_address  # Ray's own reading of the address
    except ImportError:  # another Ray version: Ray's own handling, unchecked
        return None
    try:
        resolved = canonicalize_bootstrap_address(address)  # type: ignore[arg-type]
    except (ConnectionError, ValueError) as exc:  # none found for auto, or not HOST:PORT
        return f"{address!r}: {' '.join(str(exc).split())}"
    if resolved is None:  # a new local instance will be started
        return None
    host, _, port = resolved.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=RAY_PROBE_S):
            return None
    except (OSError, ValueError) as exc:
        stale = address in (None, "auto") and not os.environ.get("RAY_ADDRESS")
        why = (" (the cluster last started on this machine, as Ray recorded it: its head is gone; start it again "
               "with `ray start --head`, or give --ray-address HOST:PORT of a running one)") if stale else \
            "; check the address and that its head node is running"
        reason = getattr(exc, "strerror", None) or exc
        return f"no Ray head answers at {resolved} within {RAY_PROBE_S:.0f} s ({reason}){why}"


class RayExecutor:
    """Each cell as a Ray task that calls `execute_cell` on some node; the task asks Ray for as many CPUs
    as the cell uses threads, so Ray never places more cells on a node than it has cores for.

    The sweep directory (and the data files) must be on a filesystem every node sees at the same path:
    the driver plans from the run directories and the cells write into them."""

    name = "ray"

    def __init__(self, cells: int, address: str | None, workers: int | None = None,
                 threads: int | None = None, io_bound: bool = False) -> None:
        loaded = "ray" in sys.modules
        token_mode = token_auth_for(address)  # before Ray reads its configuration, at import
        ray = self._ray = import_ray()
        self._connected = False
        if not ray.is_initialized():
            if token_mode and loaded:
                _reload_ray_config()
            problem = ray_head_problem(address)
            if problem:
                raise ConfigError(f"cannot connect to the Ray cluster: {problem}")
            try:
                ray.init(address=address, log_to_driver=False, logging_level=logging.WARNING)
            except Exception as exc:  # ConnectionError, RuntimeError, ray.exceptions.AuthenticationError...
                raise ConfigError(ray_connect_problem(address, exc, token_mode)) from None
            self._connected = True
        total = max(1, int(ray.cluster_resources().get("CPU", 1)))
        largest = max([int(n.get("Resources", {}).get("CPU", 0)) for n in ray.nodes() if n.get("Alive")] or [1])
        self.slots, self.threads = split_cores(total, cells, workers, threads, io_bound)
        self.threads = min(self.threads, largest) if threads is None else self.threads
        if self.threads > largest:
            raise ConfigError(f"--threads {self.threads} is more than the largest Ray node has ({largest} CPUs); "
                              "no node could run a cell")
        # A cell that only waits on servers takes a fraction of a CPU, so a node runs several of them.
        cpus = 1 / IO_CELLS_PER_CORE if io_bound and threads is None else self.threads
        self._remote = ray.remote(execute_cell).options(num_cpus=cpus, max_retries=0)
        self._outstanding: set[Any] = set()

    def describe(self) -> str:
        return f"ray: {self.slots} cell(s) at once × {self.threads} thread(s)"

    def submit(self, request: CellRequest) -> Any:
        ref = self._remote.remote(request)
        self._outstanding.add(ref)
        return ref

    def wait(self, handles: list[Any], timeout: float) -> list[tuple[Any, Result]]:
        ready, _ = self._ray.wait(handles, num_returns=1, timeout=timeout)
        out: list[tuple[Any, Result]] = []
        for ref in ready:
            self._outstanding.discard(ref)
            try:
                out.append((ref, self._ray.get(ref)))
            except Exception as exc:  # the task itself died (node lost, worker crashed)
                out.append((ref, exc))
        return out

    def close(self, cancel: bool) -> None:
        if cancel:  # kills the tasks' workers; their cell processes die with them (see cell.py)
            for ref in self._outstanding:
                self._ray.cancel(ref, force=True)
        if self._connected:  # disconnects this driver; a cluster started elsewhere keeps running
            self._ray.shutdown()
