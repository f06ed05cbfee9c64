"""Cell identity: the frozen payload, its digest, and the plan's expansion into cells."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from brigade.core.identity import (
    CELL_SCHEMA,
    IDENTITY_KEYS,
    SEAT_KEYS,
    canonical_json,
    cell_id,
    identity_payload,
    normalize_prompt,
    run_key,
)
from brigade.core.plan import coordinate, expand
from brigade.core.specs import SeatSpec
from brigade.inputs.manifest import load_manifest
from brigade.inputs.roster import load_roster

REFERENCE_ID = "55c07e87f401b5aa49f956b2cec1bfee87986088702bc0b1762cc722ff2638c1"


def reference_seat(**changes: Any) -> dict[str, Any]:
    seat = {
        "seat": "cursor",
        "cli": "cursor",
        "model": "composer-2.5",
        "reasoning": None,
        "transport": "direct",
        "transport_version": None,
        "env": None,
        "codex_transport": None,
    }
    seat.update(changes)
    return seat


def reference_args(**changes: Any) -> dict[str, Any]:
    args: dict[str, Any] = {
        "case_id": "hello",
        "prompt": "Say hello",
        "seat": reference_seat(),
        "trial": 1,
        "graders": [{"type": "exact_output", "expected": "hello"}],
        "execution_mode": "read-only",
    }
    args.update(changes)
    return args


def reference_id(**changes: Any) -> str:
    return cell_id(identity_payload(**reference_args(**changes)))


# --- the reference vector and the lock ---------------------------------------


def test_reference_vector() -> None:
    assert reference_id() == REFERENCE_ID


def test_lock_payload_keys_and_digest() -> None:
    payload = identity_payload(**reference_args())
    assert list(payload) == ["schema", "case", "seat", "trial", "graders", "execution_mode"]
    assert tuple(payload) == IDENTITY_KEYS
    assert list(payload["case"]) == ["id", "prompt"]
    assert list(payload["seat"]) == [
        "seat",
        "cli",
        "model",
        "reasoning",
        "transport",
        "transport_version",
        "env",
        "codex_transport",
    ]
    assert tuple(payload["seat"]) == SEAT_KEYS
    assert payload["schema"] == "brigade.eval_cell.v1" == CELL_SCHEMA
    assert cell_id(payload) == REFERENCE_ID


def test_reference_payload_canonical_text() -> None:
    payload = identity_payload(**reference_args())
    assert canonical_json(payload) == (
        '{"case":{"id":"hello","prompt":"Say hello"},"execution_mode":"read-only",'
        '"graders":[{"expected":"hello","type":"exact_output"}],'
        '"schema":"brigade.eval_cell.v1",'
        '"seat":{"cli":"cursor","codex_transport":null,"env":null,"model":"composer-2.5",'
        '"reasoning":null,"seat":"cursor","transport":"direct","transport_version":null},'
        '"trial":1}'
    )
    assert hashlib.sha256(canonical_json(payload).encode("utf-8")).hexdigest() == REFERENCE_ID


def test_reference_vector_through_seat_spec() -> None:
    seat = SeatSpec(name="cursor", cli="cursor", model="composer-2.5")
    assert seat.identity() == reference_seat()
    assert reference_id(seat=seat.identity()) == REFERENCE_ID


def test_payload_ignores_extra_seat_keys() -> None:
    # only the frozen seat fields enter the payload (timeout is not identity)
    seat = {**reference_seat(), "timeout_seconds": 30.0, "roster_dir": "/x"}
    assert reference_id(seat=seat) == REFERENCE_ID


def test_payload_requires_every_seat_key() -> None:
    seat = reference_seat()
    del seat["codex_transport"]
    with pytest.raises(KeyError):
        identity_payload(**reference_args(seat=seat))


# --- line endings and encoding -----------------------------------------------


def test_normalize_prompt() -> None:
    assert normalize_prompt("a\r\nb\rc\nd\r\n\r") == "a\nb\nc\nd\n\n"


def test_crlf_and_cr_hash_like_lf() -> None:
    lf = reference_id(prompt="Say\nhello\n")
    assert reference_id(prompt="Say\r\nhello\r\n") == lf
    assert reference_id(prompt="Say\rhello\r") == lf
    assert reference_id(prompt="Say\r\nhello\r") == lf
    assert lf != REFERENCE_ID


def test_payload_carries_normalised_prompt() -> None:
    payload = identity_payload(**reference_args(prompt="a\r\nb\rc"))
    assert payload["case"] == {"id": "hello", "prompt": "a\nb\nc"}


def test_non_ascii_prompt_hashed_as_utf8() -> None:
    prompt = "Grüß dich, 世界 — ☃"
    payload = identity_payload(**reference_args(prompt=prompt))
    utf8 = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    escaped = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    assert cell_id(payload) == hashlib.sha256(utf8.encode("utf-8")).hexdigest()
    assert cell_id(payload) != hashlib.sha256(escaped.encode("utf-8")).hexdigest()
    assert prompt in canonical_json(payload)


# --- every identity field changes the id -------------------------------------

CHANGES: list[tuple[str, dict[str, Any]]] = [
    ("case id", {"case_id": "hello2"}),
    ("prompt", {"prompt": "Say hello!"}),
    ("seat name", {"seat": reference_seat(seat="cursor2")}),
    ("cli", {"seat": reference_seat(cli="claude")}),
    ("model", {"seat": reference_seat(model="composer-2.6")}),
    ("model null", {"seat": reference_seat(model=None)}),
    ("reasoning", {"seat": reference_seat(reasoning="high")}),
    ("transport", {"seat": reference_seat(transport="proxy")}),
    ("transport_version", {"seat": reference_seat(transport_version="1.2")}),
    ("env", {"seat": reference_seat(env={"MODE": "strict"})}),
    ("env value", {"seat": reference_seat(env={"MODE": "lax"})}),
    ("codex_transport", {"seat": reference_seat(codex_transport="exec")}),
    ("trial", {"trial": 2}),
    ("graders", {"graders": [{"type": "exact_output", "expected": "hello!"}]}),
    ("no graders", {"graders": []}),
    ("execution_mode", {"execution_mode": "writable-worktree"}),
]


@pytest.mark.parametrize("changes", [c for _, c in CHANGES], ids=[n for n, _ in CHANGES])
def test_every_identity_field_changes_the_id(changes: dict[str, Any]) -> None:
    assert reference_id(**changes) != REFERENCE_ID


def test_every_change_gives_a_distinct_id() -> None:
    ids = {reference_id(**changes) for _, changes in CHANGES} | {REFERENCE_ID}
    assert len(ids) == len(CHANGES) + 1


def test_env_values_differ() -> None:
    strict = reference_id(seat=reference_seat(env={"MODE": "strict"}))
    lax = reference_id(seat=reference_seat(env={"MODE": "lax"}))
    assert strict != lax


# --- SeatSpec.identity: env and codex_transport ------------------------------


def test_empty_env_is_null() -> None:
    assert SeatSpec(name="s", cli="cursor", env={}).identity()["env"] is None
    assert SeatSpec(name="s", cli="cursor", env={"A": "1"}).identity()["env"] == {"A": "1"}


def test_codex_transport_null_for_other_clis() -> None:
    seat = SeatSpec(name="cursor", cli="cursor", model="composer-2.5", codex_transport="app-server")
    assert seat.identity()["codex_transport"] is None
    assert reference_id(seat=seat.identity()) == REFERENCE_ID


def test_codex_transport_enters_identity_for_codex() -> None:
    exec_seat = SeatSpec(name="w", cli="codex", model="m", codex_transport="exec")
    app_seat = SeatSpec(name="w", cli="codex", model="m", codex_transport="app-server")
    assert exec_seat.identity()["codex_transport"] == "exec"
    assert app_seat.identity()["codex_transport"] == "app-server"
    assert reference_id(seat=exec_seat.identity()) != reference_id(seat=app_seat.identity())


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_roster_codex_transport_only_for_codex_seats(tmp_path: Path) -> None:
    roster = load_roster(
        write(
            tmp_path / "roster.yaml",
            "schema: brigade.roster.v1\n"
            "codex_transport: app-server\n"
            "seats:\n"
            "  coder: {cli: codex, model: gpt-5-codex}\n"
            "  other: {cli: claude, model: sonnet, env: {}}\n",
        )
    )
    assert roster.seats["coder"].identity() == {
        "seat": "coder",
        "cli": "codex",
        "model": "gpt-5-codex",
        "reasoning": None,
        "transport": "direct",
        "transport_version": None,
        "env": None,
        "codex_transport": "app-server",
    }
    assert roster.seats["other"].identity()["codex_transport"] is None
    assert roster.seats["other"].identity()["env"] is None


def test_roster_codex_transport_defaults_to_exec(tmp_path: Path) -> None:
    roster = load_roster(
        write(
            tmp_path / "roster.yaml",
            "schema: brigade.roster.v1\nseats:\n  coder: {cli: codex}\n",
        )
    )
    assert roster.seats["coder"].identity()["codex_transport"] == "exec"


# --- plan.expand ------------------------------------------------------------

ROSTER = """\
schema: brigade.roster.v1
seats:
  cursor: {cli: cursor, model: composer-2.5}
  other: {cli: claude, model: sonnet}
