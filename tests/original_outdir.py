"""An output directory as the original `brigade model trial` (0.27) leaves it, built by hand.

Written from the contracts (docs/contracts/cell-identity-and-resume.md,
docs/contracts/outcome-taxonomy.md) and what the original's files are known to hold:

- plan.json tagged `brigade.eval_manifest.v1`, cells naming their seat, a bare-hex
  `manifest_digest` (sha256 of the manifest's canonical JSON), its stale_cells;
- cell.json (and a copy in its attempt folder): the plan fields, `graders` holding
  grader_result.v1 documents whose `output_digest` and `output_refs[].sha256` are
  the only record of the output digest, `acceptance: {state}`, `exit_code`,
  `duration_seconds`, an absolute `run_dir` under a folder of another machine; no
  `finished_at`, `score`, `output_digest`, `case` or `grader_specs`;
- the running marker: the plan fields (its `graders` are the specs), state,
  attempt, started_at and manifest_digest;
- run folders with final.txt, the original's run.json (the prompt as `task`, the
  workspace as `cwd`), worker-results.json and the files brigade does not know
  (candidate-set.json, events/, logs/, message-envelopes.jsonl, roster.json);
- summary.json in the original's shape.

Cell ids follow the seed contract's identity rule, computed here on their own.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from conftest import FAKE_CLI

NAME = "legacy"
# the folder the original tool ran in, on a machine this test never sees
FOREIGN_WORKSPACE = "/nonexistent/old-laptop/project"
FOREIGN_OUT = f"{FOREIGN_WORKSPACE}/.brigade/evals/{NAME}"
STARTED = "2026-05-01T10:00:00.123456+00:00"

ROSTER_TOML = f"""\
orchestrator = "lead"

[agents.lead]
cli = "claude"
role = "orchestrator"
purpose = "routes work"

[agents.agent]
cli = "{FAKE_CLI}"
role = "worker"
model = "fake-1"
caveats = ["a fake agent for tests"]

