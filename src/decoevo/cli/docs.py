"""`decoevo docs [TOPIC]`: the user docs (docs/*.md) as the installed package holds them, so a wheel user
reads the same pages a checkout has, offline. Messages and references cite them as `decoevo docs TOPIC`."""

from __future__ import annotations

import sys
from importlib import resources
from pathlib import Path

import typer

from .common import console, fail, guarded


def docs_folder() -> Path | None:
    """The wheel's decoevo/docs/ (setup.py copies docs/*.md there), else the checkout's docs/ (an editable
    install or PYTHONPATH=src); None if neither exists."""
    packaged = Path(str(resources.files("decoevo"))) / "docs"
    if packaged.is_dir() and any(packaged.glob("*.md")):
        return packaged
    checkout = Path(__file__).resolve().parents[3] / "docs"
    return checkout if checkout.is_dir() else None


def topics(folder: Path) -> dict[str, Path]:
    return {p.stem: p for p in sorted(folder.glob("*.md"))}


def title(page: Path) -> str:
    """The page's first heading, without its `#`s."""
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.startswith("#"):
            return line.lstrip("#").strip()
    return ""


def find(pages: dict[str, Path], topic: str) -> Path | None:
    """A topic by its name (`cost`), its file name (`cost.md`) or an unambiguous prefix (`config`)."""
    name = topic.strip().lower().removeprefix("docs/").removesuffix(".md")
    if name in pages:
        return pages[name]
    starts = [p for stem, p in pages.items() if stem.startswith(name)] if name else []
    return starts[0] if len(starts) == 1 else None


@guarded
def docs(
    topic: str = typer.Argument(None, help="A page to print (e.g. configuration, cost, report); none: list them."),
) -> None:
    """List the user documentation shipped with decoevo, or print one page (Markdown) to stdout."""
    folder = docs_folder()
    if folder is None:
        fail("this installation holds no docs (a build without setup.py's docs hook); see the project's docs/")
        return
    pages = topics(folder)
    if topic is None:
        width = max(len(s) for s in pages)
        for stem, page in pages.items():
            console.print(f"{stem:<{width}}  {title(page)}", highlight=False, markup=False)
        console.print("read one: decoevo docs TOPIC (e.g. decoevo docs configuration)", highlight=False,
                      markup=False)
        return
    page = find(pages, topic)
    if page is None:
        fail(f"no docs page {topic!r}; the pages: {', '.join(pages)}")
        return
    sys.stdout.write(page.read_text(encoding="utf-8"))
