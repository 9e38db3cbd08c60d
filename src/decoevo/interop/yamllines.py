"""YAML read with the line of every mapping and list kept, so a bad test is named by its line.

A key given twice in one mapping is refused, naming both lines (YAML would keep the last silently, and
promptfoo's parser refuses it). A date stays the text it was written as (`2024-01-01`), as promptfoo
passes it on. libyaml's parser is used when installed: a large config parses several times faster.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from ..errors import DatasetError
from ..userfiles import DuplicateKey, UniqueKeys
from .importfiles import read_import_text

_Base: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # the same safe constructors either way


class Lined(dict[str, Any]):
    """A YAML mapping that remembers the line it starts on (1-based)."""

    line: int | None = None


class LinedList(list[Any]):
    line: int | None = None


class _Loader(UniqueKeys, _Base):
    pass


# no implicit dates: a date is the text the user wrote
_Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()}


def _mapping(loader: _Loader, node: yaml.MappingNode) -> Iterator[Lined]:
    out = Lined()
    out.line = node.start_mark.line + 1
    yield out
    out.update(loader.construct_mapping(node, deep=True))


def _sequence(loader: _Loader, node: yaml.SequenceNode) -> Iterator[LinedList]:
    out = LinedList()
    out.line = node.start_mark.line + 1
    yield out
    out.extend(loader.construct_sequence(node, deep=True))


_Loader.add_constructor("tag:yaml.org,2002:map", _mapping)
_Loader.add_constructor("tag:yaml.org,2002:seq", _sequence)


def line_of(obj: Any) -> int | None:
    return getattr(obj, "line", None)


def load_yaml_lined(path: Path, what: str) -> Any:
    """A YAML (or JSON) file's value, its mappings and lists carrying their lines; a DatasetError naming
    the line when it is not valid YAML or names a key twice."""
    text = read_import_text(path, what)
    try:
        return yaml.load(text, Loader=_Loader)  # a safe loader: no Python objects
    except DuplicateKey as exc:
        raise DatasetError(path, exc.line, None, f"the key {exc.key!r} is given twice (first on line {exc.first}); "
                           "YAML would keep only the last: keep one") from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        raise DatasetError(path, mark.line + 1 if mark else None, None,
                           f"not valid YAML ({exc.problem or exc.context})") from None
    except yaml.YAMLError as exc:
        raise DatasetError(path, None, None, f"not valid YAML ({' '.join(str(exc).split())[:200]})") from None
    except (RecursionError, TypeError, ValueError, OverflowError) as exc:  # unhashable key, bad number, nesting
        raise DatasetError(path, None, None, f"cannot be read as YAML ({type(exc).__name__})") from None
