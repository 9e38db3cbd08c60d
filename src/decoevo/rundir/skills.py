"""A skill version on disk: two header comments (kind, version, parent; the reason) and the text.
One writer and one parser, used by the engine, evaluation, export and the report."""

from __future__ import annotations

import re

from ..domain import Skill

_HEADER = re.compile(r"<!-- kind: (\w+); version: v(\d+); parent: (none|v\d+) -->\n<!-- reason: (.*?) -->\n\n",
                     re.DOTALL)


def skill_markdown(skill: Skill) -> str:
    parent = "none" if skill.parent is None else f"v{skill.parent:03d}"
    return (f"<!-- kind: {skill.kind}; version: v{skill.version:03d}; parent: {parent} -->\n"
            f"<!-- reason: {skill.reason.replace('--', '- -')} -->\n\n{skill.text.strip()}\n")


def parse_skill_markdown(text: str) -> Skill:
    """The inverse of `skill_markdown`; ValueError for a file without the headers."""
    m = _HEADER.match(text)
    if m is None:
        raise ValueError("not a decoevo skill file (the two header comments are missing)")
    kind, version, parent, reason = m.groups()
    return Skill(kind=kind, version=int(version), text=text[m.end():].rstrip("\n"),
                 parent=None if parent == "none" else int(parent[1:]), reason=reason)


def skill_path(kind: str, version: int) -> str:
    return f"skills/{kind}/v{version:03d}.md"
