"""What this process holds open, for the tests of files kept open (or not) by the run directory's writers."""

from __future__ import annotations

import os
from pathlib import Path


def descriptors_under(folder: Path) -> list[str]:
    """The targets of this process's open descriptors inside `folder` (other threads' come and go elsewhere)."""
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(str(folder)):
            found.append(target)
    return found