[limits]
max_workers = 2
timeout_seconds = 60
"""
SEAT = {
    "seat": "agent",
    "cli": FAKE_CLI,
    "model": "fake-1",
    "reasoning": None,
    "transport": "direct",
    "transport_version": None,
    "env": None,
    "codex_transport": None,
}
EXACT_HI = [{"type": "exact_output", "expected": "hi"}]
VERIFY = [
    {"type": "exact_output", "expected": "done"},
    {"type": "verify_receipt", "path": "receipts/verify.json"},
]
CASES: list[dict[str, Any]] = [
    {"id": "done", "prompt": "answer: hi", "graders": EXACT_HI},
    {"id": "wrong", "prompt": "answer: ho", "graders": EXACT_HI},
    {"id": "free", "prompt": "answer: anything", "graders": []},
    {"id": "crashed", "prompt": "exit: 3", "graders": [{"type": "exit_status"}]},
    {"id": "verify", "prompt": "answer: done", "graders": VERIFY},
    {"id": "midway", "prompt": "answer: hi", "graders": EXACT_HI},
]
MANIFEST = {
    "schema": "brigade.eval_manifest.v1",
    "name": NAME,
    "seats": ["agent"],
    "execution": {"mode": "read-only"},
    "cases": CASES,
}
# what `wrong` asked before the manifest was edited: its cell is stale
STALE_PROMPT = "answer: hey"


def canonical(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def cell_id(case_id: str, prompt: str, graders: list[dict[str, Any]]) -> str:
    payload = {
        "schema": "brigade.eval_cell.v1",
        "case": {"id": case_id, "prompt": prompt},
        "seat": SEAT,
        "trial": 1,
        "graders": graders,
        "execution_mode": "read-only",
    }
    return hashlib.sha256(canonical(payload)).hexdigest()


def sha(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


MANIFEST_DIGEST = hashlib.sha256(canonical(MANIFEST)).hexdigest()


def grader_result(
    kind: str, index: int, cid: str, digest: str, *, score: float | None, detail: str
) -> dict[str, Any]:
    """A grader_result.v1 as the original writes it (1-based ids, version 1, refs objects)."""
    scored = score is not None
    return {
        "schema": "brigade.grader_result.v1",
        "grader_id": f"{kind}:{index}",
        "grader_type": kind,
        "version": 1,
        "status": "scored" if scored else "grader_error",
        "score": score,
        "score_min": 0.0,
        "score_max": 1.0,
        "detail": detail,
        "component_checks": (
            [{"name": kind, "passed": score == 1.0, "detail": detail}] if scored else []
        ),
        "duration_seconds": 0.000117,
        "cell_id": cid,
        "output_digest": digest,
        "output_refs": [{"path": "run/final.txt", "sha256": digest}],
    }


@dataclass
class OriginalCell:
    case_id: str
    prompt: str
    graders: list[dict[str, Any]]
    cell_id: str = ""
    files: dict[str, bytes] = field(default_factory=dict)  # relative to the output dir

    def __post_init__(self) -> None:
        self.cell_id = cell_id(self.case_id, self.prompt, self.graders)

    @property
    def coordinate(self) -> str:
        return f"{self.case_id}:agent:1"

    def payload(self) -> dict[str, Any]:
        return {
            "cell_id": self.cell_id,
            "coordinate": self.coordinate,
            "case_id": self.case_id,
            "prompt": self.prompt,
            "seat": "agent",
            "trial": 1,
            "graders": self.graders,
            "execution_mode": "read-only",
        }

    def running(self, attempt: int) -> dict[str, Any]:
        return {
            "schema": "brigade.eval_cell.v1",
            **self.payload(),
            "state": "running",
            "attempt": attempt,
            "started_at": STARTED,
            "manifest_digest": MANIFEST_DIGEST,
        }

    def finished(
        self,
        state: str,
        answer: str,
        results: list[dict[str, Any]],
        *,
        exit_code: int = 0,
        attempt: int = 1,
        failure_reason: str | None = None,
    ) -> None:
        """A terminal receipt (in the cell folder and its attempt folder) and its run files."""
        folder = f"cells/{self.cell_id}/attempts/attempt-{attempt:03d}"
        receipt: dict[str, Any] = {
            **self.running(attempt),
            "state": state,
            "exit_code": exit_code,
            "duration_seconds": 1.25,
            "run_dir": f"{FOREIGN_OUT}/{folder}/run",
            "graders": results,
            "acceptance": {"state": "accepted" if state == "accepted" else "not-accepted"},
        }
        if failure_reason is not None:
            receipt["failure_reason"] = failure_reason
        data = (json.dumps(receipt, indent=2) + "\n").encode()
        self.files[f"cells/{self.cell_id}/cell.json"] = data
        self.files[f"{folder}/cell.json"] = data
        self.run_files(folder, answer, exit_code)

    def run_files(self, folder: str, answer: str, exit_code: int) -> None:
        run = f"{folder}/run"
        worker = {"worker": "agent", "ok": exit_code == 0, "exit_code": exit_code}
        self.files.update(
            {
                f"{run}/final.txt": answer.encode(),
                f"{run}/run.json": json.dumps(
                    {
                        "schema": "brigade.run.v1",
                        "schema_version": 1,
                        "kind": "work",
                        "task": self.prompt,
                        "orchestrator": "lead",
                        "read_only": True,
                        "status": "completed" if exit_code == 0 else "failed",
                        "started_at": "2026-05-01T10:00:00Z",
                        "finished_at": "2026-05-01T10:00:01Z",
                        "duration_seconds": 1.25,
                        "cwd": FOREIGN_WORKSPACE,
                        "lock_workspace": FOREIGN_WORKSPACE,
                        "worker": "agent",
                    }
                ).encode(),
                f"{run}/worker-results.json": json.dumps({"results": [worker]}).encode(),
                f"{run}/roster.json": json.dumps({"orchestrator": "lead"}).encode(),
                f"{run}/candidate-set.json": json.dumps({"candidates": ["agent"]}).encode(),
                f"{run}/message-envelopes.jsonl": b'{"role": "worker", "seq": 1}\n',
                f"{run}/events/000001.json": json.dumps({"event": "started"}).encode(),
                f"{run}/logs/agent.log": f"worked in {FOREIGN_WORKSPACE}\n".encode(),
            }
        )


def build(out: Path) -> dict[str, OriginalCell]:
    """Write the original tool's output directory for MANIFEST to `out`; cells by case id.

    done: accepted · wrong: rejected (with a stale cell from an earlier prompt) ·
    free: unscored (no graders: no digest recorded anywhere) · crashed:
    execution_error (graders ran anyway) · verify: grader_error (the receipt file
    its grader reads was missing) · midway: running (the run died during attempt 2).
    """
    cells = {
        case["id"]: OriginalCell(case["id"], case["prompt"], case["graders"]) for case in CASES
    }

    done = cells["done"]
    d = sha("hi\n")
    done.finished(
        "accepted",
        "hi\n",
        [grader_result("exact_output", 1, done.cell_id, d, score=1.0, detail="output matched")],
    )
    wrong = cells["wrong"]
    d = sha("ho\n")
    wrong.finished(
        "rejected",
        "ho\n",
        [
            grader_result(
                "exact_output", 1, wrong.cell_id, d, score=0.0, detail="output did not match"
            )
        ],
    )
    cells["free"].finished("unscored", "anything\n", [])
    crashed = cells["crashed"]
    d = sha("ok\n")
    crashed.finished(
        "execution_error",
        "ok\n",
        [
            grader_result(
                "exit_status", 1, crashed.cell_id, d, score=0.0, detail="exit 3, expected 0"
            )
        ],
        exit_code=3,
    )
    verify = cells["verify"]
    d = sha("done\n")
    missing = f"[Errno 2] No such file or directory: '{FOREIGN_WORKSPACE}/receipts/verify.json'"
    verify.finished(
        "grader_error",
        "done\n",
        [
            grader_result("exact_output", 1, verify.cell_id, d, score=1.0, detail="output matched"),
            grader_result("verify_receipt", 2, verify.cell_id, d, score=None, detail=missing),
        ],
    )
    midway = cells["midway"]
    midway.run_files(f"cells/{midway.cell_id}/attempts/attempt-001", "hi\n", 0)
    midway.files[f"cells/{midway.cell_id}/attempts/attempt-002/run/logs/agent.log"] = b"started\n"
    midway.files[f"cells/{midway.cell_id}/cell.json"] = json.dumps(midway.running(2)).encode()

    stale = OriginalCell("wrong", STALE_PROMPT, EXACT_HI)
    d = sha("hey\n")
    stale.finished(
        "rejected",
        "hey\n",
        [
            grader_result(
                "exact_output", 1, stale.cell_id, d, score=0.0, detail="output did not match"
            )
        ],
    )
    cells["stale"] = stale

    plan = {
        "schema": "brigade.eval_manifest.v1",
        "name": NAME,
        "manifest_digest": MANIFEST_DIGEST,
        "cells": [cells[case["id"]].payload() for case in CASES],
        "stale_cells": [
            {
                "coordinate": wrong.coordinate,
                "previous_cell_id": stale.cell_id,
                "cell_id": wrong.cell_id,
            }
        ],
    }
    summary = {
        "schema": "brigade.eval_summary.v1",
        "counts": {
            "accepted": 1,
            "execution_error": 1,
            "grader_error": 1,
            "rejected": 1,
            "running": 1,
            "unscored": 1,
        },
        "stale_counts": {"rejected": 1},
        "measurement_failures": 1,
        "scores": {
            "values": [1.0, 0.0, 0.0],
            "count": 3,
            "mean": 0.3333333333333333,
            "median": 0.0,
            "min": 0.0,
            "max": 1.0,
            "stdev": 0.4714045207910317,
        },
        "partial_scores": {
            "values": [1.0],
            "count": 1,
            "mean": 1.0,
            "median": 1.0,
            "min": 1.0,
            "max": 1.0,
            "stdev": 0.0,
        },
        "durations": {
            "values": [1.25] * 5,
            "count": 5,
            "mean": 1.25,
            "median": 1.25,
            "min": 1.25,
            "max": 1.25,
            "stdev": 0.0,
        },
    }
    files = {
        "plan.json": (json.dumps(plan, indent=2, sort_keys=True) + "\n").encode(),
        "summary.json": (json.dumps(summary, indent=2) + "\n").encode(),
    }
    for cell in cells.values():
        files.update(cell.files)
    for relative, data in files.items():
        path = out / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return cells


def snapshot(out: Path) -> dict[str, bytes]:
    """Every file under `out` (relative name -> bytes)."""
    return {
        str(path.relative_to(out)): path.read_bytes()
        for path in sorted(out.rglob("*"))
        if path.is_file()
    }
