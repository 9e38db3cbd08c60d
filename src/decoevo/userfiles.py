"""Reading the files a user names (configurations, specs, sweep files): every way one can be unreadable
is a ConfigError naming the file and the problem, never a traceback. A UTF-8 byte-order mark is allowed
(editors on Windows write one)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from .errors import ConfigError


def read_user_text(path: Path | str, what: str = "file") -> str:
    path = Path(path)
    if path.is_dir():
        raise ConfigError(f"{what} {path} is a directory; name a file")
    if not path.is_file():
        raise ConfigError(f"{what} {path} not found")
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"{what} {path}: cannot read ({exc.strerror or exc})") from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise ConfigError(f"{what} {path}, line {line}: not valid UTF-8; re-save the file as UTF-8") from None


class DuplicateKey(yaml.YAMLError):
    def __init__(self, key: object, line: int, first: int) -> None:
        super().__init__(f"duplicate key {key!r}")
        self.key, self.line, self.first = key, line, first


class UniqueKeys(yaml.constructor.SafeConstructor):
    """A loader mixin refusing a mapping that names a key twice (YAML's own loaders keep the last silently):
    `DuplicateKey` names both lines. Put it before the loader class it extends."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[object, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *base`: merged keys may be overridden
                continue
            key = self.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            try:
                if key in seen:
                    raise DuplicateKey(key, line, seen[key])
                seen[key] = line
            except TypeError:  # an unhashable key: the base class says so
                break
        return super().construct_mapping(node, deep=deep)


class _UniqueKeyLoader(UniqueKeys, yaml.SafeLoader):
    """The safe loader, refusing a key given twice."""


def load_yaml_mapping(path: Path | str, what: str = "config file") -> dict[str, Any]:
    """A YAML file whose top level is a mapping (an empty file is an empty mapping)."""
    text = read_user_text(path, what)
    try:
        raw = yaml.load(text, Loader=_UniqueKeyLoader)  # a SafeLoader subclass
    except DuplicateKey as exc:
        raise ConfigError(f"{path}, line {exc.line}: the key {exc.key!r} is given twice (YAML keeps only the "
                          f"last; first on line {exc.first}); keep one") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {' '.join(str(exc).split())}") from None
    except RecursionError:
        raise ConfigError(f"{path}: nested too deeply to read") from None
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: the top level must be a mapping of keys to values")
    return raw


def check_lm_files(lm: Any) -> None:
    """The files a model configuration (`LMConfig`) names, checked before the first call: the request
    cache must be a file path, and every API key file readable UTF-8 (its text is never shown)."""
    from .lm.cache import default_cache_path

    if lm.use_cache:
        cache = Path(lm.cache_path) if lm.cache_path else default_cache_path()
        if cache.is_dir():
            raise ConfigError(f"the request cache {cache} (DECOEVO_CACHE or lm.cache_path) is a directory; "
                              f"name a file such as {cache / 'requests.sqlite'}, or pass --no-cache")
        blocking = next((p for p in cache.parents if p.exists() and not p.is_dir()), None)
        if blocking is not None:
            raise ConfigError(f"the request cache {cache} (DECOEVO_CACHE or lm.cache_path) cannot be made: "
                              f"{blocking} is a file, not a directory")
    for name, spec in lm.models.items():
        key_file = Path(spec.api_key_file).expanduser() if spec.api_key_file else None
        if key_file is not None and key_file.exists():  # a missing one is the model spec's own message
            what = f"lm.models.{name}.api_key_file"
            lines = [line for line in read_user_text(key_file, what).splitlines() if line.strip()]
            # Said here, naming the file: a server would only answer 401, or refuse a header with a line
            # break, and the key's text is never shown.
            if not lines:
                raise ConfigError(f"{what} {key_file} is empty; write the API key into it")
            if len(lines) > 1:
                raise ConfigError(f"{what} {key_file} holds {len(lines)} lines; it must hold the API key alone, "
                                  "on one line")


def _has_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def surrogate_at(obj: Any, skip: frozenset[str] = frozenset()) -> str | None:
    """Where a lone surrogate sits in parsed JSON or YAML ("" for the top level, `prompt[0].content`, ...),
    or None; values under a key in `skip` are not looked at. Iterative (the document may be as deep as the
    parser allowed), and each container is visited once (it may contain itself)."""
    stack: list[tuple[str, Any]] = [("", obj)]
    seen: set[int] = set()  # YAML anchors can make a structure contain itself (`a: &x [*x]`)
    while stack:
        where, value = stack.pop()
        if isinstance(value, str):
            if _has_surrogate(value):
                return where
            continue
        if id(value) in seen:
            continue
        seen.add(id(value))
        if isinstance(value, dict):
            for k, v in value.items():
                name = f"{where}.{k}" if where else str(k)
                if _has_surrogate(str(k)):
                    return name
                if k not in skip:
                    stack.append((name, v))
        elif isinstance(value, list):
            stack.extend((f"{where}[{i}]", v) for i, v in enumerate(value))
    return None
