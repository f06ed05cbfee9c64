"""Graders: score a cell's stored output, one result per grader (run/grading.py has what
the kinds share; kinds that run a process live in run/command_grader.py and run/judge.py).

A grader that cannot run (unknown type, missing or mistyped field, bad
pattern, unreadable file, a path escaping its root) reports `grader_error`
with a null score: a fault of the apparatus is never a zero.

Every grader runs under a time limit (`timeout_seconds`, default
DEFAULT_TIME_LIMIT): a pattern search is stopped when it is reached (the
`regex` package's timeout), and a grader that took longer is a grader_error.
What an agent leaves for graders to read is read only when it is a regular
file of bounded size, and its JSON only when bounded in depth: a FIFO, a huge
file or deep JSON is a normal failing grade, never a hang or a crash.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import regex

from brigade.core import jsontext
from brigade.core.identity import digest
from brigade.core.selection import did_you_mean
from brigade.run import command_grader, judge, proc, reuse
from brigade.run.grading import (
    COMMON_FIELDS,
    DEFAULT_TIME_LIMIT,
    DETAIL_CHARACTERS,
    GRADER_RESULT_SCHEMA,
    GRADER_RESULT_V2,
    MAX_READ_BYTES,
    MAX_TIME_LIMIT,
    Field,
    GradeContext,
    Graded,
    GraderFault,
    GraderType,
    NotReadable,
    Outcome,
    Setting,
    WorkspaceView,
    as_is,
    contained_file,
    read_regular,
    relative_path,
)

__all__ = [
    "DEFAULT_TIME_LIMIT",
    "GRADER_RESULT_SCHEMA",
    "GRADER_RESULT_V2",
    "GRADERS",
    "GradeContext",
    "GraderFault",
    "LiveWorkspace",
    "NotReadable",
    "Setting",
    "WorkspaceView",
    "as_is",
    "contained_file",
    "grade_one",
    "normalized_spec",
    "pattern_warnings",
    "read_regular",
    "relative_path",
    "run_graders",
    "spec_problem",
    "time_limit",
]

# how deep JSON graders read may nest
MAX_JSON_DEPTH = 200
# a JSON value a detail quotes
SHOWN_CHARACTERS = 200
# the parts of a detail that quote the agent's output or the grader's spec
EXCERPT_CHARACTERS = 60
PATTERN_CHARACTERS = 80
KEY_CHARACTERS = 30
KEYS_SHOWN = 8
# characters an excerpt shows before the first difference (or a match)
CONTEXT_BEFORE = 20


def strip_trailing_newlines(text: str) -> str:
    """Text without trailing newlines (\\n or \\r\\n)."""
    return text.rstrip("\r\n")


def _compile(pattern: str, flags: int = 0) -> regex.Pattern[str]:
    """The pattern for searching under a time limit; its syntax is Python's (re)."""
    try:
        re.compile(pattern, flags)
        return regex.compile(pattern, flags)
    except (re.error, regex.error, ValueError, OverflowError, RecursionError) as exc:
        raise GraderFault(f"bad regular expression {pattern!r}: {exc}") from None


def _search(pattern: regex.Pattern[str], text: str, ctx: GradeContext) -> bool:
    """Whether the pattern occurs in text; GraderFault when the grader's time runs out."""
    return _find(pattern, text, ctx) is not None


def _find(pattern: regex.Pattern[str], text: str, ctx: GradeContext) -> regex.Match[str] | None:
    """The first match of the pattern in text; GraderFault when the grader's time runs out."""
    left = None if ctx.deadline is None else ctx.deadline - time.monotonic()
    if left is not None and left <= 0:
        raise GraderFault(_out_of_time(ctx))
    try:
        return pattern.search(text, timeout=left)
    except TimeoutError:
        raise GraderFault(_out_of_time(ctx)) from None


def _out_of_time(ctx: GradeContext) -> str:
    return (
        f"stopped at its time limit of {ctx.time_limit:g} s (timeout_seconds); a pattern "
        "with nested repetition can take exponential time"
    )


