"""Reliability: any manifest or roster either loads or is refused, one line per problem; never a
traceback.

The output directory must always be consistent: a receipt is whole or absent, an
attempt number is never reused, a seat's output is never attributed to another
cell, and resuming after any interruption ends where an uninterrupted run ends.
End-to-end tests run the real `doit` and `brigade`.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import FAKE_CLI, Project
from hypothesis import HealthCheck, currently_in_test_context, event, example, given, settings
from hypothesis import strategies as st
from reliability import refusal_lines

from brigade.core.terminal import printable
from brigade.engine.session import Options, plan_only
from brigade.errors import BrigadeError

# ---------------------------------------------------------------------------------------
# 3: any manifest or roster either loads or is refused, one line per problem naming the file;
# never a traceback
# ---------------------------------------------------------------------------------------

TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=30)
SCALAR = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | TEXT
)
ANY = st.recursive(
    SCALAR,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
    max_leaves=10,
)


def maybe(valid: st.SearchStrategy[Any], *invalid: Any) -> st.SearchStrategy[Any]:
    """Mostly a valid value; sometimes one of the `invalid` ones, or anything at all."""
    wrong = st.sampled_from(invalid) if invalid else ANY
    return st.integers(0, 13).flatmap(lambda n: valid if n < 12 else wrong if n < 13 else ANY)


def nested(depth: int) -> Any:
    value: Any = "deep"
    for index in range(depth):
        value = [value] if index % 2 else {"k": value}
    return value


ID = st.from_regex(r"[A-Za-z0-9_.\-éケ𝔘]{1,12}", fullmatch=True)
BAD_NAMES = ("", " a", "a ", "x:y", "tab\t", "\x00", "a" * 201, 5, True, None, ["a"])
TRIALS = st.integers(1, 3) | st.just(2.0)
BAD_TRIALS = (0, -1, True, False, 1.5, 100001, 10**30, "2", None, float("nan"))
GRADER = maybe(
    st.fixed_dictionaries(
        {"type": maybe(st.sampled_from(["exact_output", "regex_output", "json_field"]), "nope")},
        optional={
            "expected": ANY,
            "pattern": st.sampled_from(["ok", "(", "[a-z]+", "\\"]),
            "path": st.sampled_from(["a.b", "../x", "/etc/passwd", "f.txt"]),
            "deep": st.integers(1, 60).map(nested),
        },
    ),
    "exit_status",
    [],
)
PROMPT = maybe(
    st.sampled_from(["hello", "a\r\nb\rc", "\u0000", "\ufeffbom"])
    | TEXT
    | st.integers(0, 300_000).map(lambda n: "x" * n),
    None,
    5,
)
BASE_CASE = st.fixed_dictionaries(
    {"id": maybe(ID, *BAD_NAMES)},
    optional={
        "trials": maybe(TRIALS, *BAD_TRIALS),
        "graders": maybe(st.lists(GRADER, max_size=3)),
        "metadata": maybe(st.dictionaries(TEXT, ANY, max_size=2)),
    },
)
PROMPT_FILE = maybe(st.just("p.txt"), "../p.txt", "/etc/hostname", "d", "missing.txt", "")
CASE = maybe(
    st.one_of(
        st.builds(lambda case, prompt: {**case, "prompt": prompt}, BASE_CASE, PROMPT),
        st.builds(lambda case, path: {**case, "prompt_file": path}, BASE_CASE, PROMPT_FILE),
    ),
    {"id": "both", "prompt": "p", "prompt_file": "p.txt"},
    {"id": "neither"},
)
MANIFEST = st.fixed_dictionaries(
    {
        "schema": maybe(st.just("brigade.eval_manifest.v1"), "brigade.eval_manifest.v2"),
        "name": maybe(st.sampled_from(["t", "a.b-c_1"]), "-bad", "x/y", "", "é"),
        "seats": maybe(st.just(["agent"]), [], ["ghost"], ["agent", "agent"], [None]),
        "cases": maybe(st.lists(CASE, min_size=1, max_size=4), []),
    },
    optional={
        "trials": maybe(TRIALS, *BAD_TRIALS),
        "graders": maybe(st.lists(GRADER, max_size=2)),
        "execution": maybe(st.just({"mode": "read-only"}), {"mode": "yolo"}, {"mode": None}),
        "roster": maybe(st.just("roster.yaml"), "missing.yaml", "../roster.yaml", ""),
        "description": maybe(TEXT),
    },
)
SEAT = maybe(
    st.fixed_dictionaries(
        {"cli": maybe(st.sampled_from([FAKE_CLI, "codex", "claude"]), "exec:", "exec:'", "nope")},
        optional={
            "model": maybe(TEXT),
            "reasoning": maybe(TEXT),
            "transport": maybe(TEXT),
            "env": maybe(st.dictionaries(TEXT, TEXT, max_size=2), {"A": 1}, {"": "x"}),
            "timeout_seconds": maybe(
                st.sampled_from([1, 0.5, 604800]), 0, -1, 1e308, 604801, True, "5"
            ),
        },
    ),
    {},
    {"model": "m"},
)
ROSTER = st.fixed_dictionaries(
    {
        "schema": maybe(st.just("brigade.roster.v1"), "brigade.roster.v0"),
        "seats": maybe(
            st.dictionaries(
                ID | st.sampled_from(BAD_NAMES[:5]) | st.integers(), SEAT, max_size=3
            ).map(lambda seats: {"agent": {"cli": FAKE_CLI}, **seats}),
            {},
            {"agent": None},
        ),
    },
    optional={
        "codex_transport": maybe(st.sampled_from(["exec", "app-server"]), "grpc"),
        "timeout_seconds": maybe(st.just(600), 0, -5, float("inf"), "10"),
    },
)


@st.composite
def document_bytes(draw: st.DrawFn, docs: st.SearchStrategy[Any]) -> tuple[str, bytes]:
    """(file suffix, bytes) of a document: serialised as YAML or JSON, then maybe mangled."""
    doc = draw(docs)
    suffix = draw(st.sampled_from([".yaml", ".json"]))
    if suffix == ".json":
        text = json.dumps(doc, ensure_ascii=draw(st.booleans()))
    else:
        text = yaml.safe_dump(doc, allow_unicode=draw(st.booleans()), sort_keys=False)
    data = text.encode("utf-8")
    mangle = draw(
        st.sampled_from(["none"] * 12 + ["bytes", "truncate", "duplicate", "bom", "utf16", "deep"])
    )
    if mangle == "bytes":
        at = draw(st.integers(0, len(data)))
        data = data[:at] + draw(st.binary(min_size=1, max_size=8)) + data[at:]
    elif mangle == "truncate":
        data = data[: draw(st.integers(0, len(data)))]
    elif mangle == "duplicate":
        key = b'"schema": 1, ' if suffix == ".json" else b"schema: 1\n"
        data = data.replace(b"{", b"{" + key, 1) if suffix == ".json" else key + data
    elif mangle == "bom":
        data = b"\xef\xbb\xbf" + data
    elif mangle == "utf16":
        data = text.encode("utf-16")
    elif mangle == "deep":
        depth = draw(st.integers(50, 3000))
        deep = "[" * depth + "1" + "]" * depth
        data = data.replace(b"[]", deep.encode(), 1) if b"[]" in data else deep.encode()
    return suffix, data


VALID_ROSTER = {"schema": "brigade.roster.v1", "seats": {"agent": {"cli": FAKE_CLI}}}
VALID_MANIFEST = {
    "schema": "brigade.eval_manifest.v1",
    "name": "t",
    "seats": ["agent"],
    "cases": [{"id": "a", "prompt": "p"}],
}


def refusal_in_process(
    folder: Path, manifest: tuple[str, bytes], roster: tuple[str, bytes], explicit: bool = True
) -> str | None:
    """plan_only on the files: None when they load, else the BrigadeError message: a line per
    problem, each naming the same file.

    Any other exception fails the test; the output directory is never created.
    """
    (folder / "p.txt").write_text("a prompt from a file")
    (folder / "d").mkdir()
    manifest_path = folder / f"manifest{manifest[0]}"
    manifest_path.write_bytes(manifest[1])
    roster_path = folder / f"roster{roster[0]}"
    roster_path.write_bytes(roster[1])
    out = folder / "out"
    options = Options(
        manifest=manifest_path, roster=roster_path if explicit else None, out=out, workspace=folder
    )
    try:
        plan_only(options)
    except BrigadeError as exc:
        message: str | None = str(exc)
    else:
        message = None
    assert not out.exists()
    if message is not None:
        lines = message.split("\n")
        assert all(lines) and len(set(lines)) == len(lines), message
        assert len({line.split(": ", 1)[0] for line in lines}) == 1, message  # one document
    if currently_in_test_context():
        event("loads" if message is None else "refused")  # --hypothesis-show-statistics
    return message


def as_yaml(doc: Any) -> tuple[str, bytes]:
    return ".yaml", yaml.safe_dump(doc, sort_keys=False).encode()


PROPERTY_SETTINGS = settings(
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@settings(PROPERTY_SETTINGS, max_examples=300)
@given(manifest=document_bytes(MANIFEST), explicit=st.booleans())
def test_any_manifest_loads_or_is_refused_a_line_per_problem(
    manifest: tuple[str, bytes], explicit: bool
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        refusal_in_process(Path(folder), manifest, as_yaml(VALID_ROSTER), explicit)


@settings(PROPERTY_SETTINGS, max_examples=200)
@given(roster=document_bytes(ROSTER))
def test_any_roster_loads_or_is_refused_a_line_per_problem(roster: tuple[str, bytes]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        refusal_in_process(Path(folder), as_yaml(VALID_MANIFEST), roster)


@pytest.mark.slow
@settings(PROPERTY_SETTINGS, max_examples=1500)
@given(manifest=document_bytes(MANIFEST), roster=document_bytes(ROSTER))
def test_any_manifest_and_roster_stress(
    manifest: tuple[str, bytes], roster: tuple[str, bytes]
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        refusal_in_process(Path(folder), manifest, roster)


def _manifest(**changes: Any) -> dict[str, Any]:
    return {**VALID_MANIFEST, **changes}


def _case(**changes: Any) -> dict[str, Any]:
    return _manifest(cases=[{"id": "a", "prompt": "p", **changes}])


def _json(doc: Any) -> tuple[str, bytes]:
    return ".json", json.dumps(doc).encode()


def deep_grader(depth: int) -> tuple[str, bytes]:
    """A JSON manifest whose grader holds a value nested `depth` lists deep."""
    text = json.dumps(_case(graders=[{"type": "json_field", "path": "a", "expected": "HOLE"}]))
    return ".json", text.replace('"HOLE"', "[" * depth + "1" + "]" * depth).encode()


def alias_bomb(levels: int) -> tuple[str, bytes]:
    """A few hundred bytes of YAML whose aliases expand to 10**levels values."""
    lines = [
        "schema: brigade.eval_manifest.v1",
        "name: t",
        "seats: [agent]",
        "cases:",
        "  - id: a",
        "    prompt: p",
        "    metadata:",
        "      x0: &a0 [" + ", ".join(["lol"] * 10) + "]",
    ]
    for level in range(1, levels):
        lines.append(f"      x{level}: &a{level} [" + ", ".join([f"*a{level - 1}"] * 10) + "]")
    return ".yaml", ("\n".join(lines) + "\n").encode()


SHARED_GRADERS = b"""schema: brigade.eval_manifest.v1
name: t
seats: [agent]
cases:
  - {id: a, prompt: p, graders: &std [{type: regex_output, pattern: ok}]}
  - {id: b, prompt: q, graders: *std}
