"""Projection of receipts and plans for export, and the leak check that proves it."""

from __future__ import annotations

import copy
import html
import json
import os
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape as xml_escape

import pytest

from brigade.core.identity import text_digest
from brigade.core.plan import Plan, build_plan
from brigade.core.projection import (
    PLAN_ROLES,
    RECEIPT_ROLES,
    REDACTED,
    SUMMARY_ROLES,
    WINDOW,
    Leak,
    blank_text,
    find_leaks_in_json,
    find_leaks_in_text,
    make_secrets,
    project_plan,
    project_receipt,
    project_summary,
    project_text,
    scrub_text,
)
from brigade.core.summary import build_summary
from brigade.inputs import schemas
from brigade.inputs.manifest import manifest_from_document
from brigade.inputs.roster import roster_from_document
from brigade.run.context import RunContext
from brigade.run.runner import running_receipt

PROMPT = "Summarise the design document in three bullet points."
TOKEN = "tok-secret-123456"


def make_plan(root: Path, mode: str = "on") -> Plan:
    roster = roster_from_document(
        {
            "schema": "brigade.roster.v1",
            "seats": {
                "agent": {
                    "cli": "exec:{python} -c pass",
                    "model": "m1",
                    "env": {"API_TOKEN": TOKEN, "MODE": mode},
                }
            },
        },
        root / "roster.yaml",
        "roster.yaml",
    )
    manifest = manifest_from_document(
        {
            "schema": "brigade.eval_manifest.v1",
            "name": "proj",
            "seats": ["agent"],
            "cases": [
                {"id": "sum", "prompt": PROMPT, "graders": [{"type": "exit_status"}]},
                {"id": "hi", "prompt": "Hi"},
            ],
        },
        root / "manifest.yaml",
        "manifest.yaml",
    )
    context = {
        "manifest": str(root / "manifest.yaml"),
        "roster": str(root / "roster.yaml"),
        "workspace": str(root / "ws"),
    }
    return build_plan(manifest, roster, "roster.yaml", None, context)


def secrets_for(root: Path, plan: Plan):
    out = root / "ws" / ".brigade" / "evals" / "proj"
    return make_secrets(
        prompts={cell.prompt for cell in plan.cells},
        paths=[(str(out), "."), (str(root / "ws"), "<workspace>"), (str(root), "<manifest-dir>")],
        env_values={v for cell in plan.cells for v in cell.seat.env.values()},
    )


def finished_receipt(root: Path, plan: Plan) -> dict[str, Any]:
    out = root / "ws" / ".brigade" / "evals" / "proj"
    cell = plan.cells[0]
    ctx = RunContext(
        out=out, workspace=root / "ws", manifest_dir=root, manifest_digest=plan.manifest_digest
    )
    receipt = running_receipt(ctx, cell, 2, "2025-01-01T00:00:00.000Z")
    run_dir = out / "cells" / cell.cell_id / "attempts" / "attempt-002" / "run"
    digest = "sha256:" + "0" * 64
    receipt.update(
        {
            "state": "accepted",
            "finished_at": "2025-01-01T00:00:01.000Z",
            "exit_code": 0,
            "duration_seconds": 1.0,
            "run_dir": str(run_dir),
            "graders": [
                {
                    "schema": "brigade.grader_result.v1",
                    "grader_id": "exit_status:0",
                    "grader_type": "exit_status",
                    "version": "1",
                    "status": "scored",
                    "score": 1.0,
                    "score_min": 0,
                    "score_max": 1,
                    "detail": "exit status 0, expected 0",
                    "component_checks": [],
                    "duration_seconds": 0.0,
                    "cell_id": cell.cell_id,
                    "output_digest": digest,
                    "output_refs": [str(run_dir / "final.txt")],
                }
            ],
            "output_digest": digest,
            "score": 1.0,
            "acceptance": {
                "accepted": True,
                "graders_total": 1,
                "graders_passed": 1,
                "graders_errored": 0,
            },
        }
    )
    assert schemas.problems(receipt, "brigade.eval_cell.v1") == []
    return receipt


# --- project_receipt ---------------------------------------------------------