def nested_repetition(pattern: str) -> bool:
    """Whether a pattern repeats a group that itself repeats without bound, like `(a+)+`:
    such a pattern can take exponential time on some texts."""
    try:
        from re import _parser as parser  # type: ignore[attr-defined]

        tree = parser.parse(pattern)
    except Exception:  # not parseable here (the regex package's own syntax): no opinion
        return False
    from re import _constants as constants  # type: ignore[attr-defined]

    repeats = {constants.MAX_REPEAT, constants.MIN_REPEAT}
    repeats |= {getattr(constants, "POSSESSIVE_REPEAT", constants.MAX_REPEAT)}

    def unbounded(items: Any, inside: bool) -> bool:
        for op, value in items:
            if op in repeats:
                low, high, sub = value
                endless = high == constants.MAXREPEAT
                if endless and inside:
                    return True
                if unbounded(sub, inside or endless):
                    return True
            elif op == constants.SUBPATTERN:
                if unbounded(value[-1], inside):
                    return True
            elif op == constants.BRANCH:
                if any(unbounded(branch, inside) for branch in value[1]):
                    return True
            elif op in (constants.ASSERT, constants.ASSERT_NOT):
                if unbounded(value[1], inside):
                    return True
        return False

    return unbounded(tree, False)


def pattern_warnings(raw: Mapping[str, Any]) -> list[str]:
    """Warnings about a grader's patterns that may run into its time limit."""
    kind = raw.get("type")
    patterns: list[Any] = []
    if kind == "regex_output":
        patterns = [raw.get("pattern")]
    elif kind == "diff_constraints":
        for key in ("allowed", "forbidden"):
            value = raw.get(key)
            patterns += value if isinstance(value, list) else []
    return [
        f"pattern {p!r} repeats a group that itself repeats (like (a+)+): it can take "
        "exponential time, and is stopped at the grader's time limit (grader_error)"
        for p in patterns
        if isinstance(p, str) and nested_repetition(p)
    ]


# --- grader kinds -----------------------------------------------------------


def _exit_status(spec: Mapping[str, Any], ctx: GradeContext) -> Outcome:
    expected = spec["expected"]
    passed = ctx.exit_code == expected
    return passed, f"exit status {ctx.exit_code}, expected {expected}", []


def _exact_output(spec: Mapping[str, Any], ctx: GradeContext) -> Outcome:
    expected = strip_trailing_newlines(spec["expected"])
    actual = strip_trailing_newlines(ctx.final_text)
    if actual == expected:
        return True, "output equals the expected text", []
    return False, f"output differs from the expected text {_difference(actual, expected, ctx)}", []


def _regex_flags(spec: Mapping[str, Any]) -> int:
    return regex.MULTILINE | (regex.IGNORECASE if spec["ignore_case"] else 0)


def _check_regex(spec: Mapping[str, Any]) -> None:
    _compile(spec["pattern"], _regex_flags(spec))


def _regex_output(spec: Mapping[str, Any], ctx: GradeContext) -> Outcome:
    pattern = _compile(spec["pattern"], _regex_flags(spec))
    match = _find(pattern, ctx.final_text, ctx)
    shown = _pattern_shown(ctx.redact(spec["pattern"]))
    if match is None:
        if spec["negate"]:
            return True, f"pattern {shown} absent, as required", []
        start = _excerpt(ctx.redact(ctx.final_text), 0, EXCERPT_CHARACTERS)
        return False, f"pattern {shown} not found in the output, which begins {start}", []
    line = ctx.final_text.count("\n", 0, match.start()) + 1
    if spec["negate"]:
        found = _around(ctx.final_text, match.start(), ctx)
        return False, f"pattern {shown} found at line {line} (negate: it must not be): {found}", []
    return True, f"pattern {shown} found at line {line}", []


_MISSING = object()
# an answer that is one Markdown code fence (```json ... ```) and nothing else
_FENCE = re.compile(r"\A\s*```[\w+.-]*[ \t]*\r?\n(.*?)\r?\n[ \t]*```\s*\Z", re.DOTALL)


