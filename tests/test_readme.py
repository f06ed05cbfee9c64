"""README.md stays true: the demo runs as documented and CI runs the documented test command."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from conftest import REPO, brigade_command

README = (REPO / "README.md").read_text()


def block_after(marker: str) -> str:
    match = re.search(rf"<!-- {marker} -->\s*```sh\n(.*?)\n```", README, re.S)
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
    commands = README.split("## Commands", 1)[1].split("##", 1)[0]
    names = re.findall(r"^brigade (\w+)", commands, re.M)
    assert len(names) >= 7
    for name in names:
        done = subprocess.run(
            [*brigade_command(), name, "--help"], capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, name
        assert done.stdout.startswith("usage: brigade " + name)


def test_every_summary_key_is_documented() -> None:
    """README's summary.json table lists every key summary.json has (top level, per seat)."""
    from brigade.inputs import schemas

    table = README.split("| key | meaning |", 1)[1].split("\n\n", 1)[0]
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


def yaml_blocks(section: str) -> list[str]:
    """The YAML code blocks of a README section (up to the next heading of its level)."""
    text = README.split(section, 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```yaml\n(.*?)\n```", text, re.S)


def test_the_ci_gate_jobs_parse_and_run_the_documented_compare_step() -> None:
    import yaml

    step = block_after("compare-gate")
    github, gitlab = yaml_blocks("### Gating a pull request on regressions")
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
    step = block_after("compare-gate").replace(".venv/bin/brigade", " ".join(brigade_command()))
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
