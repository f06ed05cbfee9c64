"""Read YAML, JSON and TOML input documents strictly, with one-line errors."""

from __future__ import annotations

import json
import math
import re
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from brigade import fs
from brigade.core.jsonpath import format_path
from brigade.errors import InputError

if TYPE_CHECKING:  # yaml is imported when a YAML document is first parsed
    import yaml


@cache
def _yaml_loader() -> type[yaml.SafeLoader]:
    """A SafeLoader that refuses duplicate keys and keeps dates as strings."""
    import yaml

    try:  # the C loader is several times faster on large manifests
        base: type[yaml.SafeLoader] = yaml.CSafeLoader  # type: ignore[assignment]
    except AttributeError:  # pragma: no cover - libyaml missing
        base = yaml.SafeLoader

    def construct_mapping(loader: yaml.SafeLoader, node: yaml.MappingNode) -> dict[Any, Any]:
        explicit = sum(1 for key_node, _ in node.value if key_node.tag != "tag:yaml.org,2002:merge")
        # merged keys (`<<: *base`) come first after flattening; explicit keys override them
        loader.flatten_mapping(node)
        merged = len(node.value) - explicit
        result: dict[Any, Any] = {}
        seen: set[Any] = set()
        for position, (key_node, value_node) in enumerate(node.value):
            key = loader.construct_object(key_node, deep=True)
            try:
                hash(key)
            except TypeError:
                raise yaml.constructor.ConstructorError(
                    None, None, "a mapping key must be a plain value", key_node.start_mark
                ) from None
            if position >= merged:
                if key in seen:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"duplicate key {key!r}", key_node.start_mark
                    )
                seen.add(key)
            result[key] = loader.construct_object(value_node, deep=True)
        return result

    class StrictLoader(base):  # type: ignore[misc, valid-type]
        pass

    StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, construct_mapping)
    # Dates and times stay strings: a manifest is JSON-shaped data.
    StrictLoader.yaml_implicit_resolvers = {
        first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
        for first, resolvers in base.yaml_implicit_resolvers.items()
    }
    return StrictLoader


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise ValueError(f"duplicate key {key!r}")
        result[key] = value
    return result


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


# a \u escape of half of a UTF-16 surrogate pair: valid JSON syntax, but alone it is no text
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
_SURROGATE = re.compile("[\ud800-\udfff]")


def parse_text(text: str, *, json_only: bool, label: str) -> Any:
    """Parse a document's text; raise InputError naming `label` on any problem."""
    try:
        if json_only:
            doc = json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_no_constant)
            if _SURROGATE_ESCAPE.search(text):
                _refuse_lone_surrogates(doc, label)
            return doc
        return _load_yaml(text, label)
    except json.JSONDecodeError as exc:
        raise InputError(f"{label}: line {exc.lineno} column {exc.colno}: {exc.msg}") from None
    except RecursionError:
        raise InputError(f"{label}: the document is nested too deeply") from None
    except ValueError as exc:
        raise InputError(f"{label}: {_one_line(str(exc))}") from None


def _refuse_lone_surrogates(doc: Any, label: str) -> None:
    """JSON may spell half of a surrogate pair alone (`"\\ud800"`); no UTF-8 text holds it."""
    stack: list[tuple[Any, tuple[Any, ...]]] = [(doc, ())]
    while stack:
        value, path = stack.pop()
        if isinstance(value, dict):
            for key, item in value.items():
                if _SURROGATE.search(key):
                    raise InputError(
                        f"{label}: {format_path(path)}: a key holds a lone "
                        "surrogate (a \\uD800-\\uDFFF escape without its pair)"
                    )
                stack.append((item, (*path, key)))
        elif isinstance(value, list):
            stack.extend((item, (*path, index)) for index, item in enumerate(value))
        elif isinstance(value, str) and _SURROGATE.search(value):
            raise InputError(
                f"{label}: {format_path(path)}: a lone surrogate (a \\uD800-\\uDFFF escape "
                "without its pair) is not text"
            )


def _load_yaml(text: str, label: str) -> Any:
    import yaml

    try:
        return yaml.load(text, Loader=_yaml_loader())  # noqa: S506 - a safe loader subclass
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1} column {mark.column + 1}: " if mark else ""
        problem = exc.problem or exc.context or "invalid YAML"
        raise InputError(f"{label}: {where}{problem}") from None
    except yaml.YAMLError as exc:
        raise InputError(f"{label}: invalid YAML: {_one_line(str(exc))}") from None