def fenced_body(text: str) -> str | None:
    """The inside of an answer that is exactly one Markdown code fence, else None."""
    match = _FENCE.match(text)
    if match is None or "```" in match.group(1):
        return None
    return match.group(1)


_INDEX = re.compile(r"-?[0-9]{1,18}")


def _json_field(spec: Mapping[str, Any], ctx: GradeContext) -> Outcome:
    text, note = ctx.final_text, ""
    if len(text) > MAX_READ_BYTES:
        limit = MAX_READ_BYTES // (1024 * 1024)
        return False, f"output is longer than the {limit} MiB json_field reads", []
    body = fenced_body(text)
    if body is not None:
        if not spec["allow_fence"]:
            return False, "output is a Markdown code fence, not bare JSON (allow_fence: false)", []
        text, note = body, " (read inside the answer's Markdown code fence)"
    try:
        document = jsontext.parse(text, limit=None, max_depth=MAX_JSON_DEPTH)
    except jsontext.BadJSON as exc:
        if exc.kind == "depth":
            return False, f"output is JSON nested deeper than {MAX_JSON_DEPTH} levels{note}", []
        start = _excerpt(ctx.redact(text), 0, EXCERPT_CHARACTERS)
        return False, f"output is {exc}{note}; it begins {start}", []
    value: Any = document
    trail: list[str] = []  # what the walk found at each step of the path
    parts = spec["path"].split(".")
    for depth, part in enumerate(parts):
        here = _cut(".".join(parts[:depth])) or "the output"
        found = _step(value, part)
        if found is _MISSING:
            trail.append(f"{here} is {_described(value, part, ctx)}")
            return False, f"{_cut(spec['path'])} is absent{note}: {'; '.join(trail)}", []
        trail.append(f"{here} is {_kind(value)}")
        value = found
    expected = spec["expected"]
    passed = same_json(value, expected)
    shown, wanted = _quoted(value, ctx), _quoted(expected, ctx)
    return passed, f"{_cut(spec['path'])} = {shown}, expected {wanted}{note}", []