def test_receipt_keeps_prompt_before_projection(tmp_path: Path) -> None:
    plan = make_plan(tmp_path)
    receipt = finished_receipt(tmp_path, plan)
    assert receipt["prompt"] == PROMPT
    assert receipt["case"] == {"id": "sum", "prompt": PROMPT}
    leaks = find_leaks_in_json("cell.json", receipt, secrets_for(tmp_path, plan))
    assert {(leak.where, leak.kind) for leak in leaks} == {
        ("prompt", "prompt"),
        ("case.prompt", "prompt"),
        ("seat.env.API_TOKEN", "env value"),
        ("run_dir", "absolute path"),
        ("graders[0].output_refs[0]", "absolute path"),
    }


def test_project_receipt(tmp_path: Path) -> None:
    plan = make_plan(tmp_path)
    receipt = finished_receipt(tmp_path, plan)
    original = copy.deepcopy(receipt)
    secrets = secrets_for(tmp_path, plan)
    out = str(tmp_path / "ws" / ".brigade" / "evals" / "proj")
    projected = project_receipt(receipt, out, secrets)

    assert receipt == original  # the receipt itself is untouched
    assert "prompt" not in projected
    assert projected["prompt_digest"] == text_digest(PROMPT)
    assert projected["case"] == {"id": "sum", "prompt_digest": text_digest(PROMPT)}
    assert projected["seat"]["env"] == {"API_TOKEN": REDACTED, "MODE": REDACTED}
    assert projected["seat"]["model"] == "m1"
    cell_id = plan.cells[0].cell_id
    run_dir = os.path.join("cells", cell_id, "attempts", "attempt-002", "run")
    assert projected["run_dir"] == run_dir
    assert projected["graders"][0]["output_refs"] == [os.path.join(run_dir, "final.txt")]
    assert find_leaks_in_json("cell.json", projected, secrets) == []
    assert schemas.problems(projected, "brigade.eval_cell.v1") == []


def test_project_receipt_keeps_other_fields(tmp_path: Path) -> None:
    plan = make_plan(tmp_path)
    receipt = finished_receipt(tmp_path, plan)
    out = str(tmp_path / "ws" / ".brigade" / "evals" / "proj")
    projected = project_receipt(receipt, out, secrets_for(tmp_path, plan))
    changed = {"prompt", "prompt_digest", "case", "seat", "run_dir", "graders"}
    assert {k: v for k, v in projected.items() if k not in changed} == {
        k: v for k, v in receipt.items() if k not in changed
    }


def test_project_running_receipt(tmp_path: Path) -> None:
    plan = make_plan(tmp_path)
    receipt = finished_receipt(tmp_path, plan)
    running = {
        k: receipt[k]
        for k in (
            "schema",
            "cell_id",
            "coordinate",
            "case_id",
            "case",
            "prompt",
            "seat",
            "trial",
            "grader_specs",
            "execution_mode",
            "attempt",
            "started_at",
            "manifest_digest",
        )
    }
    running["state"] = "running"
    projected = project_receipt(running, "/nowhere", secrets_for(tmp_path, plan))
    assert "run_dir" not in projected
    assert projected["prompt_digest"] == text_digest(PROMPT)
    assert schemas.problems(projected, "brigade.eval_cell.v1") == []


def test_short_env_value_does_not_redact_unrelated_fields(tmp_path: Path) -> None:
    plan = make_plan(tmp_path, mode="1")
    receipt = finished_receipt(tmp_path, plan)
    out = str(tmp_path / "ws" / ".brigade" / "evals" / "proj")
    projected = project_receipt(receipt, out, secrets_for(tmp_path, plan))
    assert projected["seat"]["env"] == {"API_TOKEN": REDACTED, "MODE": REDACTED}
    assert projected["graders"][0]["version"] == "1"


def test_a_cases_workspace_keeps_its_commit_and_projects_its_repository(
    tmp_path: Path,
) -> None:
    """A commit or a digest is a name: kept even when a secret's value happens to equal it
    (a credential of 40 hex digits); the repository's path is projected like any path."""
    plan = make_plan(tmp_path)
    receipt = finished_receipt(tmp_path, plan)
    commit = "0123456789abcdef0123456789abcdef01234567"
    setup = "sha256:" + "ab" * 32
    receipt["workspace"] = {"repo": "/data/clones/calc", "commit": commit, "setup": setup}
    secrets = make_secrets(
        prompts={PROMPT}, paths=[("/data/clones", "<repos>")], env_values={commit, setup}
    )
    projected = project_receipt(receipt, "/nowhere", secrets)
    assert projected["workspace"] == {"repo": "<repos>/calc", "commit": commit, "setup": setup}


