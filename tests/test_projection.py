"""Projection of receipts and plans for export, and the leak check that proves it."""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any

from brigade.core.identity import text_digest
from brigade.core.plan import Plan, build_plan
from brigade.core.projection import (
    REDACTED,
    Leak,
    find_leaks_in_json,
    find_leaks_in_text,
    make_secrets,
    project_plan,
    project_receipt,
    project_summary,
    scrub_text,
)
from brigade.inputs import schemas
from brigade.inputs.manifest import manifest_from_document
from brigade.inputs.roster import roster_from_document
from brigade.run.runner import RunContext, running_receipt

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