def _cut(text: str, limit: int = PATTERN_CHARACTERS) -> str:
    """A name from the spec (a path) as a detail shows it: at most `limit` characters."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _step(value: Any, part: str) -> Any:
    """value[part] for an object key or a list index (negative from the end), else _MISSING."""
    if isinstance(value, dict):
        return value.get(part, _MISSING)
    if isinstance(value, list) and _is_index(part):
        # an index of more digits than any list has items is simply out of range
        index = int(part) if _INDEX.fullmatch(part) else len(value)
        return value[index] if -len(value) <= index < len(value) else _MISSING
    return _MISSING


def _is_index(part: str) -> bool:
    return re.fullmatch(r"-?[0-9]+", part) is not None


def _described(value: Any, part: str, ctx: GradeContext) -> str:
    """What a path step found where it could not go on to `part`."""
    if isinstance(value, dict):
        return _keys(value, ctx)
    if isinstance(value, list):
        return _kind(value) + ("" if _is_index(part) else ", indexed by numbers")
    return f"{_kind(value)}, not an object or a list"


def _kind(value: Any) -> str:
    """What a JSON value is, in a few words."""
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, (int, float)):
        return f"the number {json.dumps(value)}"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return f"a list of {len(value)} item(s)"
    return "an object"


def _keys(value: dict[str, Any], ctx: GradeContext) -> str:
    """`an object with keys "a", "b"` (the first few, secrets replaced)."""
    if not value:
        return "an empty object"
    names = [_quoted(ctx.redact(key), ctx, KEY_CHARACTERS) for key in list(value)[:KEYS_SHOWN]]
    more = f" and {len(value) - KEYS_SHOWN} more" if len(value) > KEYS_SHOWN else ""
    return f"an object with keys {', '.join(names)}{more}"


def _quoted(value: Any, ctx: GradeContext, limit: int = SHOWN_CHARACTERS) -> str:
    """A JSON value as a detail shows it: secrets replaced first, then escaped and cut."""
    text = json.dumps(_redacted(value, ctx.redact), ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _pattern_shown(pattern: str) -> str:
    """A pattern as a detail shows it: between slashes as written (its backslashes are
    its own, never escaped again), control characters escaped, cut with `…` (the pattern
    is already redacted)."""
    piece = pattern[:PATTERN_CHARACTERS]
    piece = "".join(ch if ch.isprintable() else json.dumps(ch).strip('"') for ch in piece)
    return f"/{piece}/" + ("…" if len(pattern) > PATTERN_CHARACTERS else "")


def _excerpt(text: str, start: int, length: int) -> str:
    """text[start:start+length] quoted as JSON, with `…` where it was cut (text is already
    redacted: secrets go before anything is cut or escaped)."""
    end = start + length
    piece = json.dumps(text[start:end], ensure_ascii=False)
    if start > 0:
        piece = "…" + piece
    if end < len(text):
        piece += "…"
    return piece


def _around(text: str, start: int, ctx: GradeContext) -> str:
    """The output from a little before `start` on, quoted (secrets replaced first)."""
    begin = max(0, len(ctx.redact(text[:start])) - CONTEXT_BEFORE)
    return _excerpt(ctx.redact(text), begin, EXCERPT_CHARACTERS)


def _difference(actual: str, expected: str, ctx: GradeContext) -> str:
    """Where two texts first differ (line and column) and an excerpt of each around it:
    `at line 1, column 1: expected "hello", got "Hello! How…"`."""
    actual, expected = ctx.redact(actual), ctx.redact(expected)
    index = next(
        (i for i, (a, b) in enumerate(zip(actual, expected, strict=False)) if a != b),
        min(len(actual), len(expected)),
    )
    line = actual.count("\n", 0, index) + 1
    column = index - (actual.rfind("\n", 0, index) + 1) + 1
    start = max(0, index - CONTEXT_BEFORE)
    if len(actual) < len(expected) and index == len(actual):
        what = "the output ends early"
    elif index == len(expected):
        what = "the output goes on"
    else:
        what = ""
    head = f"at line {line}, column {column}" + (f" ({what})" if what else "")
    return (
        f"{head}: expected {_excerpt(expected, start, EXCERPT_CHARACTERS)}, "
        f"got {_excerpt(actual, start, EXCERPT_CHARACTERS)}"
    )


def _redacted(value: Any, redact: Callable[[str], str]) -> Any:
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, list):
        return [_redacted(item, redact) for item in value]
    if isinstance(value, dict):
        return {redact(key): _redacted(item, redact) for key, item in value.items()}
    return value


def same_json(left: Any, right: Any) -> bool:
    """JSON equality where true is not 1 (at any depth); 3 and 3.0 are the same number."""
    if isinstance(left, bool) or isinstance(right, bool):
        return isinstance(left, bool) and isinstance(right, bool) and left == right
    if isinstance(left, (int, float)) and isinstance(right, (int, float)):
        return left == right
    if isinstance(left, dict) and isinstance(right, dict):
        return left.keys() == right.keys() and all(same_json(left[k], right[k]) for k in left)
    if isinstance(left, list) and isinstance(right, list):
        return len(left) == len(right) and all(map(same_json, left, right))
    return type(left) is type(right) and left == right


def _check_json_path(spec: Mapping[str, Any]) -> None:
    if not spec["path"] or any(not part for part in spec["path"].split(".")):
        raise GraderFault(f"path {spec['path']!r} must be dotted keys like 'result.status'")


def _need_workspace(ctx: GradeContext) -> WorkspaceView:
    if ctx.workspace is None:
        raise GraderFault("no workspace was recorded for this run")
    return ctx.workspace


def _where(ctx: GradeContext) -> str:
    """Which workspace a path was looked up in."""
    return "the run's worktree" if ctx.changed_files is not None else "the workspace"


def _file_exists(spec: Mapping[str, Any], ctx: GradeContext) -> Outcome:
    relative = relative_path(spec["path"], "path")
    present = _need_workspace(ctx).exists(relative)
    state = "exists" if present else "does not exist"
    return present, f"{_shown_path(relative, ctx)} {state} in {_where(ctx)}", []


def _shown_path(relative: str, ctx: GradeContext) -> str:
    """A workspace-relative path as a detail names it (normalised, bounded)."""
    return _cut(ctx.redact(os.path.normpath(relative)))


def _expected_file(spec: Mapping[str, Any], ctx: GradeContext) -> Outcome:
    target = contained_file(ctx.manifest_dir, spec["path"], "path")
    try:
        expected = read_regular(target, "it").decode("utf-8")
    except (OSError, UnicodeDecodeError, NotReadable) as exc:
        if isinstance(exc, OSError):
            reason = exc.strerror or str(exc)
        else:
            reason = "not UTF-8" if isinstance(exc, UnicodeDecodeError) else str(exc)
        raise GraderFault(f"cannot read expected file {spec['path']!r}: {reason}") from None
    expected = strip_trailing_newlines(expected.replace("\r\n", "\n"))
    actual = strip_trailing_newlines(ctx.final_text)
    if actual == expected:
        return True, f"output equals {spec['path']}", []
    return False, f"output differs from {spec['path']} {_difference(actual, expected, ctx)}", []


def _check_patterns(spec: Mapping[str, Any]) -> None:
    for key in ("allowed", "forbidden"):
        for item in spec[key]:
            if not isinstance(item, str):
                raise GraderFault(f"{key} must be a list of regular expressions")
            _compile(item)


def _diff_constraints(spec: Mapping[str, Any], ctx: GradeContext) -> Outcome:
    if ctx.changed_files is None:
        raise GraderFault(
            "no changed-file list was recorded for this run "
            "(diff_constraints needs execution.mode: writable-worktree)"
        )
    allowed = [_compile(p) for p in spec["allowed"]]
    forbidden = [_compile(p) for p in spec["forbidden"]]
    checks: list[dict[str, Any]] = []
    for path in ctx.changed_files:
        bad = next((p.pattern for p in forbidden if _search(p, path, ctx)), None)
        if bad is not None:
            shown = _pattern_shown(ctx.redact(bad))  # as written, never escaped again by repr
            checks.append({"name": path, "passed": False, "detail": f"matches forbidden {shown}"})
        elif allowed and not any(_search(p, path, ctx) for p in allowed):
            checks.append({"name": path, "passed": False, "detail": "matches no allowed pattern"})
        else:
            checks.append({"name": path, "passed": True})
    limit = spec["max_files"]
    if limit is not None:
        within = len(ctx.changed_files) <= limit
        checks.append(
            {
                "name": "max_files",
                "passed": within,
                "detail": f"{len(ctx.changed_files)} changed, at most {limit} allowed",
            }
        )
    failed = [c["name"] for c in checks if not c["passed"]]
    if failed:
        return False, f"{len(failed)} constraint(s) violated: {', '.join(failed[:5])}", checks
    return True, f"{len(ctx.changed_files)} changed file(s) within constraints", checks


def _verify_receipt(spec: Mapping[str, Any], ctx: GradeContext) -> Outcome:
    relative = relative_path(spec["path"], "path")
    workspace = _need_workspace(ctx)
    data = workspace.read_bytes(relative)
    named = _shown_path(relative, ctx)
    if data is None:
        if workspace.exists(relative):
            limit = MAX_READ_BYTES // (1024 * 1024)
            return (
                False,
                f"{named} in {_where(ctx)} is not a readable regular file of at most {limit} MiB",
                [],
            )
        return False, f"{named} was not written (looked in {_where(ctx)})", []
    try:
        receipt = jsontext.parse(data, limit=None)
    except ValueError:
        start = _excerpt(ctx.redact(data.decode("utf-8", "replace")), 0, EXCERPT_CHARACTERS)
        return False, f"{named} in {_where(ctx)} is not valid JSON; it begins {start}", []
    status = receipt.get("status") if isinstance(receipt, dict) else None
    expected = spec["expected_status"]
    shown = repr(_redacted(status, ctx.redact))  # secrets go before repr escapes them
    if len(shown) > SHOWN_CHARACTERS:
        shown = shown[: SHOWN_CHARACTERS - 1] + "…"
    return (
        status == expected,
        f"{named} in {_where(ctx)}: status is {shown}, expected {expected!r}",
        [],
    )


def _expected_file_inputs(spec: Mapping[str, Any], ctx: GradeContext) -> Mapping[str, Any]:
    """What expected_file reads: the file of the manifest's folder (its digest)."""
    try:
        target = contained_file(ctx.manifest_dir, spec["path"], "path")
    except GraderFault:
        return {"file": None}  # (a grader_error: never reused)
    return {"file": reuse.file_digest(target)}