# --- project_plan -------------------------------------------------------------


def test_project_plan(tmp_path: Path) -> None:
    plan = make_plan(tmp_path)
    doc = plan.document()
    secrets = secrets_for(tmp_path, plan)
    assert {leak.where for leak in find_leaks_in_json("plan.json", doc, secrets)} >= {
        "cells[0].prompt",
        "cells[0].case.prompt",
        "cells[1].prompt",
        "cells[1].case.prompt",
        "cells[0].seat.env.API_TOKEN",
        "context.manifest",
    }
    projected = project_plan(doc, secrets)
    for cell, original in zip(projected["cells"], plan.cells, strict=True):
        assert "prompt" not in cell
        assert cell["prompt_digest"] == text_digest(original.prompt)
        assert cell["case"] == {"id": original.case_id, "prompt_digest": cell["prompt_digest"]}
        assert cell["seat"]["env"] == {"API_TOKEN": REDACTED, "MODE": REDACTED}
        assert cell["cell_id"] == original.cell_id
    assert projected["context"] == {
        "manifest": "<manifest-dir>/manifest.yaml",
        "roster": "<manifest-dir>/roster.yaml",
        "workspace": "<workspace>",
    }
    assert find_leaks_in_json("plan.json", projected, secrets) == []
    assert schemas.problems(projected, "brigade.eval_plan.v1") == []
    assert doc == plan.document()  # the input is not modified


def test_project_summary_scrubs_strings(tmp_path: Path) -> None:
    plan = make_plan(tmp_path)
    secrets = secrets_for(tmp_path, plan)
    summary = {"name": "proj", "note": f"ran in {tmp_path / 'ws'}", "counts": {"accepted": 1}}
    assert project_summary(summary, secrets) == {
        "name": "proj",
        "note": "ran in <workspace>",
        "counts": {"accepted": 1},
    }


# --- scrub_text and the leak check ---------------------------------------------


def test_scrub_text(tmp_path: Path) -> None:
    secrets = make_secrets(
        prompts={PROMPT},
        paths=[("/data/out", "."), ("/data", "<workspace>")],
        env_values={TOKEN, "1"},
    )
    assert scrub_text("/data/out/cells/x", secrets) == "cells/x"
    assert scrub_text("/data/out", secrets) == "."
    assert scrub_text("/data/src/a.py", secrets) == "<workspace>/src/a.py"
    assert scrub_text(f"said: {PROMPT}", secrets) == f"said: <prompt {text_digest(PROMPT)}>"
    assert scrub_text(f"Bearer {TOKEN}", secrets) == f"Bearer {REDACTED}"
    assert scrub_text("1", secrets) == "1"  # too short to be searched for
    assert scrub_text("c:agent:1", secrets) == "c:agent:1"


def test_prompt_containing_a_path_is_scrubbed_whole() -> None:
    prompt = "Fix the bug in /data/ws/src/x.py and explain it."
    secrets = make_secrets(prompts={prompt}, paths=[("/data/ws", "<workspace>")], env_values=())
    assert scrub_text(f"echo: {prompt}", secrets) == f"echo: <prompt {text_digest(prompt)}>"


def test_find_leaks_names_the_json_path() -> None:
    secrets = make_secrets(prompts={PROMPT}, paths=[("/data/out", ".")], env_values={TOKEN, "on"})
    doc = {
        "cells": [
            {"graders": [{"detail": "ok"}, {"detail": f"output was {PROMPT!r}"}]},
            {"run_dir": "/data/out/cells/x", "flag": "on", "coordinate": "a:on:1"},
        ],
        "header": {"Authorization": f"Bearer {TOKEN}"},
        "/data/out/key": 1,
        "odd key": PROMPT,
    }
    leaks = find_leaks_in_json("export/plan.json", doc, secrets)
    assert sorted(leaks, key=str) == [
        Leak("export/plan.json", '["/data/out/key"] (key)', "absolute path"),
        Leak("export/plan.json", '["odd key"]', "prompt"),
        Leak("export/plan.json", "cells[0].graders[1].detail", "prompt"),
        Leak("export/plan.json", "cells[1].run_dir", "absolute path"),
        Leak("export/plan.json", "header.Authorization", "env value"),
    ]
    assert str(leaks[0]).startswith("export/plan.json: ")


