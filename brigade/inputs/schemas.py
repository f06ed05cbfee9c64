"""Load the JSON Schemas shipped in schemas/ and validate documents against them."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import marshal
import re
from collections.abc import Callable
from functools import cache
from typing import TYPE_CHECKING, Any

from brigade.core.jsonpath import format_path, quoted
from brigade.core.selection import did_you_mean
from brigade.errors import InputError
from brigade.inputs import sources
from brigade.inputs.cache import cache_dir, write_cache_entry

if TYPE_CHECKING:  # jsonschema is imported when a document is first validated
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import ValidationError

# schema tag -> file in schemas/
FILES = {
    "brigade.eval_manifest.v1": "eval_manifest.v1.json",
    "brigade.roster.v1": "roster.v1.json",
    "brigade.roster_toml.v1": "roster_toml.v1.json",
    "brigade.eval_plan.v1": "eval_plan.v1.json",
    "brigade.eval_cell.v1": "eval_cell.v1.json",
    "brigade.grader_result.v1": "grader_result.v1.json",
    "brigade.grader_result.v2": "grader_result.v2.json",
    "brigade.eval_summary.v1": "eval_summary.v1.json",
    "brigade.run.v1": "run.v1.json",
    "brigade.worker_results.v1": "worker_results.v1.json",
    "brigade.export.v1": "export.v1.json",
    "brigade.transcript.v1": "transcript.v1.json",
    "brigade.usage.v1": "usage.v1.json",
    "brigade.forgotten.v1": "forgotten.v1.json",
    "brigade.compare.v1": "compare.v1.json",
    "brigade.workspace.v1": "workspace.v1.json",
    "brigade.seat_run.v1": "seat_run.v1.json",
}


class InvalidDocument(ValueError):
    """A document brigade was about to write does not match its own schema (a bug)."""


@cache
def schema(tag: str) -> dict[str, Any]:
    """The parsed schema for a document tag."""
    text = sources.schema_text(FILES[tag])
    loaded: dict[str, Any] = json.loads(text)
    return loaded


_ANNOTATIONS = frozenset({"description", "title", "$comment"})


@cache
def _by_id() -> dict[str, dict[str, Any]]:
    return {schema(tag)["$id"]: schema(tag) for tag in FILES}


def _resolve(ref: str, root: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The subschema a $ref points at, and the document it lives in."""
    base, _, pointer = ref.partition("#")
    document = _by_id()[base] if base else root
    target: Any = document
    for part in filter(None, pointer.split("/")):
        target = target[part.replace("~1", "/").replace("~0", "~")]
    return target, document


