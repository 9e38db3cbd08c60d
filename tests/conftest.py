from __future__ import annotations

import compileall
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from decoevo.lm import LM, LMConfig, RequestCache
from decoevo.testing.scripted import ScriptedBackend

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def pytest_configure(config: pytest.Config) -> None:
    """Compile decoevo's sources once, before the workers start, when the environment tells Python not to write
    bytecode (PYTHONDONTWRITEBYTECODE=1, as on the machines this suite runs on): otherwise every `python -m
    decoevo` subprocess the tests start compiles the modules it imports again, about 0.2 s of CPU for a run's
    (docs/performance.md, "Suite time (issue 47.4)"). Only an editable checkout's `src/` is compiled, into its
    git-ignored __pycache__ folders, as Python does by default; an installed decoevo already has its bytecode."""
    if not sys.flags.dont_write_bytecode or hasattr(config, "workerinput"):
        return
    import decoevo

    package = Path(decoevo.__file__).resolve().parent
    if package.parent.name == "src" and os.access(package, os.W_OK):
        compileall.compile_dir(package, quiet=1)


def pytest_report_header(config: pytest.Config) -> str:
    """The browser the report's browser tests run in, as this machine's install gave it: a failure there
    reads differently in another Chromium."""
    exe = shutil.which("chromium")
    if exe is None:
        return "chromium: not installed (its browser tests skip; scripts/install.sh --dev installs it)"
    try:
        done = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=30)
        version = done.stdout.strip() or done.stderr.strip()
    except (OSError, subprocess.SubprocessError) as exc:
        version = f"could not ask its version ({type(exc).__name__})"
    return f"chromium: {exe}: {version}"


REAL_MODEL_FILES = "_real"  # tests/test_*_real*.py: end-to-end runs of the embedded model or a llama.cpp server
REAL_MODEL_UNIT = "real-model files"


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object | None:
    """Under `pytest -n 2 --dist loadfile` (scripts/test.sh): one file a worker, except the real-model files,
    which are one unit, handed out first and run one after another on one worker. Each of them keeps the
    two cores busy on its own; xdist hands out files with the most tests first, which put the two longest
    (one test each) side by side at the end: 192 s and 147 s there, against 129 s and 88 s one at a time."""
    if config.getoption("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class RealModelFilesFirst(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = super()._split_scope(nodeid)
            return REAL_MODEL_UNIT if REAL_MODEL_FILES in Path(path).stem else path

        def _assign_work_unit(self, node: Any) -> None:
            if REAL_MODEL_UNIT in self.workqueue:
                self.workqueue.move_to_end(REAL_MODEL_UNIT, last=False)
            super()._assign_work_unit(node)

    return RealModelFilesFirst(config, log)


@pytest.fixture
def toy_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A CLI test's working folder: its own request cache, and the current directory (runs/ lands there)."""
    monkeypatch.setenv("DECOEVO_CACHE", str(tmp_path / "cache.sqlite"))
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def cache(tmp_path: Path) -> RequestCache:
    return RequestCache(tmp_path / "cache.sqlite")


@pytest.fixture
def make_lm(cache: RequestCache):
    """An LM whose 'default' model is a scripted backend; no sleeping between retries."""

    async def no_sleep(_: float) -> None:
        return None

    def _make(script, **kwargs) -> tuple[LM, ScriptedBackend]:
        backend = ScriptedBackend(script)
        lm = LM(LMConfig(**kwargs), backends={"default": backend}, cache=cache, sleep=no_sleep)
        return lm, backend

    return _make


@pytest.fixture
async def openai_lm():
    """`make(base_url, cache, **spec_kwargs)`: an LM whose default model is the openai backend at
    `{base_url}/v1`, with fast backoff; closed after the test (its connections belong to the test's loop)."""
    from decoevo.lm import ModelSpec

    made: list[LM] = []

    def make(base_url: str, cache: RequestCache | None, **spec_kwargs) -> LM:
        spec_kwargs.setdefault("backoff_base_s", 0.01)
        spec = ModelSpec(backend="openai", model="fake", base_url=f"{base_url}/v1", **spec_kwargs)
        lm = LM(LMConfig(models={"default": spec}, use_cache=cache is not None), cache=cache)
        made.append(lm)
        return lm

    yield make
    for lm in made:
        await lm.aclose()