def test_short_prompts_match_whole_strings_and_short_env_values_nowhere() -> None:
    secrets = make_secrets(prompts={"Hi"}, paths=[], env_values={"abcde", "1"})
    doc = {
        "coordinate": "hi:agent:1",
        "values": ["abcdef", "xabcde", "Hi there", "1x"],
        "exact_env": "abcde",
        "exact_one": "1",
        "exact_prompt": "Hi",
    }
    leaks = find_leaks_in_json("x.json", doc, secrets)
    assert sorted((leak.where, leak.kind) for leak in leaks) == [("exact_prompt", "prompt")]


def test_long_secrets_match_inside_strings() -> None:
    secrets = make_secrets(prompts=set(), paths=[], env_values={"abcdef"})
    leaks = find_leaks_in_json("x.json", {"v": "--abcdef--"}, secrets)
    assert leaks == [Leak("x.json", "v", "env value")]


def test_non_string_values_are_not_leaks() -> None:
    secrets = make_secrets(prompts={"12"}, paths=[], env_values={"1"})
    assert find_leaks_in_json("x.json", {"a": 1, "b": 12, "c": [True, None, 1.0]}, secrets) == []


def test_find_leaks_in_text() -> None:
    secrets = make_secrets(prompts={PROMPT, "Hi"}, paths=[("/data/out", ".")], env_values={"1"})
    text = f"log: Hi\nprompt: {PROMPT}\nat /data/out/x 1\n"
    assert sorted(find_leaks_in_text("log.txt", text, secrets), key=str) == [
        Leak("log.txt", "(text)", "absolute path"),
        Leak("log.txt", "(text)", "prompt"),
    ]


def test_make_secrets_drops_useless_values() -> None:
    secrets = make_secrets(
        prompts={"", "  ", "real"},
        paths=[("", "."), ("/", "."), ("/a", "."), ("/data/out/", "."), ("//x//y/", "y")],
        env_values={"", " ", "v"},
    )
    assert secrets.prompts == {"real"}
    assert secrets.env_values == {"v"}
    assert secrets.paths == (("/data/out", "."), ("//x/y", "y"))


# --- roles: names, enums, digests and keys are never touched (issue 15, item 1) ---------

# words of brigade's own documents an env value or a prompt may happen to equal
VOCABULARY = [
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
    "redacted",
    "prompt",
    "grader_id",
    "exit_status",
    "exit status 0, expected 0",
    "2025-01-01",
    "cells",
    "agent",
    "sum",
]


def strings_of(value: Any) -> set[str]:
    """Every key and string value of a JSON value."""
    if isinstance(value, str):
        return {value}
    if isinstance(value, dict):
        return set(value) | {s for item in value.values() for s in strings_of(item)}
    if isinstance(value, list):
        return {s for item in value for s in strings_of(item)}
    return set()


def test_every_word_of_a_receipt_as_env_value_or_prompt_keeps_names(tmp_path: Path) -> None:
    """Whatever word of a receipt, plan or summary a secret equals, projection keeps keys,
    states, identifiers, digests and schema tags, the projected documents stay valid, and
    the leak check passes them."""
    plan = make_plan(tmp_path)
    receipt = finished_receipt(tmp_path, plan)
    out = str(tmp_path / "ws" / ".brigade" / "evals" / "proj")
    words = sorted(
        (strings_of(receipt) | strings_of(plan.document()) | set(VOCABULARY))
        - {PROMPT, TOKEN, "Hi"}
    )
    baseline = project_receipt(receipt, out, secrets_for(tmp_path, plan))
    for word in words:
        for secrets in (
            make_secrets([word, PROMPT], [(out, ".")], [TOKEN]),
            make_secrets([PROMPT], [(out, ".")], [word, TOKEN]),
        ):
            projected = project_receipt(receipt, out, secrets)
            assert schemas.problems(projected, "brigade.eval_cell.v1") == [], word
            for key in ("schema", "cell_id", "coordinate", "case_id", "state", "execution_mode"):
                assert projected[key] == receipt[key], (word, key)
            assert projected["case"]["id"] == "sum"
            assert projected["seat"]["seat"] == "agent"
            assert projected["seat"]["transport"] == "direct"
            assert projected["graders"][0]["status"] == "scored"
            assert projected["run_dir"] == baseline["run_dir"]
            assert set(projected) == set(baseline)
            assert find_leaks_in_json("c.json", projected, secrets, RECEIPT_ROLES) == [], word
            summary = build_summary(plan, {}, {}, "2025-01-01T00:00:00.000Z")
            assert blank_text(project_summary(summary, secrets), SUMMARY_ROLES) == blank_text(
                summary, SUMMARY_ROLES
            ), word
            plan_doc = project_plan(plan.document(), secrets)
            assert schemas.problems(plan_doc, "brigade.eval_plan.v1") == [], word
            assert find_leaks_in_json("p.json", plan_doc, secrets, PLAN_ROLES) == [], word


