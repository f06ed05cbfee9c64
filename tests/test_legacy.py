"""outdir/legacy.py: receipts of the original tool (or of a moved directory) in brigade's terms."""

from __future__ import annotations

from typing import Any

from brigade.outdir.legacy import graders_digest, is_original_receipt, receipt_view, relocated

CELL = "c" * 64
DIGEST = "sha256:" + "a" * 64
OTHER = "sha256:" + "b" * 64
OLD = "/old/ws/.brigade/evals/x"
OUT = "/here/out"
LOCAL = f"{OUT}/cells/{CELL}/attempts/attempt-002/run"


def result(score: float | None, **extra: Any) -> dict[str, Any]:
    return {
        "status": "scored" if score is not None else "grader_error",
        "score": score,
        "score_max": 1.0,
        "detail": "d",
        **extra,
    }


def original(state: str, graders: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {
        "cell_id": CELL,
        "prompt": f"look at {OLD}/cells",
        "seat": "agent",
        "state": state,
        "attempt": 2,
        "graders": graders,
        "run_dir": f"{OLD}/cells/{CELL}/attempts/attempt-002/run",
        **extra,
    }


def test_digest_from_grader_results() -> None:
    assert graders_digest([result(1.0, output_digest=DIGEST)]) == DIGEST
    refs = [{"path": "run/final.txt", "sha256": OTHER}]
    assert graders_digest([result(None, output_refs=refs)]) == OTHER
    assert graders_digest([result(1.0, output_refs=["cells/x/run/final.txt"])]) is None
    assert graders_digest([]) is None
    assert graders_digest(None) is None
    assert graders_digest([{"type": "exit_status"}]) is None  # a running marker's specs


def test_view_of_an_original_receipt() -> None:
    receipt = original(
        "rejected",
        [result(1.0, output_digest=DIGEST), result(0.0, output_digest=DIGEST, detail=f"{OLD}/a")],
    )
    view = receipt_view(receipt, OUT, LOCAL)
    assert is_original_receipt(receipt)
    assert (view["output_digest"], view["score"], view["run_dir"]) == (DIGEST, 0.5, LOCAL)
    assert view["graders"][1]["detail"] == f"{OUT}/a"
    assert view["prompt"] == receipt["prompt"]  # what the cell is stays as written
    assert "output_digest" not in receipt and "score" not in receipt  # the file's dict too


def test_score_only_for_graded_cells() -> None:
    graders = [result(0.0, output_digest=DIGEST)]
    for state in ("execution_error", "adapter_error", "grader_error", "running"):
        assert "score" not in receipt_view(original(state, graders), OUT, LOCAL)
    assert receipt_view(original("unscored", []), OUT, LOCAL)["score"] is None
    assert "output_digest" not in receipt_view(original("unscored", []), OUT, LOCAL)


def test_workspace_of_the_default_output_folder_is_replaced() -> None:
    receipt = original("accepted", [result(1.0, detail="/old/ws/receipts/v.json missing")])
    assert receipt_view(receipt, OUT, LOCAL)["graders"][0]["detail"] == (
        "<workspace>/receipts/v.json missing"
    )


def test_receipts_in_place_are_left_as_they_are() -> None:
    ours = {
        "seat": {"seat": "agent"},
        "state": "accepted",
        "score": 1.0,
        "output_digest": DIGEST,
        "graders": [result(1.0)],
        "run_dir": LOCAL,
    }
    assert receipt_view(ours, OUT, LOCAL) is ours
    assert not is_original_receipt(ours)
    running = {"seat": {"seat": "agent"}, "state": "running", "attempt": 1}
    assert receipt_view(running, OUT, None) is running


def test_an_unusual_recorded_run_dir_is_only_replaced() -> None:
    receipt = original("accepted", [result(1.0, detail="/elsewhere/x")], run_dir="/elsewhere/x")
    view = receipt_view(receipt, OUT, LOCAL)
    assert (view["run_dir"], view["graders"][0]["detail"]) == (LOCAL, "/elsewhere/x")


def test_relocated_matches_whole_paths_only() -> None:
    moves = [("/old/out", "/new")]
    assert relocated("/old/out /old/out/a /old/out2 /old/outer", moves) == (
        "/new /new/a /old/out2 /old/outer"
    )
    assert relocated({"/old/out": ["'/old/out'", 3]}, moves) == {"/new": ["'/new'", 3]}
