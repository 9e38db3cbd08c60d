"""The folder an export writes into (`decoevo export --to promptfoo|inspect DIR`), written safely.

- No link is followed: DIR, and every folder under it that the export writes into, must be a real folder,
  and a file is never written through a link.
- No file of the user's is replaced: DIR/decoevo-export.json lists what the last export wrote (with each file's
  sha256); a file there that it does not list, or that was edited since, is refused unless `force`.
- An input is never an output: a file the export reads (the run's, `--data`) is never written.
Files are written whole (a new file renamed over the old one), so a killed export leaves old or new files.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..fileio import atomic_write_text

MANIFEST = "decoevo-export.json"


def _read(path: Path) -> bytes | None:
    """The file's bytes, or None when it is missing, not a file, or a link (never followed)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        try:
            return f.read()
        except OSError:  # a folder opens, but does not read
            return None


def _sha256(path: Path) -> str | None:
    data = _read(path)
    return None if data is None else hashlib.sha256(data).hexdigest()


def json_text(value: Any) -> str:
    """A JSON file of an export, as a person reads (and edits) it: indented, text outside ASCII as itself (not
    \\u escapes), one final newline. The tools read the same values from any layout; this is the one place the
    layout is chosen."""
    return json.dumps(value, indent=2, ensure_ascii=False) + "\n"


class OutDir:
    """`root`, checked before anything is paid (`check`) and written once (`write`)."""

    def __init__(self, root: Path, *, force: bool = False, inputs: Iterable[Path] = (),
                 about: Mapping[str, Any] | None = None) -> None:
        self.root = root
        self.force = force
        self.inputs = [p for p in inputs if p.exists()]
        self.about = dict(about or {})

    def _fail(self, problem: str) -> ConfigError:
        return ConfigError(f"{self.root}: {problem}")

    def _manifest(self) -> dict[str, str]:
        """What the last export listed; nothing when the manifest is missing, damaged or a link (which `check`
        refuses anyway: it is read the same way as every file it lists, never through a link)."""
        data = _read(self.root / MANIFEST)
        try:
            files = json.loads(data or b"{}").get("files", {})
        except (ValueError, AttributeError):
            return {}
        return {str(k): str(v) for k, v in files.items()} if isinstance(files, dict) else {}

    def check(self, names: Iterable[str]) -> None:
        """Refuse, before anything is written or paid, what `write(names...)` would do wrong."""
        if self.root.is_symlink():
            raise self._fail(f"is a symbolic link (to {self.root.resolve()}); decoevo does not write through a link: "
                             "name a folder itself")
        if self.root.exists() and not self.root.is_dir():
            raise self._fail("is a file; name a folder to write the export into")
        ours = self._manifest()
        for name in [*names, MANIFEST]:
            path = self.root / name
            for folder in list(Path(name).parents)[:-1]:
                if (self.root / folder).is_symlink() or ((self.root / folder).exists()
                                                         and not (self.root / folder).is_dir()):
                    raise self._fail(f"{folder} is a link or a file; decoevo writes its {folder}/ files only into a "
                                     "folder of its own")
            if path.is_symlink():
                raise self._fail(f"{name} is a symbolic link; decoevo does not write through a link (remove it)")
            if any(path.exists() and path.resolve() == p.resolve() for p in self.inputs):
                raise self._fail(f"{name} is one of the export's inputs; write the export into another folder")
            if path.exists() and not path.is_file():
                raise self._fail(f"{name} is not a regular file")
            if name != MANIFEST and path.exists() and not self.force and ours.get(name) != _sha256(path):
                why = "was changed since decoevo wrote it" if name in ours else "was not written by decoevo"
                raise self._fail(f"{name} {why}; name an empty folder, or pass --force to replace it")

    def write(self, files: Mapping[str, str]) -> list[Path]:
        """Write `files` (path under root -> text) and the manifest; returns the paths written."""
        self.check(files)
        self.root.mkdir(parents=True, exist_ok=True)
        written = []
        for name, text in files.items():
            path = self.root / name
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_text(path, text)
            written.append(path)
        manifest = {**self.about, "files": {name: hashlib.sha256(text.encode("utf-8")).hexdigest()
                                            for name, text in files.items()}}
        atomic_write_text(self.root / MANIFEST, json_text(manifest))
        return written
