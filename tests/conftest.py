from __future__ import annotations

from pathlib import Path

import pytest

from decoevo.lm import LM, LMConfig, RequestCache
from decoevo.testing.scripted import ScriptedBackend

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


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