def _workspace_inputs(spec: Mapping[str, Any], ctx: GradeContext) -> Mapping[str, Any]:
    """What file_exists and verify_receipt read: one file of the workspace as the seat left
    it (the live folder of a read-only run, the snapshot of a writable one)."""
    workspace = ctx.workspace
    if workspace is None:
        return {"file": None}
    try:
        relative = relative_path(spec["path"], "path")
        data = workspace.read_bytes(relative)
        present = workspace.exists(relative)
    except GraderFault:
        return {"file": None}
    return {"exists": present, "file": digest(data) if data is not None else None}


_STR = (str,)
_INT = (int,)
_JSON = (str, int, float, bool, list, dict, type(None))

GRADERS: dict[str, GraderType] = {
    "exit_status": GraderType("1", {"expected": Field(_INT, default=0)}, _exit_status),
    "exact_output": GraderType("1", {"expected": Field(_STR, required=True)}, _exact_output),
    "regex_output": GraderType(
        "1",
        {
            "pattern": Field(_STR, required=True),
            "ignore_case": Field((bool,), default=False),
            "negate": Field((bool,), default=False),
        },
        _regex_output,
        _check_regex,
    ),
    # version 2: an answer that is one Markdown code fence is read inside it
    "json_field": GraderType(
        "2",
        {
            "path": Field(_STR, required=True),
            "expected": Field(_JSON, required=True),
            "allow_fence": Field((bool,), default=True),
        },
        _json_field,
        _check_json_path,
    ),
    "file_exists": GraderType(
        "1", {"path": Field(_STR, required=True)}, _file_exists, inputs=_workspace_inputs
    ),
    "expected_file": GraderType(
        "1", {"path": Field(_STR, required=True)}, _expected_file, inputs=_expected_file_inputs
    ),
    "diff_constraints": GraderType(
        "1",
        {
            "allowed": Field((list,), default=()),
            "forbidden": Field((list,), default=()),
            "max_files": Field(_INT),
        },
        _diff_constraints,
        _check_patterns,
    ),
    "verify_receipt": GraderType(
        "1",
        {"path": Field(_STR, required=True), "expected_status": Field(_STR, default="completed")},
        _verify_receipt,
        inputs=_workspace_inputs,
    ),
    # kinds that run a process (grader_result.v2)
    "command": command_grader.GRADER,
    "judge": judge.GRADER,
}


