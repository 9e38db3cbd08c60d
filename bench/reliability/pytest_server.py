"""A pytest fork server for the mutation bench: import the heavy third-party code once, then fork a fresh
child for every `pytest` run.

Each mutant used to pay a whole interpreter start: pytest and its plugins, hypothesis, numpy, scipy,
matplotlib, pydantic... (5-10 s of CPU before the first test, most of a mutant's cost for a short test
file). This server, started in the checkout copy, first collects the given test files once in a throwaway
child to learn which modules they import, imports those that live outside the copy (never `decoevo`, the
tests or the benches, which the mutant changes), and then answers one request a line on stdin (a JSON list
of pytest arguments) by forking: the child runs `pytest.main` on the copy as it is now (so it imports the
mutated module fresh), and the server prints `{"pid": ...}` and then `{"rc": ...}` on stdout. The child
leads its own process group, so the bench can kill a run that exceeds its time limit with everything it
started.

    python -m bench.reliability.pytest_server TEST_FILE...   (run with the copy as the working directory)
"""

from __future__ import annotations

import importlib
import json
import os
import sys
from pathlib import Path


def _silence() -> None:
    fd = os.open(os.devnull, os.O_RDWR)
    for target in (0, 1, 2):
        os.dup2(fd, target)


def _outside(root: Path) -> list[str]:
    """The modules collecting the tests imports from outside the copy (third-party and standard library)."""
    import pytest

    pytest.main(["--collect-only", "-q", "-p", "no:cacheprovider", *sys.argv[1:]])
    names = []
    for name, module in list(sys.modules.items()):
        where = getattr(module, "__file__", None)
        if name == "__main__" or (where and Path(where).resolve().is_relative_to(root)):
            continue
        names.append(name)
    return names


def _preload(root: Path) -> None:
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # collect in a child: the server itself never imports the copy's code
        os.close(read)
        _silence()
        os.write(write, json.dumps(_outside(root)).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        data = pipe.read()
    os.waitpid(pid, 0)
    for name in json.loads(data or b"[]"):
        try:
            importlib.import_module(name)
        except Exception:  # an alias or a module that only imports in context: the child imports it itself
            continue


def main() -> int:
    root = Path.cwd().resolve()
    _preload(root)
    import pytest

    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        args = json.loads(line)
        sys.stdout.flush()
        pid = os.fork()
        if pid == 0:
            os.setpgid(0, 0)
            _silence()
            try:
                code = int(pytest.main(args))
            except BaseException:  # any crash of the run is a failed run
                code = 99
            os._exit(code)
        print(json.dumps({"pid": pid}), flush=True)
        _, status = os.waitpid(pid, 0)
        print(json.dumps({"rc": os.waitstatus_to_exitcode(status)}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
