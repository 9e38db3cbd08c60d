from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from decoevo.lm import LM, LMConfig, RequestCache
from decoevo.testing.scripted import ScriptedBackend

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


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