def test_exec_placeholders_survive_an_env_value_equal_to_them() -> None:
    secrets = make_secrets([], [], ["python", "roster_dir"])
    assert scrub_text("exec:{python} {roster_dir}/a.py", secrets) == (
        "exec:{python} {roster_dir}/a.py"
    )
    assert scrub_text("ran python here", secrets) == f"ran {REDACTED} here"
    # scrubbing twice changes nothing (graders scrub, the export scrubs again)
    twice = make_secrets([], [], ["redacted", "sha256"])
    once = scrub_text("a redacted sha256 b", twice)
    assert once == f"a {REDACTED} {REDACTED} b"
    assert scrub_text(once, twice) == once
    assert twice.matcher.kinds(once) == []


# --- escaped, cut and long secrets (items 2 and 8) --------------------------------------

LONG_PROMPT = 'Line one of the task, with "quotes" and it\'s apostrophe.\nLine two: é ü.'


@pytest.mark.parametrize(
    "shown",
    [
        json.dumps(LONG_PROMPT),  # JSON-escaped
        json.dumps(LONG_PROMPT, ensure_ascii=False),
        repr(LONG_PROMPT),  # repr-escaped
        repr(LONG_PROMPT + '"'),  # repr with the other quote
        json.dumps({"echo": LONG_PROMPT})[:60],  # escaped and cut
        LONG_PROMPT[:40],  # a long prefix
        " ".join(LONG_PROMPT.split()),  # line breaks folded
    ],
)
def test_escaped_and_cut_forms_of_a_prompt_are_found_and_replaced(shown: str) -> None:
    secrets = make_secrets([LONG_PROMPT], [], [])
    text = f"output was {shown} (end)"
    assert secrets.matcher.kinds(text) == ["prompt"]
    scrubbed = scrub_text(text, secrets)
    assert secrets.matcher.kinds(scrubbed) == []
    assert "Line one of the task" not in scrubbed
    assert f"<prompt {text_digest(LONG_PROMPT)}>" in scrubbed
    assert find_leaks_in_json("x.json", {"detail": text}, secrets) == [
        Leak("x.json", "detail", "prompt")
    ]


def test_escaped_env_value_and_short_prefixes() -> None:
    token = 'tok-"quoted"-value-0123456789-abcdefghijklmnop'
    secrets = make_secrets([], [], [token])
    assert scrub_text(f"status is {token!r}", secrets) == f"status is '{REDACTED}'"
    assert scrub_text(json.dumps(token), secrets) == f'"{REDACTED}"'
    assert secrets.matcher.kinds(token[:WINDOW]) == ["env value"]
    # fewer than WINDOW characters of a secret are not a cut form of it
    assert secrets.matcher.kinds(token[: WINDOW - 1]) == []


def test_project_text_scrubs_before_cutting() -> None:
    secrets = make_secrets([LONG_PROMPT], [], [])
    text = "x" * 10 + LONG_PROMPT
    shown = project_text(text, secrets, limit=30)
    assert shown == ("x" * 10 + f"<prompt {text_digest(LONG_PROMPT)}>")[:29] + "…"
    assert secrets.matcher.kinds(shown) == []


def test_a_megabytes_long_prompt_is_indexed_by_a_window() -> None:
    """A long key in pyahocorasick's automaton overflowed the C stack when freed."""
    words = [f"w{i % 9973}" for i in range(700_000)]
    prompt = " ".join(words)  # about 5 MB
    secrets = make_secrets([prompt], [], [])
    matcher = secrets.matcher
    assert scrub_text(f"<{prompt}>", secrets) == f"<<prompt {text_digest(prompt)}>>"
    assert matcher.kinds(prompt[:100_000]) == ["prompt"]
    assert matcher.kinds("w1 w2 w3") == []
    del secrets, matcher  # freeing the automaton must not crash either