"""

HOSTILE_INPUTS: dict[str, tuple[tuple[str, bytes], bool]] = {
    # name: ((suffix, bytes), loads)
    "huge prompt": (as_yaml(_case(prompt="y" * (6 * 2**20))), True),
    "huge prompt json": (_json(_case(prompt="z" * (3 * 2**20))), True),
    "non-utf8 bytes": ((".yaml", b"schema: brigade.eval_manifest.v1\nname: \xff\xfe\n"), False),
    "non-utf8 in prompt": (
        (".yaml", as_yaml(_case(prompt="PLACE"))[1].replace(b"PLACE", b"\xc3\x28")),
        False,
    ),
    "utf-16": ((".json", json.dumps(VALID_MANIFEST).encode("utf-16")), False),
    "duplicate keys yaml": ((".yaml", b"name: t\n" + as_yaml(VALID_MANIFEST)[1]), False),
    "duplicate keys json": ((".json", b'{"name": "u", ' + _json(VALID_MANIFEST)[1][1:]), False),
    "deep graders 100": (deep_grader(100), True),
    "deep graders 400": (deep_grader(400), False),
    "deep graders 800": (deep_grader(800), False),
    "deep graders 990": (deep_grader(990), False),
    "deep graders 5000 yaml": (
        (".yaml", b"graders: " + b"[" * 5000 + b"]" * 5000 + b"\n" + as_yaml(VALID_MANIFEST)[1]),
        False,
    ),
    "integer id": (as_yaml(_case(id=5)), False),
    "boolean id": (as_yaml(_case(id=True)), False),
    "list id": (as_yaml(_case(id=["a"])), False),
    "null id": (as_yaml(_case(id=None)), False),
    "negative trials": (as_yaml(_case(trials=-1)), False),
    "zero trials": (as_yaml(_manifest(trials=0)), False),
    "boolean trials": (as_yaml(_manifest(trials=True)), False),
    "float trials": (as_yaml(_case(trials=1.5)), False),
    "integral float trials": (as_yaml(_case(trials=2.0)), True),
    "huge trials": (as_yaml(_case(trials=10**40)), False),
    "nan": ((".json", _json(_manifest(trials=1))[1].replace(b"1}", b"NaN}")), False),
    "yaml inf": (as_yaml(_case(graders=[{"type": "json_field", "expected": float("inf")}])), False),
    "nulls everywhere": (
        as_yaml({k: None for k in ("schema", "name", "seats", "cases", "trials", "graders")}),
        False,
    ),
    "null case fields": (
        as_yaml(_manifest(cases=[{"id": None, "prompt": None, "trials": None, "graders": None}])),
        False,
    ),
    "unicode names": (
        as_yaml(_manifest(cases=[{"id": "ケース-✓-\u200b-𝔘", "prompt": "\u202e\u0301ß"}])),
        True,
    ),
    "empty file": ((".yaml", b""), False),
    "top-level list": ((".yaml", b"- 1\n- 2\n"), False),
    "python tag": ((".yaml", b"!!python/object/apply:os.system ['true']\n"), False),
    "binary tag": (as_yaml(_case(prompt=b"\x00\x01")), False),
    "prompt file is a folder": (as_yaml(_manifest(cases=[{"id": "a", "prompt_file": "d"}])), False),
    "unknown seat": (as_yaml(_manifest(seats=["ghost"])), False),
    "yaml aliases": ((".yaml", SHARED_GRADERS), True),
    "yaml alias bomb": (alias_bomb(9), False),
}


@pytest.mark.parametrize("name", list(HOSTILE_INPUTS))
def test_hostile_manifest_in_process(name: str, tmp_path: Path) -> None:
    document, loads = HOSTILE_INPUTS[name]
    refusal = refusal_in_process(tmp_path, document, as_yaml(VALID_ROSTER))
    assert (refusal is None) == loads, refusal


@pytest.mark.parametrize(
    "name",
    [
        "huge prompt",
        "non-utf8 bytes",
        "duplicate keys json",
        "deep graders 800",
        "deep graders 5000 yaml",
        "integer id",
        "boolean trials",
        "nan",
        "nulls everywhere",
        "unicode names",
        "python tag",
    ],
)
def test_hostile_manifest_through_the_cli_and_doit(name: str, project: Project) -> None:
    (suffix, data), loads = HOSTILE_INPUTS[name]
    project.manifest = project.root / f"manifest{suffix}"
    project.manifest.write_bytes(data)
    checked = project.brigade("validate", str(project.manifest), "--roster", str(project.roster))
    assert "Traceback" not in checked.stderr
    if loads:
        assert checked.returncode == 0, checked.stderr
        return
    assert checked.returncode == 2
    refused = refusal_lines(checked.stderr)
    done = project.doit()
    assert done.returncode == 2
    assert refusal_lines(done.stderr) == refused
    assert not project.out.exists()


@settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck))
@given(manifest=document_bytes(MANIFEST))
# a control character in the refused value: the CLI prints it escaped
@example(manifest=(".yaml", b'schema:\n  "\\x7F": null\nname: t\nseats: [agent]\ncases: []\n'))
def test_random_manifests_through_the_cli_agree_with_the_library(
    manifest: tuple[str, bytes], project: Project
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        refusal = refusal_in_process(Path(folder), manifest, as_yaml(VALID_ROSTER))
        path = Path(folder) / f"manifest{manifest[0]}"
        roster = str(Path(folder) / "roster.yaml")
        checked = project.brigade("validate", str(path), "--roster", roster)
    if refusal is None:
        assert checked.returncode == 0, checked.stderr
    else:
        assert checked.returncode == 2
        lines = refusal_lines(checked.stderr)
        # how deep the parser gets before Python's recursion limit depends on the stack
        deep = "nested too deeply" in refusal and "nested too deeply" in lines[0]
        # what the CLI prints is the library's line with control characters shown escaped
        printed = [printable(f"brigade: {line}") for line in refusal.split("\n")]
        assert deep or lines == printed