def normalized_spec(raw: Mapping[str, Any]) -> tuple[GraderType, dict[str, Any]]:
    """The grader kind and its fields with defaults; GraderFault on a bad spec."""
    kind = raw.get("type")
    grader = GRADERS.get(kind) if isinstance(kind, str) else None
    if grader is None:
        near = did_you_mean(kind, GRADERS) if isinstance(kind, str) else ""
        raise GraderFault(
            f"unknown grader type {kind!r}{near} (known: {', '.join(sorted(GRADERS))})"
        )
    unknown = sorted(set(raw) - set(grader.fields) - COMMON_FIELDS)
    if unknown:
        fields = sorted({*grader.fields, *COMMON_FIELDS})
        raise GraderFault(
            f"unknown field {unknown[0]!r} for {kind} graders{did_you_mean(unknown[0], fields)}"
        )
    spec: dict[str, Any] = {}
    for name, field in grader.fields.items():
        if name not in raw:
            if field.required:
                raise GraderFault(f"{kind} graders need a {name!r} field")
            spec[name] = field.default
            continue
        value = raw[name]
        # bool is an int in Python; a grader asking for an int never wants True
        if not isinstance(value, field.types) or (
            isinstance(value, bool) and bool not in field.types and field.types != _JSON
        ):
            wanted = " or ".join(t.__name__ for t in field.types)
            raise GraderFault(f"field {name!r} must be {wanted}, got {type(value).__name__}")
        spec[name] = value
    if grader.check is not None:
        grader.check(spec)
    return grader, spec