def inline_refs(node: Any, root: dict[str, Any]) -> Any:
    """The schema with every $ref replaced by its target (our schemas are not recursive).

    jsonschema resolves a $ref on every instance it validates; resolving them
    once makes validating a 100,000-case manifest several times faster.
    """
    if isinstance(node, list):
        return [inline_refs(item, root) for item in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        target, document = _resolve(node["$ref"], root)
        resolved = inline_refs(target, document)
        rest = {k: inline_refs(v, root) for k, v in node.items() if k != "$ref"}
        if set(rest) <= _ANNOTATIONS:
            return {**resolved, **rest}
        return {"allOf": [resolved], **rest}
    return {
        key: (value if key in ("const", "enum", "default") else inline_refs(value, root))
        for key, value in node.items()
        if key != "$defs"
    }


@cache
def validator(tag: str) -> Draft202012Validator:
    """A cached validator for a document tag (references resolved once)."""
    from jsonschema import Draft202012Validator

    return Draft202012Validator(inline_refs(schema(tag), schema(tag)))


def check_input(doc: Any, tag: str, label: str) -> None:
    """Validate user input; raise InputError listing every problem, one line each naming
    the file and the JSON path (in document order)."""
    errors = list(validator(tag).iter_errors(doc))
    if not errors:
        return
    raise InputError("\n".join(f"{label}: {line}" for line in problem_lines(errors)))


def problem_lines(errors: list[ValidationError]) -> list[str]:
    """One line per problem: every unknown key apart, each alternative of a choice by its
    best match, in the order of their paths; repeats once."""
    from jsonschema.exceptions import best_match

    lines: list[tuple[list[str], str]] = []
    for error in sorted(errors, key=lambda e: [str(part) for part in e.absolute_path]):
        chosen = best_match([error])
        for line in _describe_all(chosen):
            if line not in (known for _, known in lines):
                lines.append(([str(part) for part in chosen.absolute_path], line))
    return [line for _, line in lines]


def _describe_all(error: ValidationError) -> list[str]:
    """describe(), with one line per unknown key of an additionalProperties error."""
    instance = error.instance
    if error.validator != "additionalProperties" or not isinstance(instance, dict):
        return [describe(error)]
    return [describe(error, key) for key in _unknown_keys(error)] or [describe(error)]


def _unknown_keys(error: ValidationError) -> list[str]:
    allowed = set(error.schema.get("properties", {}))
    patterns = list(error.schema.get("patternProperties", {}))
    return sorted(
        k for k in error.instance if k not in allowed and not any(re.search(p, k) for p in patterns)
    )


@cache
def _compiled(tag: str) -> Callable[[Any], Any]:
    """The schema compiled to a Python function (fastjsonschema): the fast yes/no check
    for documents brigade writes. Our schemas use only keywords draft-07 shares with
    2020-12 once their references are inlined.

    Generating and compiling that code costs more than a small run's validations,
    so its bytecode is kept in the cache folder (keyed by the schema, the
    generator's version and the interpreter's bytecode format).
    """
    import fastjsonschema

    definition = {
        key: value
        for key, value in inline_refs(schema(tag), schema(tag)).items()
        if key not in ("$schema", "$id")
    }
    definition["$schema"] = "http://json-schema.org/draft-07/schema#"
    # marshalled bytecode is specific to the interpreter: its magic number is in the key
    # (and brigade's code: the inlining above is ours)
    material = json.dumps(
        [
            definition,
            fastjsonschema.VERSION,
            importlib.util.MAGIC_NUMBER.hex(),
            sources.code_digest(),
        ],
        sort_keys=True,
    )
    path = cache_dir() / "validators" / (hashlib.sha256(material.encode()).hexdigest()[:32])
    try:
        code = marshal.loads(path.read_bytes())
    except (OSError, ValueError, EOFError, TypeError):
        code = compile(fastjsonschema.compile_to_code(definition), f"<{tag} validator>", "exec")
        write_cache_entry(path, marshal.dumps(code))
    namespace: dict[str, Any] = {}
    exec(code, namespace)  # noqa: S102 - code generated from our own schema files
    validate: Callable[[Any], Any] = namespace["validate"]
    return validate


def check_output(doc: Any, tag: str) -> None:
    """Validate a document before writing it; a mismatch is a bug in brigade."""
    import fastjsonschema

    try:
        _compiled(tag)(doc)
        return
    except fastjsonschema.JsonSchemaException:
        pass
    # the full validator names the problem (and has the last word)
    from jsonschema.exceptions import best_match

    error = best_match(validator(tag).iter_errors(doc))
    if error is not None:
        raise InvalidDocument(f"{tag}: {describe(error)}")


def problems(doc: Any, tag: str) -> list[str]:
    """Every validation problem as a one-line `path: message` string."""
    return [describe(e) for e in validator(tag).iter_errors(doc)]


def describe(error: ValidationError, key: str | None = None) -> str:
    """`json.path: what is wrong` for one validation error (`key`: the unknown key of an
    additionalProperties error to name; default the first)."""
    path = list(error.absolute_path)
    message = error.schema.get("x-message") if isinstance(error.schema, dict) else None
    kind = error.validator
    instance = error.instance
    if kind == "required" and isinstance(instance, dict):
        missing = [k for k in error.validator_value if k not in instance]
        path.append(missing[0] if missing else "?")
        message = message or "is required but missing"
    elif kind == "additionalProperties" and isinstance(instance, dict):
        allowed = set(error.schema.get("properties", {}))
        extra = _unknown_keys(error)
        unknown = key if key is not None else (extra[0] if extra else None)
        if unknown is not None:
            path.append(unknown)
        near = did_you_mean(unknown, sorted(allowed)) if unknown is not None else ""
        hint = f" (allowed: {', '.join(sorted(allowed))})" if allowed else ""
        message = message or f"unknown key{near}{hint}"
    elif message is None:
        message = _message(kind, error)
    if "propertyNames" in error.schema_path and isinstance(instance, str):
        path.append(instance)  # the offending key itself
    if isinstance(instance, bool) and _wants_text(error.schema):
        # a seat named off or a model named no: YAML 1.1 made it a boolean
        got = "" if "got " in message else f"; got {json.dumps(instance)}"
        message += f"{got} (YAML reads an unquoted yes, no, on or off as true or false: quote it)"
    return f"{format_path(path)}: {message}"


def _wants_text(schema: Any) -> bool:
    """Whether a schema's `type` asks for a string."""
    wanted = schema.get("type") if isinstance(schema, dict) else None
    return wanted == "string" or (isinstance(wanted, list) and "string" in wanted)


def _message(kind: str, error: ValidationError) -> str:
    value = error.validator_value
    instance = error.instance
    if kind == "type":
        wanted = value if isinstance(value, str) else " or ".join(value)
        return f"expected {_article(wanted)}, got {_json_type(instance)}"
    if kind == "const":
        return f"must be {json.dumps(value)}, got {_short(instance)}"
    if kind == "enum":
        return f"must be one of {', '.join(json.dumps(v) for v in value)}; got {_short(instance)}"
    if kind in ("minItems", "minProperties") and value == 1:
        return "must not be empty"
    if kind == "minLength" and value == 1:
        return "must not be an empty string"
    if kind == "minimum":
        return f"must be at least {value}, got {_short(instance)}"
    if kind == "exclusiveMinimum":
        return f"must be greater than {value}, got {_short(instance)}"
    if kind == "maximum":
        return f"must be at most {value}, got {_short(instance)}"
    if kind == "uniqueItems":
        return "contains duplicate entries"
    if kind == "pattern":
        return f"{_short(instance)} does not match {value}"
    return " ".join(error.message.split())


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return type(value).__name__


def _article(type_name: str) -> str:
    names = {
        "object": "a mapping",
        "array": "a list",
        "string": "a string",
        "integer": "an integer",
        "number": "a number",
        "boolean": "a boolean",
        "null": "null",
    }
    return " or ".join(names.get(t.strip(), t) for t in type_name.split(" or "))


def _short(value: Any) -> str:
    text = quoted(value)
    return text if len(text) <= 60 else text[:57] + "..."
