"""Manifest and roster input errors through the real `brigade` command line (exit 2, one line)."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from brigade import __version__
from brigade.engine.session import Options, plan_only
from brigade.front.cli import build_parser

# manifests written for the original `brigade model trial` command, kept verbatim
COMPAT = Path(__file__).resolve().parent / "data" / "compat"


def _commands() -> list[str]:
    parser = build_parser()
    [sub] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return list(sub.choices)


COMMANDS = _commands()

ROSTER = """\
schema: brigade.roster.v1
seats:
  worker: {cli: "exec:{python} -c pass"}
"""

MANIFEST = """\
schema: brigade.eval_manifest.v1
name: inputs
seats: [worker]
cases:
  - {id: a, prompt: p}
"""


def brigade(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BRIGADE")}
    return subprocess.run(
        [sys.executable, "-m", "brigade.front.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def manifest(*lines: str, seats: str = "[worker]", cases: str = "[{id: a, prompt: p}]") -> str:
    """A manifest with `lines` added between the name and the seats."""
    body = "".join(f"{line}\n" for line in lines)
    return f"schema: brigade.eval_manifest.v1\nname: inputs\n{body}seats: {seats}\ncases: {cases}\n"


def roster(seat: str = '{cli: "exec:{python} -c pass"}', *lines: str) -> str:
    body = "".join(f"{line}\n" for line in lines)
    return f"schema: brigade.roster.v1\n{body}seats:\n  worker: {seat}\n"


@dataclass(frozen=True)
class Bad:
    """One bad input: the files to write, the command, and where the message must point."""

    files: dict[str, str | bytes]
    where: str  # "<file>: <json path or line>" the message must start with
    words: str  # a fragment of the explanation
    args: tuple[str, ...] = ("validate", "m.yaml", "--roster", "roster.yaml")
    setup: Callable[[Path], None] | None = field(default=None)


def outside_symlink(tmp_path: Path) -> None:
    secret = tmp_path.parent / f"{tmp_path.name}-outside.md"
    secret.write_text("outside", encoding="utf-8")
    (tmp_path / "link.md").symlink_to(secret)


def prompt_dir(tmp_path: Path) -> None:
    (tmp_path / "prompts").mkdir()


PF = "[{id: a, prompt_file: %s}]"

BAD: dict[str, Bad] = {
    # --- manifest: top level
    "wrong schema tag": Bad(
        {"m.yaml": MANIFEST.replace("eval_manifest.v1", "eval_manifest.v2")},
        "m.yaml: schema: ",
        'must be "brigade.eval_manifest.v1"',
    ),
    "missing name": Bad(
        {"m.yaml": MANIFEST.replace("name: inputs\n", "")},
        "m.yaml: name: ",
        "required",
    ),
    "bad name chars": Bad(
        {"m.yaml": MANIFEST.replace("name: inputs", "name: 'in puts/x'")},
        "m.yaml: name: ",
        "plain name",
    ),
    "trials 0": Bad({"m.yaml": manifest("trials: 0")}, "m.yaml: trials: ", "at least 1"),
    "trials -1": Bad({"m.yaml": manifest("trials: -1")}, "m.yaml: trials: ", "at least 1"),
    "trials true": Bad(
        {"m.yaml": manifest("trials: true")}, "m.yaml: trials: ", "expected an integer"
    ),
    "trials string": Bad(
        {"m.yaml": manifest("trials: '3'")}, "m.yaml: trials: ", "expected an integer"
    ),
    "trials nan": Bad({"m.yaml": manifest("trials: .nan")}, "m.yaml: trials: ", "not a JSON"),
    "case trials 0": Bad(
        {"m.yaml": manifest(cases="[{id: a, prompt: p, trials: 0}]")},
        "m.yaml: cases[0].trials: ",
        "at least 1",
    ),
    "empty seats": Bad({"m.yaml": manifest(seats="[]")}, "m.yaml: seats: ", "must not be empty"),
    "duplicate seats": Bad(
        {"m.yaml": manifest(seats="[worker, worker]")}, "m.yaml: seats: ", "duplicate"
    ),
    "seats not a list": Bad(
        {"m.yaml": manifest(seats="worker")}, "m.yaml: seats: ", "expected a list"
    ),
    "empty cases": Bad({"m.yaml": manifest(cases="[]")}, "m.yaml: cases: ", "must not be empty"),
    "unknown top-level key": Bad(
        {"m.yaml": manifest("bogus: 1")}, "m.yaml: bogus: ", "unknown key"
    ),
    "graders not a list": Bad(
        {"m.yaml": manifest("graders: {type: exit_status}")},
        "m.yaml: graders: ",
        "expected a list",
    ),
    "grader not a mapping": Bad(
        {"m.yaml": manifest("graders: [exit_status]")},
        "m.yaml: graders[0]: ",
        "expected a mapping",
    ),
    "execution.mode bogus": Bad(
        {"m.yaml": manifest("execution: {mode: sandbox}")},
        "m.yaml: execution.mode: ",
        "must be one of",
    ),
    "manifest is a list": Bad(
        {"m.yaml": "- schema: brigade.eval_manifest.v1\n"},
        "m.yaml: (top level): ",
        "expected a mapping, got a list",
    ),
    "empty manifest": Bad({"m.yaml": ""}, "m.yaml: (top level): ", "expected a mapping"),
    "non-string key": Bad({"m.yaml": MANIFEST + "1: x\n"}, "m.yaml: (top level): ", "key 1"),
    # --- manifest: cases
    "case without id": Bad(
        {"m.yaml": manifest(cases="[{id: a, prompt: p}, {prompt: q}]")},
        "m.yaml: cases[1].id: ",
        "required",
    ),
    "case id with colon": Bad(
        {"m.yaml": manifest(cases="[{id: 'a:b', prompt: p}]")},
        "m.yaml: cases[0].id: ",
        "':'",
    ),
    "empty case id": Bad(
        {"m.yaml": manifest(cases="[{id: '', prompt: p}]")},
        "m.yaml: cases[0].id: ",
        "non-empty",
    ),
    "duplicate case ids": Bad(
        {"m.yaml": manifest(cases="[{id: a, prompt: p}, {id: b, prompt: q}, {id: a, prompt: r}]")},
        "m.yaml: cases[2].id: ",
        "duplicate case id 'a' (first used at cases[0])",
    ),
    "prompt and prompt_file": Bad(
        {"m.yaml": manifest(cases="[{id: a, prompt: p, prompt_file: p.md}]"), "p.md": "p"},
        "m.yaml: cases[0]: ",
        "both prompt and prompt_file",
    ),
    "neither prompt nor prompt_file": Bad(
        {"m.yaml": manifest(cases="[{id: a}]")},
        "m.yaml: cases[0]: ",
        "needs a prompt or a prompt_file",
    ),
    "prompt_file escapes with ..": Bad(
        {"m.yaml": manifest(cases=PF % "../x.md")},
        "m.yaml: cases[0].prompt_file: ",
        "outside the manifest's folder",
    ),
    "absolute prompt_file": Bad(
        {"m.yaml": manifest(cases=PF % "/etc/hostname")},
        "m.yaml: cases[0].prompt_file: ",
        "outside the manifest's folder",
    ),
    "prompt_file symlink outside": Bad(
        {"m.yaml": manifest(cases=PF % "link.md")},
        "m.yaml: cases[0].prompt_file: ",
        "outside the manifest's folder",
        setup=outside_symlink,
    ),
    "missing prompt_file": Bad(
        {"m.yaml": manifest(cases=PF % "nope.md")},
        "m.yaml: cases[0].prompt_file: ",
        "does not exist",
    ),
    "prompt_file is a folder": Bad(
        {"m.yaml": manifest(cases=PF % "prompts")},
        "m.yaml: cases[0].prompt_file: ",
        "is a directory",
        setup=prompt_dir,
    ),
    "non-UTF-8 prompt_file": Bad(
        {"m.yaml": manifest(cases=PF % "p.md"), "p.md": b"caf\xe9\n"},
        "m.yaml: cases[0].prompt_file: ",
        "not valid UTF-8",
    ),
    "unknown case key": Bad(
        {"m.yaml": manifest(cases="[{id: a, prompt: p, bogus: 1}]")},
        "m.yaml: cases[0].bogus: ",
        "unknown key",
    ),
    "grader without type": Bad(
        {"m.yaml": manifest(cases="[{id: a, prompt: p, graders: [{pattern: x}]}]")},
        "m.yaml: cases[0].graders[0].type: ",
        "required",
    ),
    "case graders not a list": Bad(
        {"m.yaml": manifest(cases="[{id: a, prompt: p, graders: {type: exit_status}}]")},
        "m.yaml: cases[0].graders: ",
        "expected a list",
    ),
    "seat name YAML reads as a boolean": Bad(
        {"m.yaml": manifest(seats="[worker, off]")},
        "m.yaml: seats[1]: ",
        "; got false (YAML reads an unquoted yes, no, on or off as true or false: quote it)",
    ),
    "model YAML reads as a boolean": Bad(
        {"roster.yaml": roster("{cli: claude, model: no}")},
        "roster.yaml: seats.worker.model: ",
        "expected a string or null, got a boolean (YAML reads an unquoted yes, no",
    ),
    # --- manifest against roster
    "unknown seat name": Bad(
        {"m.yaml": manifest(seats="[worker, nobody]")},
        "m.yaml: seats[1]: ",
        "'nobody' is not defined in roster.yaml (it defines: worker)",
    ),
    # --- roster
    "roster wrong schema": Bad(
        {"roster.yaml": ROSTER.replace("roster.v1", "roster.v0")},
        "roster.yaml: schema: ",
        'must be "brigade.roster.v1"',
    ),
    "roster empty seats": Bad(
        {"roster.yaml": "schema: brigade.roster.v1\nseats: {}\n"},
        "roster.yaml: seats: ",
        "must not be empty",
    ),
    "seat without cli": Bad(
        {"roster.yaml": roster("{model: m}")}, "roster.yaml: seats.worker.cli: ", "required"
    ),
    "seat is null": Bad(
        {"roster.yaml": roster("null")}, "roster.yaml: seats.worker: ", "expected a mapping"
    ),
    "unknown seat key": Bad(
        {"roster.yaml": roster("{cli: claude, temperature: 1}")},
        "roster.yaml: seats.worker.temperature: ",
        "unknown key",
    ),
    "unknown cli name": Bad(
        {"roster.yaml": roster("{cli: chatgpt-desktop}")},
        "roster.yaml: seats.worker.cli: ",
        "unknown cli 'chatgpt-desktop'",
    ),
    "exec with empty command": Bad(
        {"roster.yaml": roster('{cli: "exec:  "}')},
        "roster.yaml: seats.worker.cli: ",
        "needs a command line",
    ),
    "exec with unbalanced quote": Bad(
        {"roster.yaml": roster("{cli: 'exec:echo \"hi'}")},
        "roster.yaml: seats.worker.cli: ",
        "cannot be parsed",
    ),
    "env value not a string": Bad(
        {"roster.yaml": roster("{cli: claude, env: {MODE: 1}}")},
        "roster.yaml: seats.worker.env.MODE: ",
        "expected a string",
    ),
    "seat timeout 0": Bad(
        {"roster.yaml": roster("{cli: claude, timeout_seconds: 0}")},
        "roster.yaml: seats.worker.timeout_seconds: ",
        "greater than 0",
    ),
    "seat sandbox mode": Bad(
        {"roster.yaml": roster("{cli: claude, sandbox: sometimes}")},
        "roster.yaml: seats.worker.sandbox: ",
        "must be auto, required or off, or an object with mode, writable, readable, hidden",
    ),
    "seat sandbox paths": Bad(
        {"roster.yaml": roster("{cli: claude, sandbox: {writable: ~/.cache}}")},
        "roster.yaml: seats.worker.sandbox.writable: ",
        "expected a list, got a string",
    ),
    "seat sandbox key": Bad(
        {"roster.yaml": roster("{cli: claude, sandbox: {writeable: [a]}}")},
        "roster.yaml: seats.worker.sandbox.writeable: ",
        "unknown key (did you mean 'writable'?) (allowed: hidden, mode, readable, writable)",
    ),
    "seat network": Bad(
        {"roster.yaml": roster("{cli: claude, network: offline}")},
        "roster.yaml: seats.worker.network: ",
        "expected a boolean, got a string",
    ),
    "roster sandbox mode": Bad(
        {"roster.yaml": roster("{cli: claude}", "sandbox: maybe")},
        "roster.yaml: sandbox: ",
        "must be auto (sandbox when it works here), required (refuse to run without it) or off",
    ),
    "roster timeout -1": Bad(
        {"roster.yaml": roster("{cli: claude}", "timeout_seconds: -1")},
        "roster.yaml: timeout_seconds: ",
        "greater than 0",
    ),
    "codex_transport bogus": Bad(
        {"roster.yaml": roster("{cli: codex}", "codex_transport: websocket")},
        "roster.yaml: codex_transport: ",
        "must be one of",
    ),
    "roster is a list": Bad(
        {"roster.yaml": "- worker\n"}, "roster.yaml: (top level): ", "expected a mapping"
    ),
    # --- parsing
    "YAML syntax error": Bad(
        {"m.yaml": "schema: brigade.eval_manifest.v1\nname: [x\n"},
        "m.yaml: line 3 column 1: ",
        "expected ',' or ']'",
    ),
    "duplicate YAML keys": Bad(
        {"m.yaml": MANIFEST + "name: again\n"},
        "m.yaml: line 6 column 1: ",
        "duplicate key 'name'",
    ),
    "duplicate YAML keys in roster": Bad(
        {"roster.yaml": ROSTER + "  worker: {cli: claude}\n"},
        "roster.yaml: line 4 column 3: ",
        "duplicate key 'worker'",
    ),
    "JSON duplicate keys": Bad(
        {"m.json": '{"schema": "brigade.eval_manifest.v1", "name": "a", "name": "b"}'},
        "m.json: ",
        "duplicate key 'name'",
        args=("validate", "m.json", "--roster", "roster.yaml"),
    ),
    "JSON syntax error": Bad(
        {"m.json": '{"schema": "brigade.eval_manifest.v1",\n "name": }'},
        "m.json: line 2 column 10: ",
        "Expecting value",
        args=("validate", "m.json", "--roster", "roster.yaml"),
    ),
    "JSON NaN": Bad(
        {"m.json": '{"schema": "brigade.eval_manifest.v1", "trials": NaN}'},
        "m.json: ",
        "NaN is not a JSON number",
        args=("validate", "m.json", "--roster", "roster.yaml"),
    ),
    "infinity under a key holding a line break": Bad(
        {
            "m.yaml": "schema: brigade.eval_manifest.v1\nname: t\nseats: [agent]\ncases: []\n"
            'graders:\n- type: exact_output\n  expected:\n    ? "two\\nlines"\n    : .inf\n'
        },
        'm.yaml: graders[0].expected["two\\nlines"]: ',
        "inf is not a JSON number",
    ),
    "non-UTF-8 manifest": Bad(
        {"m.yaml": MANIFEST.encode() + b"description: caf\xe9\n"},
        "m.yaml: ",
        "not valid UTF-8 (byte 0xe9",
    ),
    # --- files
    "missing manifest file": Bad(
        {}, "nope.yaml: ", "file not found", args=("validate", "nope.yaml")
    ),
    "manifest is a folder": Bad(
        {}, "prompts: ", "is a directory", args=("validate", "prompts"), setup=prompt_dir
    ),
    "missing --roster file": Bad(
        {"m.yaml": MANIFEST},
        "other.yaml: ",
        "file not found",
        args=("validate", "m.yaml", "--roster", "other.yaml"),
    ),
    "missing default roster": Bad(
        {"sub/m.yaml": MANIFEST},
        "sub/m.yaml: ",
        "no roster found (there is no roster.yaml beside it and no .brigade/roster.toml in the "
        "workspace",
        args=("validate", "sub/m.yaml"),
    ),
    "missing roster named by manifest": Bad(
        {"m.yaml": manifest("roster: seats.yaml")},
        "m.yaml: ",
        "no roster found (its `roster` key names 'seats.yaml')",
        args=("validate", "m.yaml"),
    ),
    "plan: bad manifest": Bad(
        {"m.yaml": manifest("trials: 0")},
        "m.yaml: trials: ",
        "at least 1",
        args=("plan", "m.yaml", "--roster", "roster.yaml"),
    ),
}


def write_files(tmp_path: Path, files: dict[str, str | bytes]) -> None:
    base = {"m.yaml": MANIFEST, "roster.yaml": ROSTER}
    for name, content in {**base, **files}.items():
        target = tmp_path / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            target.write_bytes(content)
        else:
            target.write_text(content, encoding="utf-8")


def assert_one_line_error(result: subprocess.CompletedProcess[str], where: str, words: str) -> None:
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert result.stderr.endswith("\n")
    assert lines[0].startswith(f"brigade: {where}"), lines[0]
    assert words in lines[0], lines[0]


@pytest.mark.parametrize("bad", BAD.values(), ids=list(BAD))
def test_bad_input_exits_2_with_one_line(tmp_path: Path, bad: Bad) -> None:
    write_files(tmp_path, bad.files)
    if bad.setup is not None:
        bad.setup(tmp_path)
    assert_one_line_error(brigade(*bad.args, cwd=tmp_path), bad.where, bad.words)


def test_there_are_at_least_twenty_distinct_bad_inputs() -> None:
    assert len(BAD) >= 20
    inputs = {(tuple(sorted(b.files.items())), b.args, b.setup) for b in BAD.values()}
    assert len(inputs) == len(BAD)


@pytest.mark.parametrize("where", ["top", "case"])
def test_float_trials_do_not_crash(tmp_path: Path, where: str) -> None:
    text = (
        manifest("trials: 2.0")
        if where == "top"
        else manifest(cases="[{id: a, prompt: p, trials: 2.0}]")
    )
    write_files(tmp_path, {"m.yaml": text})
    result = brigade("validate", "m.yaml", "--roster", "roster.yaml", cwd=tmp_path)
    assert "Traceback" not in result.stderr
    assert result.returncode in (0, 2)
    assert len(result.stderr.splitlines()) <= 1


@pytest.mark.parametrize(
    "seats, path",
    [
        ('  "a:b": {cli: claude}\n', 'seats["a:b"]'),
        ("  worker: {cli: claude, env: {A-B: x}}\n", "seats.worker.env.A-B"),
    ],
    ids=["seat name", "env name"],
)
def test_bad_key_names_are_named(tmp_path: Path, seats: str, path: str) -> None:
    write_files(tmp_path, {"roster.yaml": f"schema: brigade.roster.v1\nseats:\n{seats}"})
    result = brigade("validate", "m.yaml", "--roster", "roster.yaml", cwd=tmp_path)
    assert result.returncode == 2
    assert f"roster.yaml: {path}: " in result.stderr


# --- good inputs ------------------------------------------------------------

YAML_MANIFEST = """\
schema: brigade.eval_manifest.v1
name: spelled
trials: 2
seats: [worker]
graders:
  - {type: exit_status}