def test_prompts_sharing_a_long_beginning_are_told_apart() -> None:
    head = "You are a careful engineer working in this repository. "
    first, second = head + "Fix the parser.", head + "Write the docs for the parser."
    secrets = make_secrets([first, second], [], [])
    assert scrub_text(f"[{second}]", secrets) == f"[<prompt {text_digest(second)}>]"
    assert scrub_text(f"[{first}]", secrets) == f"[<prompt {text_digest(first)}>]"


# --- absolute paths of this machine (item 9) --------------------------------------------

MACHINE = {
    "homes": ["/home/alice", "/root"],
    "roots": ["home", "root", "tmp", "usr", "etc", "dev"],
}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "exec:/root/bin/my-agent --config /root/.config/agent.toml",
            "exec:~/bin/my-agent --config ~/.config/agent.toml",
        ),
        (
            "cannot read /home/alice/.config/agent/credentials.json.",
            "cannot read ~/.config/agent/credentials.json.",
        ),
        ("python3 /usr/lib/x.py failed", "python3 <path> failed"),
        ("edited /tmp/brigade-worktree-x1y2/src/a.py:3", "edited <worktree>/src/a.py:3"),
        ("--config=/etc/agent.toml", "--config=<path>"),
        ("file:///root/notes", "file:~/notes"),
        ("see https://example.com/usr/x and 3/5 and and/or", None),
        ("/nowhere/x and /srv/y", None),  # not a folder of this machine
        ("<workspace>/etc/x and ~/x and ./root/y", None),  # relative already
        # a diff's lines, list markers, a backslash, an escaped line break (regression)
        (
            "+/root/.ssh/id_rsa\n-/etc/hostname\n*/etc/a #/etc/b \\/etc/c _/etc/d 12/etc/e",
            "+~/.ssh/id_rsa\n-<path>\n*<path> #<path> \\<path> _<path> 12<path>",
        ),
        ("--/etc/x and __/usr/y", "--<path> and __<path>"),
        ('"line\\n/etc/hostname"', '"line\\n<path>"'),
        # /dev/null says nothing of this machine: a shown diff keeps applying
        ("--- /dev/null\n+++ b/x\n--- a/y\n+++ /dev/null", None),
        # relative paths with digits, dashes and underscores stay
        ("cells/001/usr and attempt-001/tmp and v1/usr/lib and my_/etc", None),
    ],
)
def test_absolute_paths_of_this_machine_are_relativised_or_redacted(
    text: str, expected: str | None
) -> None:
    secrets = make_secrets([], [], [], **MACHINE)
    scrubbed = scrub_text(text, secrets)
    assert scrubbed == (text if expected is None else expected)
    assert secrets.matcher.kinds(scrubbed) == []
    assert secrets.matcher.kinds(text) == ([] if expected is None else ["absolute path"])


def test_paths_are_only_paths_in_path_fields(tmp_path: Path) -> None:
    """run_dir loses only its absolute part: an env value `attempt` stays in it."""
    plan = make_plan(tmp_path)
    receipt = finished_receipt(tmp_path, plan)
    out = str(tmp_path / "ws" / ".brigade" / "evals" / "proj")
    secrets = make_secrets([], [(out, ".")], ["attempts", "attempt-002"], **MACHINE)
    projected = project_receipt({**receipt, "failure_detail": "attempts failed"}, out, secrets)
    assert projected["run_dir"].endswith("attempts/attempt-002/run")
    assert projected["failure_detail"] == f"{REDACTED} failed"
    moved = {**receipt, "run_dir": "/root/old/out/cells/x/run"}
    assert project_receipt(moved, out, secrets)["run_dir"] == "~/old/out/cells/x/run"


def test_report_skeleton_allows_page_words_but_not_long_secrets() -> None:
    secrets = make_secrets([LONG_PROMPT], [], ["accepted"])
    page = "<td>accepted</td><td>accepted</td>"
    assert find_leaks_in_text("r", page, secrets) == [Leak("r", "(text)", "env value")]
    assert find_leaks_in_text("r", page, secrets, skeleton=page) == []
    leaky = page + "<td>accepted</td>"
    assert find_leaks_in_text("r", leaky, secrets, skeleton=page) == [
        Leak("r", "(text)", "env value")
    ]
    static = page + LONG_PROMPT  # a long secret is never a word of the page
    assert find_leaks_in_text("r", static, secrets, skeleton=static) == [
        Leak("r", "(text)", "prompt")
    ]
    named = page + f"<th>{LONG_PROMPT}</th>"  # unless it is a name (a case id)
    assert find_leaks_in_text("r", named, secrets, skeleton=page, names=[LONG_PROMPT]) == []