"""


def load(tmp_path: Path, manifest_text: str, roster_text: str = ROSTER):
    manifest = load_manifest(write(tmp_path / "manifest.yaml", manifest_text))
    roster = load_roster(write(tmp_path / "roster.yaml", roster_text))
    return manifest, roster


def test_expand_reference_cell(tmp_path: Path) -> None:
    manifest, roster = load(
        tmp_path,
        "schema: brigade.eval_manifest.v1\n"
        "name: ref\n"
        "seats: [cursor]\n"
        "cases:\n"
        "  - id: hello\n"
        "    prompt: Say hello\n"
        "    graders: [{type: exact_output, expected: hello}]\n",
    )
    [cell] = expand(manifest, roster, "roster.yaml")
    assert cell.cell_id == REFERENCE_ID
    assert cell.coordinate == "hello:cursor:1"
    assert cell.execution_mode == "read-only"


def test_expand_crlf_prompt_file_matches_reference(tmp_path: Path) -> None:
    (tmp_path / "hello.md").write_bytes(b"Say\r\nhello\r")
    manifest, roster = load(
        tmp_path,
        "schema: brigade.eval_manifest.v1\n"
        "name: ref\n"
        "seats: [cursor]\n"
        "graders: [{type: exact_output, expected: hello}]\n"
        "cases:\n"
        "  - {id: hello, prompt_file: hello.md}\n",
    )
    [cell] = expand(manifest, roster, "roster.yaml")
    assert cell.prompt == "Say\nhello\n"
    assert cell.cell_id == reference_id(prompt="Say\nhello\n")


def test_expand_order_and_trial_override(tmp_path: Path) -> None:
    manifest, roster = load(
        tmp_path,
        "schema: brigade.eval_manifest.v1\n"
        "name: order\n"
        "trials: 2\n"
        "seats: [other, cursor]\n"
        "cases:\n"
        "  - {id: b, prompt: B}\n"
        "  - {id: a, prompt: A, trials: 1}\n",
    )
    cells = expand(manifest, roster, "roster.yaml")
    assert [c.coordinate for c in cells] == [
        "b:other:1",
        "b:other:2",
        "b:cursor:1",
        "b:cursor:2",
        "a:other:1",
        "a:cursor:1",
    ]
    assert [c.trial for c in cells] == [1, 2, 1, 2, 1, 1]
    assert len({c.cell_id for c in cells}) == 6


def test_coordinate_format() -> None:
    assert coordinate("case-1", "worker", 3) == "case-1:worker:3"


def test_expand_run_key_ignores_graders(tmp_path: Path) -> None:
    manifest, roster = load(
        tmp_path,
        "schema: brigade.eval_manifest.v1\n"
        "name: rk\n"
        "seats: [cursor]\n"
        "cases:\n"
        "  - {id: a, prompt: Same, graders: [{type: exact_output, expected: x}]}\n"
        "  - {id: b, prompt: Same, graders: [{type: exact_output, expected: x}]}\n",
    )
    (tmp_path / "edited").mkdir()
    edited, _ = load(
        tmp_path / "edited",
        "schema: brigade.eval_manifest.v1\n"
        "name: rk\n"
        "seats: [cursor]\n"
        "cases:\n"
        "  - {id: a, prompt: Same, graders: [{type: regex_output, pattern: x}]}\n",
    )
    [first, second] = expand(manifest, roster, "roster.yaml")
    [regraded] = expand(edited, roster, "roster.yaml")
    assert regraded.cell_id != first.cell_id
    assert regraded.run_key == first.run_key
    assert second.run_key != first.run_key  # another case id is another seat run


def test_run_key_is_payload_without_graders() -> None:
    payload = identity_payload(**reference_args())
    without = {k: v for k, v in payload.items() if k != "graders"}
    assert run_key(payload) == hashlib.sha256(canonical_json(without).encode()).hexdigest()
    other = identity_payload(**reference_args(graders=[]))
    assert run_key(other) == run_key(payload)
    assert run_key(identity_payload(**reference_args(trial=2))) != run_key(payload)


# --- a case's own workspace ---------------------------------------------------


def test_a_workspace_is_in_the_payload_only_when_the_case_has_one() -> None:
    assert identity_payload(**reference_args(), workspace=None) == identity_payload(
        **reference_args()
    )
    assert reference_id(workspace=None) == REFERENCE_ID
    world = {"commit": "a" * 40, "setup": "sha256:" + "b" * 64}
    payload = identity_payload(**reference_args(), workspace=world)
    assert payload["workspace"] == world
    assert cell_id(payload) != REFERENCE_ID
    assert reference_id(workspace={"commit": "c" * 40}) != cell_id(payload)


def test_the_trial_hasher_hashes_a_workspace_as_the_payload_does() -> None:
    from brigade.core.identity import TrialHasher, canonical_json, run_key

    args = reference_args()
    world = {"digest": "sha256:" + "d" * 64}
    hasher = TrialHasher(args["seat"], args["execution_mode"])
    graders = canonical_json(args["graders"])
    for trial, cid, rkey in hasher.digests("hello", "Say hello", graders, 3, world):
        payload = identity_payload(**{**args, "trial": trial}, workspace=world)
        assert (cid, rkey) == (cell_id(payload), run_key(payload))


@pytest.mark.parametrize(
    "cases",
    [
        [{"id": "x", "prompt": "as written"}],
        [{"id": "x", "prompt": "line\r\nendings\rmade \\n"}],
        [{"id": "x", "prompt": "as written"}, {"id": "y", "prompt_file": "p.txt"}],
        [{"id": "x", "prompt": "é ☃", "graders": [{"type": "exit_status"}], "trials": 2}],
    ],
)
def test_the_content_digest_is_of_the_document_with_each_prompt_resolved(
    tmp_path: Path, cases: list[dict[str, Any]]
) -> None:
    """The keys of the expansion's caches: the document's canonical JSON with every case's
    prompt as the cells have it (a prompt file's text, `\\n` line endings); the manifest
    digest's own text when no prompt differs from the document's."""
    from brigade.core.identity import canonical_json, normalize_prompt, text_digest
    from brigade.inputs.manifest import manifest_from_document

    (tmp_path / "p.txt").write_text("from a file\r\n", newline="")
    doc = {"schema": "brigade.eval_manifest.v1", "name": "n", "seats": ["a"], "cases": cases}
    manifest = manifest_from_document(doc, tmp_path / "m.yaml", "m.yaml")
    resolved = [
        {
            **raw,
            "prompt": normalize_prompt(
                (tmp_path / raw["prompt_file"]).read_bytes().decode()
                if "prompt_file" in raw
                else raw["prompt"]
            ),
        }
        for raw in cases
    ]
    assert manifest.content_digest == text_digest(canonical_json({**doc, "cases": resolved}))
    assert (manifest.content_digest == f"sha256:{manifest.digest}") == (resolved == cases)
