"""The configuration reference: every key of a run configuration with its type, default, allowed values
and description, rendered from the pydantic models so that the page cannot drift from the code.

docs/configuration.md is a hand-written preamble, `MARKER`, then `render_reference()`;
tests/test_config_reference.py fails when the committed page differs. Regenerate it with `COMMAND`.
"""

from __future__ import annotations

import inspect
import sys
import types
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from ..benchmarks import BENCHMARKS, GRADER_ROLES
from ..methods import METHODS
from ..presets import PRESETS
from ..tasks.load import DataConfig
from .config import RunConfig, key_pattern, nearest_key
from .role_names import MATCHER_ROLE, OPTIMIZATION_ROLES

COMMAND = "python -m decoevo.engine.config_reference docs/configuration.md"
MARKER = f"<!-- Generated below from the configuration models; edit them, then run: {COMMAND} -->"

# Values a field validator checks against a registry (pydantic constraints cannot express them).
CHECKED_VALUES: dict[tuple[type[BaseModel], str], tuple[str, ...]] = {
    (RunConfig, "method"): tuple(METHODS),
    (DataConfig, "format"): tuple(BENCHMARKS),
}
MAPPING_KEY = "NAME"  # stands for the user's own keys of a mapping of models, e.g. lm.models.NAME.backend
__all__ = ["nearest_key"]  # re-exported: `decoevo config` reads keys from here
SCALARS = {bool: "boolean", int: "integer", float: "number", str: "string"}


@dataclass(frozen=True)
class Row:
    key: str
    type: str
    default: str
    allowed: str
    description: str


@dataclass(frozen=True)
class Section:
    key: str  # "" for the top level
    model: type[BaseModel]
    rows: tuple[Row, ...]


def _model(annotation: Any) -> type[BaseModel] | None:
    return annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None


def _mapping_of_models(annotation: Any) -> type[BaseModel] | None:
    return _model(get_args(annotation)[1]) if get_origin(annotation) is dict else None


def _parts(annotation: Any) -> tuple[list[Any], bool]:
    """The non-null members of an annotation and whether null is allowed."""
    if get_origin(annotation) in (Union, types.UnionType):
        args = get_args(annotation)
        return [a for a in args if a is not type(None)], type(None) in args
    return [annotation], False


def type_name(annotation: Any) -> str:
    members, nullable = _parts(annotation)
    names = []
    for a in members:
        if get_origin(a) is Literal:
            names.append(SCALARS.get(type(get_args(a)[0]), "value"))
        elif get_origin(a) is dict:
            key, value = get_args(a)
            names.append(f"mapping of {type_name(key)} to {'model' if _model(value) else type_name(value)}")
        else:
            names.append(SCALARS.get(a, getattr(a, "__name__", str(a))))
    return " or ".join(names + (["null"] if nullable else []))


def _number(value: float) -> str:
    if isinstance(value, int) and abs(value) >= 10**6 and str(abs(value)).rstrip("0") == "1":
        return f"{'-' if value < 0 else ''}10^{len(str(abs(value))) - 1}"
    return f"{value:g}" if isinstance(value, float) else str(value)


def _bounds(field: FieldInfo) -> str:
    """pydantic's ge/gt/le/lt as a range: "x ≥ 1", "0 < x ≤ 2"."""
    b = {a: getattr(m, a) for m in field.metadata for a in ("ge", "gt", "le", "lt") if getattr(m, a, None) is not None}
    low = ("≤", b["ge"]) if "ge" in b else ("<", b["gt"]) if "gt" in b else None
    high = ("≤", b["le"]) if "le" in b else ("<", b["lt"]) if "lt" in b else None
    if low and high:
        return f"{_number(low[1])} {low[0]} x {high[0]} {_number(high[1])}"
    if low:
        return f"x {'≥' if low[0] == '≤' else '>'} {_number(low[1])}"
    return f"x {high[0]} {_number(high[1])}" if high else ""


def allowed_values(model: type[BaseModel], name: str, field: FieldInfo) -> str:
    members, _ = _parts(field.annotation)
    literals = [v for a in members if get_origin(a) is Literal for v in get_args(a)]
    values = literals or list(CHECKED_VALUES.get((model, name), ()))
    if values:
        return ", ".join(f"`{v}`" for v in values)
    if _mapping_of_models(field.annotation) is not None:
        return "must hold `default`"
    return _bounds(field)