BINARY_DIFF = (
    "diff --git a/notes.bin b/notes.bin\n"
    "new file mode 100644\n"
    "index 0000000..601a99c\n"
    "GIT binary patch\n"
    "literal 215\n"
    "zcmXxbF>=Eo5I|8Kg$pnsAs}2LlP<Qq6)X}70?lgW8Q(r`QvKKbVY?b5P4bEKk|#z&\n"
    "ToV6AdFynsk`46e}sOV~c(F90N\n"
    "\n"
    "literal 0\n"
    "HcmV?d00001\n"
    "\n"
    "diff --git a/b.txt b/b.txt\n"
    "+more\n"
)


def test_a_binary_hunk_is_shown_as_one_line_and_is_a_leak_when_left() -> None:
    """Its data (base85 of zlib) may hold any secret, and no search can read it."""
    secrets = make_secrets([], [], [])
    assert project_text(BINARY_DIFF, secrets) == (
        "diff --git a/notes.bin b/notes.bin\n"
        "new file mode 100644\n"
        "index 0000000..601a99c\n"
        "binary file changed\n"
        "\n"
        "diff --git a/b.txt b/b.txt\n"
        "+more\n"
    )
    # cut inside its data: the rest goes too
    assert project_text(BINARY_DIFF[:140], secrets) == BINARY_DIFF[:79] + "binary file changed"
    assert find_leaks_in_text("page.html", BINARY_DIFF, secrets) == [
        Leak("page.html", "(text)", "binary patch")
    ]
    assert find_leaks_in_json("x.json", {"detail": BINARY_DIFF}, secrets) == [
        Leak("x.json", "detail", "binary patch")
    ]
    # the words alone, not at the start of a line with blocks after, are text
    assert project_text("no GIT binary patch here", secrets) == "no GIT binary patch here"


MARKUP_PROMPT = "Don't publish: summarise the board's \"Nightingale\" memo & <notes> today"


@pytest.mark.parametrize(
    "shown",
    [
        html.escape(MARKUP_PROMPT),  # &#x27; and &quot;
        html.escape(MARKUP_PROMPT, quote=False),
        xml_escape(MARKUP_PROMPT, {"'": "&apos;", '"': "&quot;"}),
        xml_escape(MARKUP_PROMPT, {"'": "&#39;", '"': "&#34;"}),
        html.escape(MARKUP_PROMPT)[:40],  # escaped and cut
    ],
)
def test_html_and_xml_escaped_forms_of_a_secret_are_found_and_replaced(shown: str) -> None:
    """Regression: a page or an XML file an agent wrote held the prompt escaped, and
    neither the projection nor the leak check knew that form."""
    secrets = make_secrets([MARKUP_PROMPT], [], [])
    text = f"page: {shown} (end)"
    assert secrets.matcher.kinds(text) == ["prompt"]
    assert scrub_text(text, secrets) == f"page: <prompt {text_digest(MARKUP_PROMPT)}> (end)"
    token = "tok&en-'0123456789abcdefghijklmnopqrstuvwxyz"
    values = make_secrets([], [], [token])
    assert scrub_text(f"key: {html.escape(token)}", values) == f"key: {REDACTED}"
    assert find_leaks_in_text("p.html", f"key: {html.escape(token)[:33]}", values) == [
        Leak("p.html", "(text)", "env value")
    ]


# -- inherited credentials, usage text, cut pieces (issue 27, item 6) --------------------


