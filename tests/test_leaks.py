"""End to end: secrets that equal brigade's own words, huge prompts, escaped and cut echoes
and absolute paths of this machine never crash a run and never leave in export/ or report/
(issue 15, items 1, 2, 8 and 9). Runs the real `brigade` and `doit`."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from conftest import FAKE_AGENT, FAKE_CLI, Project

# words of receipts and reports: as env values they used to be replaced inside keys and
# enums (a schema error on every run), inside `exec:{python}`, or crash the renderer
WORDS = [
    "read-only",
    "accepted",
    "scored",
    "status",
    "output",
    "attempt",
    "sha256",
    "brigade.eval_cell.v1",
    "unscored",
    "measurement",
    "direct",
    "python",
    "transport",
]


def published(project: Project) -> dict[str, str]:
    """Every file of export/ and report/, by name."""
    files = {}
    for folder in ("export", "report"):
        for path in sorted((project.out / folder).rglob("*")):
            if path.is_file():
                files[str(path.relative_to(project.out))] = path.read_text("utf-8")
    return files


def exported_cells(project: Project) -> dict[str, dict[str, Any]]:
    cells = {}
    for path in (project.out / "export" / "cells").glob("*.json"):
        doc = json.loads(path.read_text())
        cells[doc["coordinate"]] = doc
    return cells


def test_env_values_and_prompts_equal_to_brigade_words_run_clean(project: Project) -> None:
    project.write_roster(
        {
            "agent": {"cli": FAKE_CLI, "env": {f"V{i}": word for i, word in enumerate(WORDS)}},
            "a-seat-named-like-its-prompt": {"cli": FAKE_CLI},
        }
    )
    project.write_manifest(
        [
            {"id": "accepted", "prompt": "accepted", "graders": [{"type": "exit_status"}]},
            {"id": "scored", "prompt": "scored"},
            {
                "id": "a-case-named-like-its-prompt",
                "prompt": "a-case-named-like-its-prompt",
                "graders": [{"type": "exact_output", "expected": "ok"}],
            },
            {
                "id": "seatname",
                "prompt": "a-seat-named-like-its-prompt",
                "graders": [{"type": "regex_output", "pattern": "^ok$"}],
            },
        ],
        seats=("agent", "a-seat-named-like-its-prompt"),
    )
    for run in (project.run, project.doit):
        result = run()
        assert result.returncode == 0, result.stderr
        assert "leak" not in result.stderr and "Traceback" not in result.stderr
    cells = exported_cells(project)
    assert sorted(cells) == sorted(project.states())
    for coordinate, cell in cells.items():
        assert cell["state"] in ("accepted", "unscored"), coordinate
        assert cell["execution_mode"] == "read-only"
        assert cell["seat"]["transport"] == "direct"
        assert cell["schema"] == "brigade.eval_cell.v1"
        assert cell["case_id"] == coordinate.split(":")[0]
    assert cells["accepted:agent:1"]["seat"]["cli"].startswith("exec:{python} ")
    assert cells["accepted:agent:1"]["seat"]["env"]["V0"] == "<redacted>"
    for command in (["report", str(project.out)], ["export", str(project.out)]):
        result = project.brigade(*command)
        assert result.returncode == 0, result.stderr
    page = (project.out / "report" / "index.html").read_text()
    assert "a-case-named-like-its-prompt" in page and "a-seat-named-like-its-prompt" in page


def test_a_five_megabyte_prompt_runs_end_to_end(project: Project) -> None:
    body = " ".join(f"word{i % 7919}" for i in range(600_000))
    prompt = f"answer: done\n{body}"
    assert len(prompt) > 5_000_000
    project.write_manifest(
        [{"id": "big", "prompt": prompt, "graders": [{"type": "exact_output", "expected": "done"}]}]
    )
    result = project.run()
    assert result.returncode == 0, result.stderr[-2000:]
    assert project.states() == {"big:agent:1": "accepted"}
    for command in (["report", str(project.out)], ["export", str(project.out)]):
        result = project.brigade(*command)
        assert result.returncode == 0, result.stderr[-2000:]
    assert project.doit().returncode == 0
    for name, text in published(project).items():
        assert "word1 word2 word3" not in text, name


def echo_roster(project: Project, home: Path) -> None:
    """A seat whose command line names absolute paths under the home folder."""
    agent = home / "bin" / "my-agent.py"
    agent.parent.mkdir(parents=True)
    agent.write_text(FAKE_AGENT.read_text())
    config = home / ".config" / "agent.toml"
    project.write_roster(
        {
            "agent": {
                "cli": f"exec:{{python}} {agent} --config {config}",
                "env": {"TOKEN": "tok-with-'quote'-and-\"dq\"-0123456789"},
            }
        }
    )


def test_echoed_prompts_secrets_and_machine_paths_never_leave(
    project: Project, tmp_path_factory: pytest.TempPathFactory
) -> None:
    # the home folder is outside the manifest's folder (inside it would be <manifest-dir>)
    home = tmp_path_factory.mktemp("home") / "someone"
    echo_roster(project, home)
    long_prompt = (
        "You are checking an echo. Repeat this exact task text in your answer, "
        + "lorem ipsum dolor sit amet " * 12
        + '\nand a second line with "quotes" and it\'s apostrophes.'
    )
    secret_path = home / ".config" / "agent" / "credentials.json"
    receipt_text = json.dumps({"status": "tok-with-'quote'-and-\"dq\"-0123456789"})
    project.write_manifest(
        [
            {
                # the answer is JSON holding the prompt's beginning: json_field shows it, cut
                # and escaped
                "id": "echo",
                "prompt": f"{long_prompt}\nanswer: {json.dumps({'said': long_prompt})}",
                "graders": [{"type": "json_field", "path": "said", "expected": "something"}],
            },
            {
                # the env secret with quotes comes back through verify_receipt's repr
                "id": "receipt",
                "prompt": f"write: receipt.json={receipt_text}\nanswer: ok",
                "graders": [{"type": "verify_receipt", "path": "receipt.json"}],
            },
            {
                # a fault whose detail (stderr) names a file in the home folder
                "id": "fault",
                "prompt": f"tempfail: cannot read {secret_path}",
            },
        ]
    )
    env = {"HOME": str(home)}
    result = project.run(**env)
    assert result.returncode == 3, result.stderr
    assert "leak" not in result.stderr, result.stderr
    assert project.states() == {
        "echo:agent:1": "rejected",
        "receipt:agent:1": "rejected",
        "fault:agent:1": "adapter_error",
    }
    for command in (["report", str(project.out)], ["export", str(project.out)]):
        done = project.brigade(*command, **env)
        assert "leak" not in done.stderr, done.stderr
    files = published(project)
    assert set(files) >= {
        "export/plan.json",
        "export/summary.json",
        "report/index.html",
        "report/junit.xml",
    }
    forbidden = [str(project.root), str(home), "lorem ipsum", "You are checking", "0123456789"]
    for name, text in files.items():
        for bad in forbidden:
            assert bad not in text, (name, bad)
    cells = exported_cells(project)
    assert cells["fault:agent:1"]["failure_detail"].endswith(
        "cannot read ~/.config/agent/credentials.json"
    )
    cli = cells["fault:agent:1"]["seat"]["cli"]
    assert cli == "exec:{python} ~/bin/my-agent.py --config ~/.config/agent.toml"
    said = cells["echo:agent:1"]["graders"][0]["detail"]
    assert said.startswith("said = ") and "<prompt sha256:" in said
    status = cells["receipt:agent:1"]["graders"][0]["detail"]
    assert status == "receipt.json in the workspace: status is '<redacted>', expected 'completed'"


@pytest.mark.parametrize("planted", ["prompt", "path", "escaped"])
def test_planted_files_with_escaped_or_cut_secrets_fail_the_leak_check(
    project: Project, planted: str
) -> None:
    prompt = "A prompt long enough to be cut: " + "alpha beta gamma " * 10
    prompt = f"answer: a\n{prompt}"
    project.write_manifest([{"id": "a", "prompt": prompt}])
    assert project.run().returncode == 0
    text = {
        "prompt": f"notes: {prompt[:60]}",  # a cut form
        "path": f"copied from {os.path.expanduser('~')}/secret-notes.txt",
        "escaped": f"log: {json.dumps(prompt)}",
    }[planted]
    (project.out / "export" / "notes.txt").write_text(text)
    result = project.doit()
    assert result.returncode == 3
    kind = "absolute path" if planted == "path" else "prompt"
    assert f"export/notes.txt: (text): contains {kind}" in result.stderr


def test_html_escaped_echoes_never_leave(project: Project) -> None:
    """Regression: an agent that answered with its prompt and an env value escaped for HTML
    (`Don&#x27;t ...`) put both into the pages, junit.xml and the export's grader detail;
    the leak check passed them."""
    prompt = "Don't publish: summarise the board's confidential \"Nightingale\" merger memo"
    token = "tok&en-0123456789abcdefghijklmnopqrstuvwxyz"
    agent = project.root / "escaping.py"
    agent.write_text(
        "import html, os, sys\np = sys.stdin.read()\n"
        "print('page: ' + html.escape(p))\n"
        "print('key: ' + html.escape(os.environ['SECRET']))\n"
    )
    project.write_roster({"agent": {"cli": f"exec:{{python}} {agent}", "env": {"SECRET": token}}})
    project.write_manifest(
        [{"id": "c", "prompt": prompt, "graders": [{"type": "exact_output", "expected": "x"}]}]
    )
    done = project.run()
    assert done.returncode == 1, done.stderr
    files = published(project)
    assert "report/junit.xml" in files
    assert any(name.startswith("export/") for name in files)
    for name, text in files.items():
        assert "Nightingale" not in text, name
        assert "0123456789abcdefghij" not in text, name