execution: {mode: read-only}
cases:
  - id: greet
    prompt: "Say hello.\\nThen stop."
    graders:
      - {type: regex_output, pattern: '^hello$', ignore_case: true}
  - id: from-file
    prompt_file: cases/p.md
    trials: 1
"""

JSON_MANIFEST = {
    "schema": "brigade.eval_manifest.v1",
    "name": "spelled",
    "trials": 2,
    "seats": ["worker"],
    "graders": [{"type": "exit_status"}],
    "execution": {"mode": "read-only"},
    "cases": [
        {
            "id": "greet",
            "prompt": "Say hello.\nThen stop.",
            "graders": [{"type": "regex_output", "pattern": "^hello$", "ignore_case": True}],
        },
        {"id": "from-file", "prompt_file": "cases/p.md", "trials": 1},
    ],
}


def spelled_both_ways(tmp_path: Path) -> tuple[Path, Path]:
    write_files(
        tmp_path,
        {
            "m.yaml": YAML_MANIFEST,
            "m.json": json.dumps(JSON_MANIFEST, indent=2),
            "cases/p.md": "Line one\r\nLine two\r\n",
        },
    )
    return tmp_path / "m.yaml", tmp_path / "m.json"


def test_yaml_and_json_spellings_plan_alike(tmp_path: Path) -> None:
    yaml_path, json_path = spelled_both_ways(tmp_path)
    roster = tmp_path / "roster.yaml"
    out = tmp_path / "out"
    from_yaml, _ = plan_only(Options(manifest=yaml_path, roster=roster, out=out))
    from_json, _ = plan_only(Options(manifest=json_path, roster=roster, out=out))
    assert from_yaml.manifest_digest == from_json.manifest_digest
    assert from_yaml.document()["cells"] == from_json.document()["cells"]
    assert [c.coordinate for c in from_yaml.cells] == [
        "greet:worker:1",
        "greet:worker:2",
        "from-file:worker:1",
    ]
    assert from_yaml.cells[2].prompt == "Line one\nLine two\n"


def test_yaml_and_json_spellings_plan_alike_on_the_command_line(tmp_path: Path) -> None:
    spelled_both_ways(tmp_path)
    docs = []
    for name in ("m.yaml", "m.json"):
        result = brigade("plan", name, "--roster", "roster.yaml", "--out", "out", cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        assert result.stderr == ""
        docs.append(json.loads(result.stdout))
    yaml_doc, json_doc = docs
    assert yaml_doc["manifest_digest"] == json_doc["manifest_digest"]
    assert yaml_doc["cells"] == json_doc["cells"]
    assert yaml_doc["stale_cells"] == json_doc["stale_cells"] == []


def test_validate_ok_line(tmp_path: Path) -> None:
    spelled_both_ways(tmp_path)
    result = brigade("validate", "m.yaml", "--roster", "roster.yaml", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "m.yaml: ok: 2 case(s) x 1 seat(s) = 3 cell(s), roster roster.yaml\n"
    from brigade.run import sandbox

    found = sandbox.availability()  # the sandbox keeps the seat from writing, where it works
    assert result.stderr == (
        ""
        if found.ok
        else "warning: seat worker: read-only run, but the sandbox cannot run here "
        f"({found.detail}) and the exec adapter cannot enforce it; the seat may still change "
        "the workspace (the seat's acknowledge_read_only: true silences this)\n"
    )


def test_default_roster_beside_the_manifest(tmp_path: Path) -> None:
    write_files(tmp_path, {"sub/m.yaml": MANIFEST, "sub/roster.yaml": ROSTER})
    result = brigade("validate", "sub/m.yaml", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.endswith("roster sub/roster.yaml\n")


def tree(root: Path) -> dict[str, tuple[int, int]]:
    return {
        str(p.relative_to(root)): (p.stat().st_mtime_ns, p.stat().st_size)
        for p in sorted(root.rglob("*"))
    }


def test_plan_writes_nothing(tmp_path: Path) -> None:
    spelled_both_ways(tmp_path)
    before = tree(tmp_path)
    default = brigade("plan", "m.yaml", "--roster", "roster.yaml", cwd=tmp_path)
    explicit = brigade(
        "plan", "m.yaml", "--roster", "roster.yaml", "--out", "elsewhere/out", cwd=tmp_path
    )
    assert default.returncode == 0, default.stderr
    assert explicit.returncode == 0, explicit.stderr
    assert tree(tmp_path) == before
    assert json.loads(default.stdout)["cells"] == json.loads(explicit.stdout)["cells"]


COMPAT_MANIFESTS = sorted(COMPAT.glob("*/manifest.json"))


@pytest.mark.parametrize("path", COMPAT_MANIFESTS, ids=[p.parent.name for p in COMPAT_MANIFESTS])
def test_compat_manifest_loads_unchanged(tmp_path: Path, path: Path) -> None:
    (tmp_path / "roster.yaml").write_text(ROSTER, encoding="utf-8")
    before = tree(path.parent)
    raw = json.loads(path.read_text(encoding="utf-8"))
    cells = sum(case.get("trials", raw.get("trials", 1)) for case in raw["cases"])

    validate = brigade("validate", str(path), "--roster", "roster.yaml", cwd=tmp_path)
    assert validate.returncode == 0, validate.stderr
    assert validate.stdout == (
        f"{path}: ok: {len(raw['cases'])} case(s) x 1 seat(s) = {cells} cell(s), "
        "roster roster.yaml\n"
    )

    plan = brigade("plan", str(path), "--roster", "roster.yaml", "--out", "out", cwd=tmp_path)
    assert plan.returncode == 0, plan.stderr
    doc = json.loads(plan.stdout)
    assert doc["name"] == raw["name"]
    assert len(doc["cells"]) == cells
    assert {c["seat"]["seat"] for c in doc["cells"]} == {"worker"}
    for cell in doc["cells"]:
        case = next(c for c in raw["cases"] if c["id"] == cell["case_id"])
        prompt = (path.parent / case["prompt_file"]).read_bytes().decode("utf-8-sig")
        assert cell["prompt"] == prompt.replace("\r\n", "\n").replace("\r", "\n")
        assert cell["graders"] == case["graders"]
    assert tree(path.parent) == before
    assert not (tmp_path / "out").exists()


def test_compat_seeds_are_present() -> None:
    assert len(COMPAT_MANIFESTS) == 4


# --- the command line itself ------------------------------------------------


@pytest.mark.parametrize("command", COMMANDS)
def test_help_for_every_command(tmp_path: Path, command: str) -> None:
    result = brigade(command, "--help", cwd=tmp_path)
    assert result.returncode == 0
    assert result.stdout.startswith(f"usage: brigade {command} ")
    assert result.stderr == ""


def test_every_documented_command_exists() -> None:
    assert set(COMMANDS) >= {"validate", "plan", "run", "regrade", "summary", "show", "export"}


def test_top_level_help(tmp_path: Path) -> None:
    result = brigade("--help", cwd=tmp_path)
    assert result.returncode == 0
    for command in COMMANDS:
        assert f"    {command} " in result.stdout


def test_version(tmp_path: Path) -> None:
    result = brigade("--version", cwd=tmp_path)
    assert result.returncode == 0
    assert result.stdout == f"brigade {__version__}\n"


@pytest.mark.parametrize(
    "args",
    [
        ("validate", "m.yaml", "--bogus"),
        ("frobnicate",),
        ("validate",),
        ("run", "m.yaml", "-n", "two"),
    ],
    ids=["unknown flag", "unknown command", "missing argument", "bad int"],
)
def test_bad_command_line_exits_2_with_one_line(tmp_path: Path, args: tuple[str, ...]) -> None:
    result = brigade(*args, cwd=tmp_path)
    assert result.returncode == 2
    assert result.stdout == ""
    assert len(result.stderr.splitlines()) == 1, result.stderr
    assert result.stderr.startswith("brigade")
    assert "see brigade" in result.stderr and "--help" in result.stderr


def test_no_command_prints_help_and_exits_2(tmp_path: Path) -> None:
    result = brigade(cwd=tmp_path)
    assert result.returncode == 2
    assert result.stdout.startswith("usage: brigade ")


def test_yaml_merge_key_override_is_not_a_duplicate(tmp_path: Path) -> None:
    write_files(
        tmp_path,
        {
            "m.yaml": manifest(seats="[a, b]"),
            "roster.yaml": "schema: brigade.roster.v1\n"
            "seats:\n"
            "  a: &base {cli: claude, model: x}\n"
            "  b: {<<: *base, model: y}\n",
        },
    )
    result = brigade("plan", "m.yaml", "--roster", "roster.yaml", "--out", "out", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    models = [c["seat"]["model"] for c in json.loads(result.stdout)["cells"]]
    assert models == ["x", "y"]


def test_valid_inputs_are_cached_and_old_entries_pruned(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from brigade.inputs.cache import CACHE_KEEP_SECONDS
    from brigade.inputs.validated import read_valid_document

    cache = tmp_path / "cache"
    monkeypatch.setenv("BRIGADE_CACHE_DIR", str(cache))
    stale = cache / "inputs" / "old.json"
    stale.parent.mkdir(parents=True)
    stale.write_text("{}")
    long_ago = os.stat(stale).st_mtime - CACHE_KEEP_SECONDS - 60
    os.utime(stale, (long_ago, long_ago))
    roster = tmp_path / "roster.yaml"
    roster.write_text("schema: brigade.roster.v1\nseats:\n  a: {cli: 'exec:true'}\n")
    doc = read_valid_document(roster, "roster.yaml", "brigade.roster.v1")
    entries = list((cache / "inputs").glob("*.json"))
    assert [json.loads(e.read_text()) for e in entries] == [doc]
    assert not stale.exists()
    # a cached entry is what the next read returns, without parsing the file again
    roster.write_text(roster.read_text())  # same bytes: same key
    assert read_valid_document(roster, "roster.yaml", "brigade.roster.v1") == doc
    assert len(list((cache / "inputs").glob("*.json"))) == 1
