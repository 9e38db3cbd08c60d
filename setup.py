"""Build hook: the user docs (docs/*.md) go into the wheel as decoevo/docs/, where `decoevo docs` reads
them; everything else is configured in pyproject.toml."""

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py


class BuildPyWithDocs(build_py):
    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):  # an editable install reads the checkout's docs/
            return
        target = Path(self.build_lib) / "decoevo" / "docs"
        self.mkpath(str(target))
        for page in sorted(Path("docs").glob("*.md")):
            self.copy_file(str(page), str(target / page.name))


setup(cmdclass={"build_py": BuildPyWithDocs})