def time_limit(raw: Mapping[str, Any], maximum: float = MAX_TIME_LIMIT) -> float | None:
    """A grader's time limit in seconds (`timeout_seconds`), None when the spec sets none;
    GraderFault when it is bad."""
    if "timeout_seconds" not in raw:
        return None
    value = raw["timeout_seconds"]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= maximum:
        raise GraderFault(
            f"field 'timeout_seconds' must be a number of seconds above 0 and at most "
            f"{maximum:g}, got {value!r}"
        )
    return float(value)


def spec_problem(raw: Mapping[str, Any]) -> str | None:
    """Why this grader spec would record grader_error, or None when it looks runnable."""
    try:
        grader, _ = normalized_spec(raw)
        time_limit(raw, grader.max_limit)
    except GraderFault as fault:
        return str(fault)
    return None


def run_graders(specs: Sequence[Mapping[str, Any]], ctx: GradeContext) -> list[dict[str, Any]]:
    """A grader result for every spec, in order. Never raises for a grader's fault."""
    return grade_all(specs, ctx).results


@dataclasses.dataclass(frozen=True)
class Grading:
    """A cell's grading: a result per grader, the key of each (None: it has none) and where
    the results it reused came from (the receipt's `reused_grades`)."""

    results: list[dict[str, Any]]
    keys: list[str | None]
    reused: list[dict[str, Any]]

    @property
    def reused_indexes(self) -> set[int]:
        """The graders whose result was reused (they ran nothing)."""
        return {int(entry["grader_id"].rsplit(":", 1)[1]) for entry in self.reused}


def grade_all(
    specs: Sequence[Mapping[str, Any]], ctx: GradeContext, earlier: reuse.Earlier | None = None
) -> Grading:
    """Every grader's result, in order: the stored one of `earlier` when its key is
    unchanged (run/reuse.py), else graded now. Never raises for a grader's fault."""
    results: list[dict[str, Any]] = []
    keys: list[str | None] = []
    reused: list[dict[str, Any]] = []
    for index, raw in enumerate(specs):
        key = key_of(index, raw, ctx)
        found = None
        if earlier is not None and key is not None and key in earlier.results:
            kind = str(raw["type"])
            try:
                found = reuse.reuse(earlier, key, kind, index, timed_context(index, raw, ctx))
            except (OSError, RecursionError):
                # its folder cannot be copied (what a process left there): grade it again
                found = None
        if found is not None:
            results.append(found[0])
            reused.append(found[1])
        else:
            results.append(grade_one(index, raw, ctx))
        keys.append(key)
    return Grading(results, keys, reused)


def timed_context(index: int, raw: Mapping[str, Any], ctx: GradeContext) -> GradeContext:
    """The context a valid grader runs in: its time limit (and deadline), and the folder of
    a kind that runs a process; GraderFault for a spec that is not valid."""
    grader, spec = normalized_spec(raw)
    limit = time_limit(raw, grader.max_limit)
    if grader.process:
        if limit is None:
            limit = grader.default_limit(spec, ctx) if grader.default_limit else None
        limit = limit if limit is not None else DEFAULT_TIME_LIMIT
        folder = None
        if ctx.setting is not None:
            folder = ctx.setting.graders_dir / f"{raw['type']}-{index}"
        return dataclasses.replace(ctx, time_limit=limit, folder=folder)
    limit = limit if limit is not None else DEFAULT_TIME_LIMIT
    return dataclasses.replace(ctx, deadline=time.monotonic() + limit, time_limit=limit)