def read_bytes(path: Path, label: str) -> bytes:
    """A regular file's bytes; InputError naming `label` otherwise. A FIFO or a device is
    refused without reading (a FIFO would wait for a writer forever)."""
    try:
        return read_regular_file(path)
    except FileNotFoundError:
        raise InputError(f"{label}: file not found") from None
    except IsADirectoryError:
        raise InputError(f"{label}: is a directory, expected a file") from None
    except OSError as exc:
        raise InputError(f"{label}: cannot read: {exc.strerror or exc}") from None


def read_regular_file(path: Path) -> bytes:
    """The bytes of a regular file. Opened without blocking, so a FIFO is refused at once
    (IsADirectoryError for a folder, OSError ENODEV-like for anything else)."""
    # the user's own file: a link to it is followed
    return fs.read_regular(path, follow=True)


_TOML_PLACE = re.compile(r" \(at line (\d+), column (\d+)\)$")


def parse_toml(text: str, label: str) -> Any:
    """Parse TOML (the standard library's tomllib); InputError naming `label` on any problem."""
    import tomllib

    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        # "Invalid value (at line 3, column 8)": the place first, as for YAML and JSON
        message = _one_line(str(exc))
        place = _TOML_PLACE.search(message)
        if place:
            message = f"line {place[1]} column {place[2]}: {message[: place.start()]}"
        raise InputError(f"{label}: {message}") from None
    except RecursionError:
        raise InputError(f"{label}: the document is nested too deeply") from None


def parse_document(data: bytes, path: Path, label: str) -> Any:
    """Parse a document by its name: JSON (.json), TOML (.toml), else YAML."""
    text = decode_utf8(data, label)
    suffix = path.suffix.lower()
    if suffix == ".toml":
        doc = parse_toml(text, label)
    else:
        doc = parse_text(text, json_only=suffix == ".json", label=label)
    check_json_shaped(doc, label)
    return doc


def read_document(path: Path, label: str | None = None) -> Any:
    """Read a YAML, JSON or TOML file (by the end of its name: .json, .toml, else YAML)."""
    label = label or str(path)
    return parse_document(read_bytes(path, label), path, label)


def decode_utf8(data: bytes, label: str) -> str:
    """Decode UTF-8 (a leading BOM is allowed) or raise InputError."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(
            f"{label}: not valid UTF-8 (byte 0x{data[exc.start]:02x} at offset {exc.start})"
        ) from None


# Later steps (copying, validating, hashing) recurse once per level of nesting,
# and YAML aliases can expand a small file into billions of values: both are
# refused here, before anything else walks the document.
MAX_NESTING = 200
MAX_VALUES = 10_000_000


def check_json_shaped(doc: Any, label: str) -> None:
    """Refuse values JSON cannot carry (non-string keys, NaN, binary, sets), documents
    nested more than MAX_NESTING levels and documents (YAML aliases expanded) of more
    than MAX_VALUES values."""
    stack: list[tuple[Any, tuple[Any, ...], int]] = [(doc, (), 0)]
    seen = 0
    while stack:
        value, path, depth = stack.pop()
        seen += 1
        if seen > MAX_VALUES:
            raise InputError(f"{label}: more than {MAX_VALUES} values (YAML aliases expanded)")
        if isinstance(value, (dict, list)) and depth >= MAX_NESTING:
            raise InputError(
                f"{label}: the document is nested too deeply (more than {MAX_NESTING} levels)"
            )
        if isinstance(value, dict):
            for key, item in value.items():
                if not isinstance(key, str):
                    raise InputError(f"{label}: {format_path(path)}: key {key!r} must be a string")
                stack.append((item, (*path, key), depth + 1))
        elif isinstance(value, list):
            for index, item in enumerate(value):
                stack.append((item, (*path, index), depth + 1))
        elif isinstance(value, float) and not math.isfinite(value):
            raise InputError(f"{label}: {format_path(path)}: {value} is not a JSON number")
        elif value is not None and not isinstance(value, (str, int, float, bool)):
            raise InputError(
                f"{label}: {format_path(path)}: a {type(value).__name__} value is not allowed"
            )


def _one_line(text: str) -> str:
    return " ".join(text.split())
