"""README.md and docs/ stay true: the demo runs as documented, CI runs the documented test
command, and the snippets the pages show parse and run."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from conftest import REPO, brigade_command, git

README = (REPO / "README.md").read_text()
DOCS = REPO / "docs"


def page(name: str) -> str:
    """The text of a docs/ page."""
    return (DOCS / name).read_text()


def block_after(marker: str, text: str = README) -> str:
    """The sh block after `<!-- marker -->` in README.md (or in `text`, a docs/ page)."""
    match = re.search(rf"<!-- {marker} -->\s*```sh\n(.*?)\n```", text, re.S)
    assert match, marker
    return match.group(1)


def test_demo_runs_offline_with_doit_at_the_repo_root(repo_copy: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "doit"], cwd=repo_copy, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 1, done.stderr  # the sloppy seat fails on purpose
    out = repo_copy / ".brigade" / "evals" / "demo"
    summary = json.loads((out / "summary.json").read_text())
    states = {k for k, v in summary["counts"].items() if v}
    assert states == {"accepted", "rejected", "unscored", "execution_error"}
    shown = subprocess.run(
        [*brigade_command(), "show", ".brigade/evals/demo"],
        cwd=repo_copy,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert shown.returncode == 0
    assert "careful" in shown.stdout and "sloppy" in shown.stdout
    # a second run is a no-op with the same verdict
    again = subprocess.run(
        [sys.executable, "-m", "doit"], cwd=repo_copy, capture_output=True, text=True, timeout=120
    )
    assert again.returncode == 1


def test_demo_command_is_the_documented_one() -> None:
    assert block_after("demo-command") == (
        "python3 -m venv .venv && .venv/bin/pip install -e . && .venv/bin/doit; "
        ".venv/bin/brigade show .brigade/evals/demo"
    )


def test_ci_runs_exactly_the_readme_test_command() -> None:
    command = block_after("test-command")
    assert "pytest" in command
    script = (REPO / ".ci" / "run").read_text()
    extract = re.search(r"command=\$\((awk .*README\.md)\)", script)
    assert extract, "the .ci/run extraction changed"
    extracted = subprocess.run(
        ["bash", "-c", extract.group(1)], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.strip()
    assert extracted == command


def test_every_documented_command_has_help() -> None:
    commands = page("commands.md").split("# Commands", 1)[1].split("\n## ", 1)[0]
    names = re.findall(r"^brigade (\w+)", commands, re.M)
    import argparse

    from brigade.front import cli

    parser = cli.build_parser()
    (subparsers,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    assert set(subparsers.choices) <= set(names)  # every command is in the synopsis
    for name in names:
        done = subprocess.run(
            [*brigade_command(), name, "--help"], capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, name
        assert done.stdout.startswith("usage: brigade " + name)


def test_the_readme_table_names_every_command() -> None:
    """README's table of commands names each `brigade` command (a row's later names go
    without the `brigade`)."""
    import argparse

    from brigade.front import cli

    table = README.split("## Commands", 1)[1].split("\n## ", 1)[0]
    named = {
        words[1] if words[0] == "brigade" and len(words) > 1 else words[0]
        for words in (code.split() for code in re.findall(r"`([^`]+)`", table))
    }
    parser = cli.build_parser()
    (subparsers,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    assert set(subparsers.choices) <= named, set(subparsers.choices) - named

def test_no_page_installs_brigade_by_name_from_pypi() -> None:
    """The `brigade` on PyPI is another project: the pages install from a checkout."""
    pages = [("README.md", README)] + [(p.name, p.read_text()) for p in DOCS.glob("*.md")]
    for name, text in pages:
        assert not re.search(r"pip install ['\"]?brigade\b", text), name

def synopses() -> dict[str, str]:
    """Each `brigade` command's lines in the synopsis of docs/commands.md, comments left out."""
    block = page("commands.md").split("```", 2)[1]
    found: dict[str, str] = {}
    name = None
    for line in block.splitlines():
        start = re.match(r"brigade (\w+)", line)
        if start:
            name = start.group(1)
        elif not (line.startswith(" ") and name):
            name = None
            continue
        found[name] = found.get(name, "") + line.split("   #")[0] + "\n"
    return found