def test_credential_values_are_those_of_credential_like_variables() -> None:
    from brigade.core.projection import credential_values

    environ = {
        "ANTHROPIC_API_KEY": "sk-ant-0123456789",
        "ANTHROPIC_MODEL": "claude-sonnet-4-5",  # configuration, not a credential
        "OPENAI_BASE_URL": "https://proxy.internal/v1",  # a provider's own: secret
        "GITHUB_TOKEN": "ghp_abcdefghij",
        "my_service_token": "lowercase-names-too",
        "DB_PASSWORD": "hunter22",
        "SHORT_TOKEN": "1234567",  # under 8 characters: nobody's secret
        "CI": "true",
        "HOME": "/root",
        "CORP_CONN": "corp://u:p@host/db",
        "AWS_SECRET_ACCESS_KEY": "aws-secret-0123",
    }
    assert credential_values(environ) == sorted(
        [
            "sk-ant-0123456789",
            "https://proxy.internal/v1",
            "ghp_abcdefghij",
            "lowercase-names-too",
            "hunter22",
            "aws-secret-0123",
        ]
    )
    # the roster's names (and patterns, in any case) count too, a *_MODEL named as well
    named = credential_values(environ, ["corp_*", "ANTHROPIC_MODEL"])
    assert "corp://u:p@host/db" in named and "claude-sonnet-4-5" in named


def test_usage_model_ids_and_session_ids_are_free_text() -> None:
    from brigade.core.projection import GRADER_RESULT_ROLES

    secret = "roster-secret-value-0042"
    secrets = make_secrets([], [("/srv/out", ".")], [secret], roots=["srv"])
    usage = {
        "input_tokens": 3,
        "cost_source": "unknown",
        "model": f"{secret}@/srv/models/m",
        "session_id": secret,
        "models": {secret: {"input_tokens": 3}, "/srv/a": {"input_tokens": 1}, "ok": {}},
    }
    receipt = {"usage": usage, "attempts_usage": [{"attempt": 1, "usage": usage}]}
    projected = project_receipt(receipt, "/srv/out", secrets)
    expected = {
        "input_tokens": 3,
        "cost_source": "unknown",
        "model": "<redacted>@<path>",
        "session_id": REDACTED,
        "models": {REDACTED: {"input_tokens": 3}, "<path>": {"input_tokens": 1}, "ok": {}},
    }
    assert projected["usage"] == expected
    assert projected["attempts_usage"] == [{"attempt": 1, "usage": expected}]
    assert find_leaks_in_json("c.json", projected, secrets, RECEIPT_ROLES) == []
    # the leak check reads the keys of `models` as free text
    found = find_leaks_in_json("c.json", receipt, secrets, RECEIPT_ROLES)
    assert {leak.where for leak in found} >= {
        "usage.models." + secret + " (key)",
        "usage.session_id",
        "usage.model",
    }
    grader = {"usage": usage}
    assert project_text(secret, secrets) == REDACTED
    assert find_leaks_in_json("g.json", grader, secrets, GRADER_RESULT_ROLES) != []
    # two keys projected alike stay apart
    two = project_receipt(
        {"usage": {"models": {secret: {}, f"{secret}": {}, REDACTED: {}}}}, "/srv/out", secrets
    )
    assert list(two["usage"]["models"]) == [REDACTED, f"{REDACTED} (2)"]


@pytest.mark.parametrize(
    ("text", "scrubbed"),
    [
        ("lost ghp_9f8e7d6c5b4a39...", "lost <redacted>..."),
        ("quoted: ghp_9f8e7d6c5b…", "quoted: <redacted>…"),
        ("…3928171615141312111009aa was it", "…<redacted> was it"),
        ("an ordinary cut…", "an ordinary cut…"),
        ("wait... and g...", "wait... and g..."),
    ],
)
def test_a_piece_of_a_value_beside_a_cut_marker_is_a_secret_too(text: str, scrubbed: str) -> None:
    secrets = make_secrets([], [], ["ghp_9f8e7d6c5b4a3928171615141312111009aa"])
    assert scrub_text(text, secrets) == scrubbed
    leaks = find_leaks_in_json("f.json", {"detail": text}, secrets, {"detail": "text"})
    assert bool(leaks) == (text != scrubbed)


def test_a_text_read_in_part_loses_the_start_of_a_secret_at_its_end() -> None:
    from brigade.core.projection import without_cut_secret

    secrets = make_secrets(["a prompt long enough to count"], [], ["sk-ant-0123456789abcdef"])
    assert without_cut_secret("answer: sk-ant-0123", secrets) == "answer: "
    assert without_cut_secret("answer: a prompt long", secrets) == "answer: "
    assert without_cut_secret("answer: nothing of it", secrets) == "answer: nothing of it"