def key_of(index: int, raw: Mapping[str, Any], ctx: GradeContext) -> str | None:
    """The grader key of one spec for this cell (run/reuse.grader_key); None for a spec that
    is not valid, or whose inputs cannot be named."""
    try:
        grader, spec = normalized_spec(raw)
        return reuse.grader_key(grader, raw, spec, timed_context(index, raw, ctx))
    except GraderFault:
        return None


def grade_one(index: int, raw: Mapping[str, Any], ctx: GradeContext) -> dict[str, Any]:
    """Run one grader and build its result (grader_result.v1; v2 for kinds that run a process).

    A built-in grader's time limit is checked here; a kind that runs a process
    stops that process at its limit itself. Stopping brigade (proc.Interrupted)
    is not a result: it goes on up, and the cell stays as it was.
    """
    start = time.perf_counter()
    named = raw.get("type")
    kind = named if isinstance(named, str) and named else "unknown"
    known = GRADERS.get(kind)
    version = known.version if known is not None else "0"
    extra: Mapping[str, Any] = {}
    try:
        grader, spec = normalized_spec(raw)
        timed = timed_context(index, raw, ctx)
        limit = timed.time_limit
        graded = grader.grade(spec, timed)
        if isinstance(graded, Graded):
            score, detail, checks, extra = graded.score, graded.detail, graded.checks, graded.extra
        else:
            passed, detail, checks = graded
            score = 1.0 if passed else 0.0
        status: str = "scored"
        took = time.perf_counter() - start
        if not grader.process and took > limit:
            raise GraderFault(
                f"took {took:.1f} s, more than its time limit of {limit:g} s (timeout_seconds)"
            )
    except GraderFault as fault:
        status, score, detail, checks = "grader_error", None, str(fault), []
        extra = {**extra, **fault.extra}
    except proc.Interrupted:
        raise
    except Exception as exc:  # a bug in a grader is still a grader fault, not a zero
        status, score, checks = "grader_error", None, []
        detail = f"grader crashed: {type(exc).__name__}: {exc}"
    if len(detail) > DETAIL_CHARACTERS:
        detail = detail[: DETAIL_CHARACTERS - 1] + "…"
    result: dict[str, Any] = {
        "schema": GRADER_RESULT_SCHEMA,
        "grader_id": f"{kind}:{index}",
        "grader_type": kind,
        "version": version,
        "status": status,
        "score": score,
        "score_min": 0,
        "score_max": 1,
        "detail": detail,
        "component_checks": checks,
        "duration_seconds": round(time.perf_counter() - start, 6),
        "cell_id": ctx.cell_id,
        "output_digest": ctx.output_digest,
        "output_refs": [ctx.output_ref, *extra.get("output_refs", ())],
    }
    if known is not None and known.process:
        result["schema"] = GRADER_RESULT_V2
        result["exit_code"] = extra.get("exit_code")
        result["logs"] = dict(extra.get("logs", {}))
        for key in ("judge", "usage", "enforcement"):
            if extra.get(key) is not None:
                result[key] = extra[key]
    return result


class LiveWorkspace:
    """A workspace folder on disk, as graders see it; paths may not leave it."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def _target(self, relative: str) -> Path:
        return contained_file(self.root, relative, "path")

    def exists(self, relative: str) -> bool:
        """Whether the path exists inside the workspace (nothing is opened)."""
        return self._target(relative).exists()

    def read_bytes(self, relative: str) -> bytes | None:
        """File contents, or None when the file is absent, unreadable, not a regular file
        or larger than MAX_READ_BYTES."""
        try:
            return read_regular(self._target(relative), relative)
        except (OSError, NotReadable):
            return None