def test_every_commands_options_are_its_synopsis_options() -> None:
    """Each option a command's --help lists is in its synopsis, and the synopsis names no
    option the command does not take."""
    import argparse

    from brigade.front import cli

    parser = cli.build_parser()
    (subparsers,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    documented = synopses()
    for name, sub in subparsers.choices.items():
        if name == "doit":  # doit's own command line, passed through
            continue
        taken = {o for action in sub._actions for o in action.option_strings}
        named = set(re.findall(r"(?<![\w-])(--?[a-z][\w-]*)", documented[name]))
        assert named <= taken, (name, named - taken)
        for action in sub._actions:
            if action.option_strings and "-h" not in action.option_strings:
                assert named & set(action.option_strings), (name, action.option_strings)


def test_every_summary_key_is_documented() -> None:
    """docs/output-directory.md's summary.json table lists every key summary.json has (top
    level, per seat)."""
    from brigade.inputs import schemas

    table = page("output-directory.md").split("| key | meaning |", 1)[1].split("\n\n", 1)[0]
    documented = set(re.findall(r"`(\w+)`", table))
    schema = schemas.schema("brigade.eval_summary.v1")
    assert set(schema["properties"]) <= documented
    seat = schema["$defs"]["seat_summary"]["properties"]
    assert set(seat) <= documented
    for name in ("usage_totals", "grader_usage"):
        assert set(schema["$defs"][name]["properties"]) <= documented, name
    assert set(seat["agent"]["properties"]) <= documented


def make_target(target: str) -> str:
    """The recipe of a Makefile target, one line."""
    text = (REPO / "Makefile").read_text()
    match = re.search(rf"^{target}:\n((?:\t.*\n)+)", text, re.M)
    assert match, target
    return match.group(1).strip()


def test_make_test_is_the_readme_test_command() -> None:
    assert make_target("test") == block_after("test-command")


def test_make_eval_keeps_brigades_exit_code_in_the_status_file(repo_copy: Path) -> None:
    shutil.copy(REPO / "Makefile", repo_copy / "Makefile")
    doit = f"{sys.executable} -m doit"
    done = subprocess.run(
        ["make", "eval", f"DOIT={doit}"], cwd=repo_copy, capture_output=True, text=True, timeout=180
    )
    assert done.returncode == 2  # make's own code for any failing recipe
    status = repo_copy / ".brigade" / "make-status"
    assert status.read_text() == "1\n"  # brigade's: the sloppy seat fails on purpose
    assert (repo_copy / ".brigade" / "evals" / "demo" / "report" / "junit.xml").exists()
    brigade = " ".join(brigade_command())
    report = subprocess.run(
        ["make", "report", f"BRIGADE={brigade}", "STATUS=out/status"],
        cwd=repo_copy,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert report.returncode == 2, report.stderr
    assert (repo_copy / "out" / "status").read_text() == "1\n"
    bad = subprocess.run(
        ["make", "eval", f"DOIT={doit}", "MANIFEST=nope.yaml"],
        cwd=repo_copy,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode == 2
    assert status.read_text() == "2\n"


def yaml_blocks(text: str, section: str) -> list[str]:
    """The YAML code blocks of a page's section (up to its next heading of that level)."""
    level = section.split(" ", 1)[0]
    text = text.split(section, 1)[1].split(f"\n{level} ", 1)[0]
    return re.findall(r"```yaml\n(.*?)\n```", text, re.S)


def test_the_ci_gate_jobs_parse_and_run_the_documented_compare_step() -> None:
    import yaml

    ci = page("ci.md")
    step = block_after("compare-gate", ci)
    github, gitlab = yaml_blocks(ci, "## Gating a pull request on regressions")
    steps = yaml.safe_load(github)["jobs"]["eval"]["steps"]
    runs = [s["run"].strip() for s in steps if "brigade compare" in s.get("run", "")]
    assert runs == [step]
    jobs = yaml.safe_load(gitlab)
    (line,) = [line for line in jobs["eval:merge-request"]["script"] if "brigade compare" in line]
    assert step.split(" >> ")[0] + " > compare.md" in line


def test_the_documented_compare_step_gates_two_real_batteries(tmp_path: Path) -> None:
    from test_compare import BASE_RATES, CASES, battery

    base = battery(tmp_path, "base", BASE_RATES)
    new = battery(tmp_path, "new", BASE_RATES | dict.fromkeys(CASES[:8], 0))
    project = tmp_path / "project"
    (project / ".brigade" / "evals").mkdir(parents=True)
    shutil.copytree(base, project / ".brigade" / "base")
    shutil.copytree(new, project / ".brigade" / "evals" / "demo")
    summary = tmp_path / "step-summary.md"
    step = block_after("compare-gate", page("ci.md"))
    step = step.replace(".venv/bin/brigade", " ".join(brigade_command()))
    done = subprocess.run(
        ["bash", "-c", step],
        cwd=project,
        env={**os.environ, "GITHUB_STEP_SUMMARY": str(summary)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1, done.stderr  # NEW is 40 points worse: beyond the 2-point margin
    assert summary.read_text().startswith(
        "### brigade compare: NEW is worse — gate regression (exit 1)\n"
    )
    assert (project / "compare.html").is_file()


def anchors(text: str) -> set[str]:
    """The anchors a Markdown page's headings get (as GitHub makes them)."""
    found = set()
    for heading in re.findall(r"^#+ (.+)$", re.sub(r"```.*?```", "", text, flags=re.S), re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        found.add(slug)
    return found


def test_every_link_of_the_docs_names_a_file_and_heading_that_exist() -> None:
    pages = [REPO / "README.md", REPO / "DEVELOPERS.md", *sorted(DOCS.rglob("*.md"))]
    for path in pages:
        text = path.read_text()
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target):
                continue  # https://...
            name, _, anchor = target.partition("#")
            linked = (path.parent / name).resolve() if name else path
            assert linked.exists(), f"{path.relative_to(REPO)}: {target}"
            if anchor:
                assert anchor in anchors(linked.read_text()), f"{path.relative_to(REPO)}: {target}"


def test_the_fixit_command_installs_the_pytest_the_demo_set_up_lacks() -> None:
    """The fixit grader runs `{python} -m pytest`: the demo's `pip install -e .` does not
    install pytest (a base dependency it is not), so the documented command does."""
    import tomllib

    import yaml

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert not [d for d in project["dependencies"] if re.match(r"pytest\b", d)]
    fixit = yaml.safe_load((REPO / "manifests" / "fixit.yaml").read_text())
    (grader,) = fixit["cases"][0]["graders"]
    assert grader["command"][:3] == ["{python}", "-m", "pytest"]
    assert block_after("fixit-command").startswith(".venv/bin/pip install pytest && ")


def test_the_first_manifest_and_roster_of_the_readme_are_valid(tmp_path: Path) -> None:
    """README's example of one's own manifest and roster validate together, without a warning."""
    manifest, roster = yaml_blocks(README, "## In your own repository")
    (tmp_path / "evals").mkdir()
    (tmp_path / "evals" / "manifest.yaml").write_text(manifest + "\n")
    (tmp_path / "evals" / "roster.yaml").write_text(roster + "\n")
    done = subprocess.run(
        [*brigade_command(), "validate", "--strict", "evals/manifest.yaml"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr


def test_the_manifest_and_roster_of_their_pages_are_valid_together(tmp_path: Path) -> None:
    """docs/manifest.md's example manifest names the seats of docs/roster.md's example
    roster; with the files it names, the two validate together without a warning."""
    (manifest,) = re.findall(r"```yaml\n(.*?)\n```", page("manifest.md"), re.S)
    (roster,) = re.findall(r"```yaml\n(.*?)\n```", page("roster.md"), re.S)
    (tmp_path / "manifest.yaml").write_text(manifest + "\n")
    (tmp_path / "roster.yaml").write_text(roster + "\n")
    (tmp_path / "cases").mkdir()
    (tmp_path / "cases" / "report.prompt.md").write_text("Write the report.\n")
    app = tmp_path / "repos" / "app"
    app.mkdir(parents=True)
    git(app, "init", "-q")
    (app / "app.py").write_text("print('app')\n")
    git(app, "add", "-A")
    git(app, "commit", "-qm", "app")
    git(app, "tag", "v1.2")
    done = subprocess.run(
        [*brigade_command(), "validate", "--strict", "manifest.yaml"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "2 case(s) x 2 seat(s) = 16 cell(s)" in done.stdout

def test_doit_where_there_is_no_dodo_is_as_documented(tmp_path: Path, repo_copy: Path) -> None:
    """README says what `doit` does in a folder without a dodo.py (doit's own error, exit 3)
    and how to reach one from a subfolder (`doit -k`), where relative paths on the command
    line stay relative to the subfolder."""
    doit = [sys.executable, "-m", "doit"]
    empty = tmp_path / "empty"
    empty.mkdir()
    done = subprocess.run(doit, cwd=empty, capture_output=True, text=True, timeout=60)
    assert done.returncode == 3
    assert f"ERROR: Could not find dodo file '{empty / 'dodo.py'}'" in done.stderr
    assert "`ERROR: Could not find dodo file '.../dodo.py'`" in " ".join(README.split())
    assert not list(empty.iterdir())  # nothing written
    sub = repo_copy / "sub"
    sub.mkdir()
    listed = subprocess.run(
        [*doit, "-k", "list"], cwd=sub, capture_output=True, text=True, timeout=120
    )
    assert listed.returncode == 0, listed.stderr
    assert "cell:" in listed.stdout
    missing = subprocess.run(
        [*doit, "-k", "list", "manifest=nothere.yaml"],
        cwd=sub,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert missing.returncode == 2
    assert missing.stderr == f"brigade: {sub / 'nothere.yaml'}: file not found\n"


def test_the_contracts_name_exactly_the_states_and_identity_fields_of_the_code() -> None:
    """docs/contracts/ is what the code cites: its state table is taxonomy's terminal
    states with their exit buckets, its identity list identity's payload fields."""
    from brigade.core import identity, taxonomy

    outcome = page("contracts/outcome-taxonomy.md")
    rows = re.findall(r"^\| `(\w+)` \|.*\| ([\d, a-z]+) \|$", outcome, re.M)
    assert {state for state, _ in rows} == set(taxonomy.TERMINAL)
    for state, bucket in rows:
        real = taxonomy.exit_bucket([(state, None)])
        timed_out = taxonomy.exit_bucket([(state, "timeout")])
        assert bucket == (
            str(real) if real == timed_out else f"{real}, or {timed_out} when timed out"
        )
    cell = page("contracts/cell-identity-and-resume.md")
    fields = cell.split("## Cell identity", 1)[1].split("\n\n## ", 1)[0]
    named = re.findall(r"^- `([\w.]+)`:", fields, re.M)
    payload = identity.identity_payload(
        case_id="c",
        prompt="p",
        seat=dict.fromkeys(identity.SEAT_KEYS),
        trial=1,
        graders=[],
        execution_mode="read-only",
    )
    fields_of_code = []
    for key, value in payload.items():  # case.id, seat.model, ...: one level down
        fields_of_code += [f"{key}.{sub}" for sub in value] if isinstance(value, dict) else [key]
    assert sorted(named) == sorted(fields_of_code)
    assert identity.CELL_SCHEMA in fields


def test_the_two_repository_battery_runs_as_documented(repo_copy: Path) -> None:
    """docs/coding-benchmarks.md's battery over two git repositories, with exactly the
    documented commands, right after the README's set-up (pytest is already there: pip
    installs nothing, and needs no network)."""
    import shlex

    make, both = block_after("coding-command", page("coding-benchmarks.md")).splitlines()
    assert shlex.split(make) == [".venv/bin/python", "manifests/make_repos.py"]
    install, run = both.split(" && ")
    assert shlex.split(install) == [".venv/bin/pip", "install", "pytest"]
    made = subprocess.run(
        [sys.executable, "manifests/make_repos.py"],
        cwd=repo_copy,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert made.returncode == 0, made.stderr
    repos = repo_copy / ".brigade" / "repos"
    assert sorted(p.name for p in repos.iterdir()) == ["fixit", "shop"]
    pip = [sys.executable, "-m", "pip", "install", "-q", "--no-index", "pytest"]
    assert subprocess.run(pip, capture_output=True, text=True, timeout=120).returncode == 0
    documented = shlex.split(run)
    assert documented[0] == ".venv/bin/brigade"
    command = [*brigade_command(), *documented[1:]]
    for _ in range(2):  # the second run: nothing runs, the same verdict
        done = subprocess.run(command, cwd=repo_copy, capture_output=True, text=True, timeout=300)
        assert done.returncode == 1, done.stderr
    out = repo_copy / ".brigade" / "evals" / "coding"
    plan = json.loads((out / "plan.json").read_text())
    states = {
        cell["coordinate"]: json.loads((out / "cells" / cell["cell_id"] / "cell.json").read_text())[
            "state"
        ]
        for cell in plan["cells"]
    }
    assert states == {
        "fix-add:fixer:1": "accepted",
        "fix-add:hasty:1": "rejected",
        "fix-total:fixer:1": "accepted",
        "fix-total:hasty:1": "accepted",
    }
    assert "[1/4]" not in done.stderr  # the second run ran no cell
    # each case's repository at the sha its tag names
    tags = {name: git(repos / name, "rev-parse", "v1").strip() for name in ("fixit", "shop")}
    worlds = {cell["case_id"]: cell["workspace"] for cell in plan["cells"]}
    assert worlds["fix-add"] == {"repo": str(repos / "fixit"), "commit": tags["fixit"]}
    assert worlds["fix-total"]["commit"] == tags["shop"]
    # one build per repository; the shop's setup built its catalogue there, not in the
    # repository, and neither repository changed
    assert len(list((out / "workspaces").iterdir())) == 2
    for name in ("fixit", "shop"):
        assert git(repos / name, "status", "--porcelain") == ""
        assert git(repos / name, "rev-list", "--count", "HEAD").strip() == "1"
    assert not (repos / "shop" / "build").exists()
    assert "return a - b" in (repos / "fixit" / "calc.py").read_text()
    # the script again: both left as they are (the same commits)
    again = subprocess.run(
        [sys.executable, "manifests/make_repos.py"], cwd=repo_copy, capture_output=True, text=True
    )
    assert again.returncode == 0 and again.stdout.count("left as it is") == 2, again.stdout
    # a commit, its tag moved: that case's setup and cells run again, its old cells stale
    git(repos / "shop", "commit", "-q", "--allow-empty", "-m", "v1, again")
    git(repos / "shop", "tag", "-f", "v1")
    moved = subprocess.run(command, cwd=repo_copy, capture_output=True, text=True, timeout=300)
    assert moved.returncode == 1, moved.stderr
    assert "2 stale cells from an earlier plan " in moved.stderr  # (the manifest is the same)
    assert moved.stderr.count("fix-total:") == 2 and "fix-add:" not in moved.stderr
    assert len(list((out / "workspaces").iterdir())) == 3

    # the SWE-bench example over the same repositories, its commands as written
    imported, ran = (
        [*brigade_command(), *shlex.split(line)[1:]]
        for line in block_after("swebench-command", page("coding-benchmarks.md")).splitlines()
    )
    made = subprocess.run(imported, cwd=repo_copy, capture_output=True, text=True, timeout=120)
    assert made.returncode == 0, made.stderr
    assert made.stderr == (
        "brigade: wrote .brigade/swebench.yaml: 2 case(s) from manifests/swebench.jsonl\n"
    )
    refused = subprocess.run(imported, cwd=repo_copy, capture_output=True, text=True)
    assert refused.returncode == 2 and "never overwrites" in refused.stderr, refused.stderr
    done = subprocess.run(ran, cwd=repo_copy, capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, done.stderr
    out = repo_copy / ".brigade" / "evals" / "swebench"
    receipts = {
        receipt["coordinate"]: receipt
        for receipt in (
            json.loads(path.read_text()) for path in (out / "cells").glob("*/cell.json")
        )
    }
    assert {c: r["state"] for c, r in receipts.items()} == {
        "example__fixit-1:fixer:1": "accepted",
        "example__fixit-1:hasty:1": "rejected",
        "example__shop-1:fixer:1": "accepted",
        "example__shop-1:hasty:1": "accepted",
    }
    checks = receipts["example__fixit-1:hasty:1"]["graders"][0]["component_checks"]
    assert [c["name"] for c in checks if not c["passed"]] == [
        "exit status",
        "test_more.test_negatives",
    ]
    # the test patches reached neither repository
    assert not (repos / "fixit" / "test_more.py").exists()
    assert not (repos / "shop" / "test_more.py").exists()


def test_every_adapters_oldest_version_is_stated_as_it_is_defined() -> None:
    """README and docs/roster.md name each adapter's minimum version (adapters/versions.py's
    min_version) and the adapters without one; docs/faults.md lists every fault kind."""
    from typing import get_args

    from brigade.adapters import adapter_for, built_in
    from brigade.core.taxonomy import FaultKind

    stated = " ".join(
        README.split("The oldest version of", 1)[1].split("`brigade doctor`")[0].split()
    )
    roster = page("roster.md")
    unknown = []
    # ollama seats name their model in the CLI (`ollama:llama3.2`)
    for name in [*built_in(), "ollama"]:
        minimum = adapter_for("ollama:m" if name == "ollama" else name).min_version
        if minimum is None:
            unknown.append(name)
            continue
        assert f"{name} {minimum}" in stated, name
        assert f"| `{name}` | {minimum} |" in roster, name
    assert f"for {', '.join(unknown[:-1])} and {unknown[-1]} none is known" in stated
    assert f"| {', '.join(f'`{n}`' for n in unknown)} | not known |" in roster
    faults = page("faults.md")
    from brigade.core.taxonomy import FAILURE_REASONS

    for kind in get_args(FaultKind):
        assert f"| `{kind}` |" in faults, kind
        # the table's state and failure_reason columns are the taxonomy's
        row = re.search(rf"^\| `{kind}` \|.*\| (\w+) \| (\S+) \|$", faults, re.M)
        assert row, kind
        state = "execution_error" if kind == "timeout" else "adapter_error"
        reason = FAILURE_REASONS.get(kind)
        assert row.groups() == (state, f"`{reason}`" if reason else "—"), kind