def _yaml(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return _number(value)
    if isinstance(value, str):
        return value if value else '""'
    if isinstance(value, Mapping) and not value:
        return "{}"
    raise TypeError(f"no inline form for the default {value!r}")


def default_text(field: FieldInfo) -> str:
    if field.is_required():
        return "required"
    value = field.get_default(call_default_factory=True)
    if isinstance(value, Mapping) and value and all(isinstance(v, BaseModel) for v in value.values()):
        return ", ".join(f"`{k}`" for k in value) + " with every default"
    return f"`{_yaml(value)}`"


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def sections(model: type[BaseModel] = RunConfig, prefix: str = "") -> list[Section]:
    """`model`'s keys (a row each) and, after them, one section per nested model, depth first."""
    rows: list[Row] = []
    nested: list[Section] = []
    for name, field in model.model_fields.items():
        key = f"{prefix}.{name}" if prefix else name
        if (sub := _model(field.annotation)) is not None:
            nested += sections(sub, key)
            continue
        if not field.description:
            raise ValueError(f"{key} has no description; give {model.__name__}.{name} a description=")
        rows.append(Row(key, type_name(field.annotation), default_text(field), allowed_values(model, name, field),
                        field.description))
        if (values := _mapping_of_models(field.annotation)) is not None:
            nested += sections(values, f"{key}.{MAPPING_KEY}")
    return [Section(prefix, model, tuple(rows)), *nested]


def _flat(mapping: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    for k, v in mapping.items():
        key = f"{prefix}.{k}" if prefix else k
        yield from _flat(v, key) if isinstance(v, Mapping) else [(key, v)]


def _presets_table(rows: dict[str, Row]) -> list[str]:
    set_by = {name: dict(_flat(preset)) for name, preset in PRESETS.items()}
    keys = [k for k in rows if any(k in s for s in set_by.values())]
    unknown = {k for s in set_by.values() for k in s} - set(rows)
    if unknown:
        raise ValueError(f"presets set keys the configuration does not have: {sorted(unknown)}")
    head = ["key", "no preset", *(f"`{n}`" for n in PRESETS)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for key in keys:
        cells = [f"`{key}`", rows[key].default, *(f"`{_yaml(s[key])}`" if key in s else "—" for s in set_by.values())]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def _roles_note() -> list[str]:
    def names(roles: tuple[str, ...]) -> str:
        return ", ".join(f"`{r}`" for r in roles)

    return ["The roles `lm.roles` routes (a role not listed there uses `default`; a name that is not a role is "
            f"ignored): the method's {names(OPTIMIZATION_ROLES)}; and the gold graders of `decoevo eval` "
            f"(`--grader-*` routes them to a model of its own), {names(GRADER_ROLES)}; and the rubric matcher "
            f"of `decoevo align`, `{MATCHER_ROLE}`."]


def render_reference() -> str:
    """The generated part of docs/configuration.md: the presets, then every key by section."""
    parts = sections()
    rows = {r.key: r for s in parts for r in s.rows}
    out = ["## Presets", "",
           "What each preset sets (`—`: the preset leaves the key at its default). Keys not listed here keep "
           "their defaults under every preset.", "", *_presets_table(rows), ""]
    for section in parts:
        out += [f"## `{section.key}` ({section.model.__name__})" if section.key else
                f"## Top level ({section.model.__name__})", ""]
        if section.model.__doc__:
            out += [" ".join(inspect.cleandoc(section.model.__doc__).split()), ""]
        out += ["| key | type | default | allowed | description |", "|---|---|---|---|---|"]
        out += [f"| `{r.key}` | {r.type} | {r.default} | {_cell(r.allowed) or '—'} | {_cell(r.description)} |"
                for r in section.rows]
        out.append("")
        if section.key == "lm":
            out += [*_roles_note(), ""]
    return "\n".join(out)


def with_reference(page: str) -> str:
    """`page` (docs/configuration.md) with everything after MARKER rendered anew."""
    if MARKER not in page:
        raise ValueError(f"the page has no line {MARKER!r} to put the reference after")
    return page.split(MARKER, 1)[0] + MARKER + "\n\n" + render_reference()


@dataclass(frozen=True)
class Found:
    """What `decoevo config KEY` shows: a section's rows, or one key with what each preset sets it to."""

    section: Section | None = None
    row: Row | None = None
    presets: tuple[tuple[str, Any], ...] = ()


def lookup(key: str) -> Found | None:
    """The section or key `key` names (lm.models.default.model reads as lm.models.NAME.model), or None."""
    wanted = ".".join(key_pattern(key.strip().strip(".")))
    for section in sections():
        if section.key == wanted:
            return Found(section=section)
        for row in section.rows:
            if row.key == wanted:
                given = tuple((name, value) for name, preset in PRESETS.items()
                              for k, value in _flat(preset) if k == row.key)
                return Found(row=row, presets=given)
    return None


def all_keys() -> list[str]:
    """Every section and key of the reference."""
    return [k for s in sections() for k in ([s.key] if s.key else []) + [r.key for r in s.rows]]


def main(argv: list[str]) -> int:
    """Without an argument, print the reference; with a path, rewrite that page's generated part."""
    if not argv:
        print(render_reference(), end="")
        return 0
    path = Path(argv[0])
    path.write_text(with_reference(path.read_text(encoding="utf-8")), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
