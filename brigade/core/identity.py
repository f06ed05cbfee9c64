"""Cell identity: canonical JSON and sha256 digests, exactly as the frozen contract says.

Changing what enters `identity_payload` changes every cell_id ever recorded: it
needs a new CELL_SCHEMA tag and a migration note (docs/contracts/cell-identity-and-resume.md).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

CELL_SCHEMA = "brigade.eval_cell.v1"

IDENTITY_KEYS = ("schema", "case", "seat", "trial", "graders", "execution_mode")
SEAT_KEYS = (
    "seat",
    "cli",
    "model",
    "reasoning",
    "transport",
    "transport_version",
    "env",
    "codex_transport",
)


def normalize_prompt(text: str) -> str:
    """Line endings become `\\n` so checkouts with CRLF hash the same."""
    return text.replace("\r\n", "\n").replace("\r", "\n")


def canonical_json(value: Any) -> str:
    """Sorted keys, no spaces, UTF-8 text (not \\u escapes)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def sha256_hex(data: bytes) -> str:
    """Hex sha256 of bytes."""
    return hashlib.sha256(data).hexdigest()


def digest(data: bytes) -> str:
    """`sha256:<hex>` of bytes: the form used for output and manifest digests."""
    return "sha256:" + sha256_hex(data)


def text_digest(text: str) -> str:
    """`sha256:<hex>` of a string's UTF-8 bytes."""
    return digest(text.encode("utf-8"))


def identity_payload(
    *,
    case_id: str,
    prompt: str,
    seat: dict[str, Any],
    trial: int,
    graders: list[dict[str, Any]],
    execution_mode: str,
    workspace: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The exact payload hashed into cell_id. `seat` must carry every SEAT_KEYS field.

    `workspace` (a case's own workspace: its commit or folder digest, its setup's digest)
    is a key of the payload only when the case has one, so every payload without it, and
    every cell_id ever recorded, stays what it was.
    """
    payload = {
        "schema": CELL_SCHEMA,
        "case": {"id": case_id, "prompt": normalize_prompt(prompt)},
        "seat": {key: seat[key] for key in SEAT_KEYS},
        "trial": trial,
        "graders": graders,
        "execution_mode": execution_mode,
    }
    if workspace is not None:
        payload["workspace"] = workspace
    return payload


def cell_id(payload: dict[str, Any]) -> str:
    """sha256 hex of the canonical identity payload."""
    return sha256_hex(canonical_json(payload).encode("utf-8"))


def run_key(payload: dict[str, Any]) -> str:
    """Identity of the seat run alone: the payload without graders.

    Two cells with the same run key differ only in their graders, so one's seat
    output can be graded for the other without running the agent again.
    """
    without_graders = {k: v for k, v in payload.items() if k != "graders"}
    return sha256_hex(canonical_json(without_graders).encode("utf-8"))


class TrialHasher:
    """cell_id and run_key of every trial of many cases on one seat in one mode.

    Byte for byte the canonical JSON of `identity_payload` (keys sorted:
    case, execution_mode, graders, schema, seat, trial), with the parts that
    cells share (seat, mode, schema) serialised once; a test holds it equal to
    `cell_id`/`run_key`.
    """

    def __init__(self, seat: dict[str, Any], execution_mode: str) -> None:
        self._mode = canonical_json(execution_mode)
        self._tail = (
            f'"schema":{canonical_json(CELL_SCHEMA)},'
            f'"seat":{canonical_json({key: seat[key] for key in SEAT_KEYS})},"trial":'
        )

    def digests(
        self,
        case_id: str,
        prompt: str,
        graders_json: str,
        trials: int,
        workspace: dict[str, Any] | None = None,
    ) -> list[tuple[int, str, str]]:
        """(trial, cell_id, run_key) for trials 1..N; `graders_json` is canonical_json(graders).

        `workspace` sorts last among the keys: it follows the trial when present.
        """
        case = canonical_json({"id": case_id, "prompt": normalize_prompt(prompt)})
        head = f'{{"case":{case},"execution_mode":{self._mode},'
        with_graders = f'{head}"graders":{graders_json},{self._tail}'
        without = f"{head}{self._tail}"
        end = "}" if workspace is None else f',"workspace":{canonical_json(workspace)}}}'
        return [
            (
                trial,
                sha256_hex(f"{with_graders}{trial}{end}".encode()),
                sha256_hex(f"{without}{trial}{end}".encode()),
            )
            for trial in range(1, trials + 1)
        ]


def world_key(world: Mapping[str, Any]) -> str:
    """The folder name of a built workspace (`<out>/workspaces/<key>`): the digest of a
    case's world (commit or folder digest, setup digest)."""
    return sha256_hex(canonical_json(dict(world)).encode("utf-8"))[:32]
