"""`brigade import swebench`: SWE-bench-format instances over tiny local repositories become
a manifest that runs end to end offline; one fake seat solves them, one does not."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
import yaml
from conftest import Project, git

from brigade.core.swebench import junit_name, parse_instances
from brigade.errors import InputError

REPO = Path(__file__).resolve().parents[1]
FIXER = REPO / "manifests" / "agents" / "fixer.py"
CALC = "def add(a, b):\n    return a - b\n\n\ndef sub(a, b):\n    return a + (-b)\n"
SUB_TEST = "from calc import sub\n\n\ndef test_sub():\n    assert sub(5, 3) == 2\n"
TEST_PATCH = textwrap.dedent(
    """\
    diff --git a/tests/test_add.py b/tests/test_add.py
    new file mode 100644
    --- /dev/null
    +++ b/tests/test_add.py
    @@ -0,0 +1,9 @@
    +from calc import add
    +
    +
    +def test_add():
    +    assert add(2, 3) == 5
    +
    +
    +def test_negative():
    +    assert add(-1, 1) == 0
    """
)


def clone(folder: Path) -> str:
    """A tiny repository with the bug; its base commit (a later commit follows it)."""
    (folder / "tests").mkdir(parents=True)
    git(folder, "init", "-q")
    (folder / "calc.py").write_text(CALC)
    (folder / "tests" / "test_sub.py").write_text(SUB_TEST)
    git(folder, "add", "-A")
    git(folder, "commit", "-qm", "bug")
    base = git(folder, "rev-parse", "HEAD").strip()
    (folder / "NEWS").write_text("later\n")
    git(folder, "add", "-A")
    git(folder, "commit", "-qm", "later")
    return base


def instance(instance_id: str, repo: str, base: str) -> dict[str, object]:
    return {
        "instance_id": instance_id,
        "repo": repo,
        "base_commit": base,
        "problem_statement": "add() in calc.py subtracts. Fix calc.py so that it adds.",
        "test_patch": TEST_PATCH,
        # SWE-bench writes these lists as JSON strings
        "FAIL_TO_PASS": json.dumps(
            ["tests/test_add.py::test_add", "tests/test_add.py::test_negative"]
        ),
        "PASS_TO_PASS": ["tests/test_sub.py::test_sub"],
        "environment_setup_commit": base,
    }


def test_swebench_instances_import_and_run_offline(project: Project) -> None:
    repos = project.root / "repos"
    bases = {name: clone(repos / f"acme__{name}") for name in ("calc", "numbers")}
    data = project.root / "instances.jsonl"
    data.write_text(
        "\n".join(
            json.dumps(instance(f"acme__{name}-{n}", f"acme/{name}", bases[name]))
            for n, name in enumerate(("calc", "numbers"), 1)
        )
        + "\n"
    )
    fixer = f"exec:{{python}} {FIXER}"
    project.write_roster(
        {"fixer": {"cli": fixer}, "hasty": {"cli": fixer, "env": {"DEMO_STYLE": "make-mistakes"}}}
    )
    manifest = project.root / "bench.yaml"
    done = project.brigade(
        "import",
        "swebench",
        str(data),
        "--repos",
        str(repos),
        "--to",
        str(manifest),
        "--seats",
        "fixer,hasty",
        "--roster",
        str(project.roster),
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == f"brigade: wrote {manifest}: 2 case(s) from {data}\n"
    doc = yaml.safe_load(manifest.read_text())
    first = doc["cases"][0]
    assert first["workspace"] == {"repo": "repos/acme__calc", "commit": bases["calc"]}
    assert first["graders"][0]["require_tests"] == [
        "tests.test_add.test_add",
        "tests.test_add.test_negative",
        "tests.test_sub.test_sub",
    ]
    assert (project.root / first["graders"][0]["test_patch_file"]).read_text() == TEST_PATCH
    # importing again never overwrites
    again = project.brigade(
        "import",
        "swebench",
        str(data),
        "--repos",
        str(repos),
        "--to",
        str(manifest),
        "--seats",
        "fixer",
    )
    assert again.returncode == 2 and "never overwrites" in again.stderr
    ran = project.brigade("run", str(manifest), "--out", str(project.out))
    assert ran.returncode == 1, ran.stderr
    assert project.states() == {
        "acme__calc-1:fixer:1": "accepted",
        "acme__calc-1:hasty:1": "rejected",
        "acme__numbers-2:fixer:1": "accepted",
        "acme__numbers-2:hasty:1": "rejected",
    }
    checks = project.receipt("acme__calc-1:hasty:1")["graders"][0]["component_checks"]
    failed = [check["name"] for check in checks if not check["passed"]]
    assert failed == ["exit status", "tests.test_add.test_negative"]
    # the test patch reached neither the repository nor the seat's changes
    assert not (repos / "acme__calc" / "tests" / "test_add.py").exists()
    run = project.cell_dir("acme__calc-1:fixer:1") / "attempts/attempt-001/run"
    assert "test_add.py" not in (run / "changes.patch").read_text()

    # a regrade applies each stored patch at its case's own base commit, whatever the
    # repository's HEAD (here already fixed, which the seats' patches would not apply to)
    (repos / "acme__calc" / "calc.py").write_text(CALC.replace("a - b", "a + b"))
    git(repos / "acme__calc", "commit", "-qam", "the fix, later")
    before = project.receipts()
    launches = project.launches()
    regraded = project.brigade("regrade", str(project.out))
    assert regraded.returncode == 1, regraded.stderr
    assert project.launches() == launches
    after = project.receipts()
    assert {c: r["state"] for c, r in after.items()} == {c: r["state"] for c, r in before.items()}
    assert regraded.stdout.startswith("regraded 4 cell(s) from stored output (0 changed state)")
    for coordinate, receipt in after.items():
        assert receipt["graders"][0]["component_checks"] == (
            before[coordinate]["graders"][0]["component_checks"]
        )


def test_junit_names_of_pytest_node_ids() -> None:
    assert junit_name("tests/test_a.py::TestX::test_y[1]") == "tests.test_a.TestX.test_y[1]"
    assert junit_name("test_b.py::test_c") == "test_b.test_c"
    assert junit_name("plain") == "plain"


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ("{", "data.jsonl:1: not a JSON object"),
        ('{"instance_id": "x"}', "data.jsonl:1: repo: must be a non-empty string"),
    ],
)
def test_a_bad_instance_is_named_by_its_line(line: str, problem: str) -> None:
    with pytest.raises(InputError) as caught:
        parse_instances(line + "\n", "data.jsonl")
    assert str(caught.value).startswith(problem)


# -- a hostile instances file -------------------------------------------------------------

DEEP = "[" * 100_000 + "]" * 100_000


@pytest.mark.parametrize(
    ("field", "value", "problem"),
    [
        ("repo", "acme//etc", "repo: must be owner/name or name"),
        ("repo", "../outside", "repo: must be owner/name or name"),
        ("repo", "acme/..", "repo: must be owner/name or name"),
        ("instance_id", "bad\nid", "instance_id: must be a name"),
        ("instance_id", "a:b", "instance_id: must be a name"),
        ("instance_id", "x" * 201, "instance_id: must be a name"),
        ("FAIL_TO_PASS", ["--junitxml=/tmp/x.xml"], "FAIL_TO_PASS: a test id cannot start"),
        ("PASS_TO_PASS", ["-p", "evil"], "PASS_TO_PASS: a test id cannot start"),
        ("problem_statement", DEEP, "data.jsonl:1: not a JSON object (nested deeper"),
    ],
)
def test_a_hostile_instance_is_refused_on_one_line(field: str, value: object, problem: str) -> None:
    doc = instance("acme__calc-1", "acme/calc", "0" * 40)
    line = json.dumps({**doc, field: value})
    if field == "problem_statement":
        line = line.replace(json.dumps(value), value)  # the nesting itself, not a string
    with pytest.raises(InputError) as caught:
        parse_instances(line + "\n", "data.jsonl")
    assert str(caught.value).startswith("data.jsonl:1: ")
    assert problem in str(caught.value), str(caught.value)
    assert "\n" not in str(caught.value)


def test_ids_that_spell_alike_get_test_patches_of_their_own(project: Project) -> None:
    repos = project.root / "repos"
    base = clone(repos / "acme__calc")
    data = project.root / "instances.jsonl"
    first = {**instance("acme/calc-1", "acme/calc", base), "test_patch": "FIRST\n"}
    second = {**instance("acme_calc-1", "acme/calc", base), "test_patch": "SECOND\n"}
    data.write_text(json.dumps(first) + "\n" + json.dumps(second) + "\n")
    manifest = project.root / "bench.yaml"
    args = ["--repos", str(repos), "--seats", "a"]
    done = project.brigade("import", "swebench", str(data), "--to", str(manifest), *args)
    assert done.returncode == 0, done.stderr
    cases = yaml.safe_load(manifest.read_text())["cases"]
    patches = [case["graders"][0]["test_patch_file"] for case in cases]
    assert [(project.root / name).read_text() for name in patches] == ["FIRST\n", "SECOND\n"]
    # a plain id keeps its plain name
    assert patches[1] == "swebench/acme_calc-1.test.patch"
    # ids that differ only in case would share one file on a case-insensitive disk: refused
    upper = {**second, "instance_id": "ACME_calc-1"}
    data.write_text(json.dumps(second) + "\n" + json.dumps(upper) + "\n")
    (project.root / "other").mkdir()
    other = project.root / "other" / "bench.yaml"
    refused = project.brigade("import", "swebench", str(data), "--to", str(other), *args)
    assert refused.returncode == 2
    assert "ACME_calc-1: its test patch would be" in refused.stderr
    assert not other.exists()
