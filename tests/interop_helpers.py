"""What the tests that run the real eval tools share: where promptfoo and Inspect are, and their environment."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROMPTFOO_MODULES = ROOT / "tools" / "promptfoo" / "node_modules"
PROMPTFOO = PROMPTFOO_MODULES / ".bin" / "promptfoo"
INSPECT = Path(sys.executable).parent / "inspect"
HAS_PROMPTFOO = PROMPTFOO.exists()
HAS_INSPECT = shutil.which("inspect", path=str(INSPECT.parent)) is not None
# scripts/test.sh (what CI runs) sets it where it installed the tools: there, a missing tool is a failure
# (tests/test_interop_tools.py), not the round trips skipped
REQUIRE_TOOLS = os.environ.get("DECOEVO_REQUIRE_TOOLS") == "1"


def tool_env(tmp: Path) -> dict[str, str]:
    """The tools' environment: no telemetry or update check, their homes, caches and logs under `tmp`."""
    return {**os.environ, "PROMPTFOO_DISABLE_TELEMETRY": "1", "PROMPTFOO_DISABLE_UPDATE": "1",
            "PROMPTFOO_CONFIG_DIR": str(tmp / "promptfoo-home"), "PROMPTFOO_CACHE_PATH": str(tmp / "promptfoo-cache"),
            "INSPECT_LOG_DIR": str(tmp / "inspect-logs"), "NO_COLOR": "1"}
