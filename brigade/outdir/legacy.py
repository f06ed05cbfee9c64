"""Output directories the original `brigade model trial` (0.27) wrote, read in brigade's terms.

Its receipts are eval_cell.v1 too, with fewer fields: the seat is a name, the
output digest lives in each grader result (`graders[].output_digest`,
`graders[].output_refs[].sha256`), there is no `score`, `finished_at` or
`grader_specs`, and `run_dir` is an absolute path on the machine that wrote
it. Its plan.json carries the tag `brigade.eval_manifest.v1` and names seats
only. These files are read as they are and never rewritten here: a receipt is
*viewed* with what brigade derives from it (the digest its graders recorded,
the cell score, the run folder in the cell's own folder); only a new attempt or
a regrade writes the current format.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from brigade.core.taxonomy import GRADED, cell_score

# the tag of the original tool's plan.json (it reused the manifest's)
ORIGINAL_PLAN_SCHEMA = "brigade.eval_manifest.v1"
# `<root>/cells/<cell_id>/attempts/attempt-NNN/run`: where a receipt's run_dir points
_RUN_DIR = re.compile(r"^(?P<root>/.*)/cells/[0-9a-f]{64}/attempts/attempt-\d+/run/?$")
_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")


def is_original_receipt(receipt: Mapping[str, Any]) -> bool:
    """Written by the original tool (its receipts name the seat; ours hold its spec)."""
    return isinstance(receipt.get("seat"), str)


def graders_digest(graders: Any) -> str | None:
    """The output digest the original tool's grader results recorded, if any."""
    if not isinstance(graders, list):
        return None
    for result in graders:
        if not isinstance(result, dict):
            continue
        digest = result.get("output_digest")
        if isinstance(digest, str) and _DIGEST.match(digest):
            return digest
        for ref in result.get("output_refs") or ():
            digest = ref.get("sha256") if isinstance(ref, dict) else None
            if isinstance(digest, str) and _DIGEST.match(digest):
                return digest
    return None


def receipt_view(receipt: dict[str, Any], out: str, run_dir: str | None) -> dict[str, Any]:
    """A receipt with what brigade derives where the file lacks it (the file is untouched).

    - `output_digest`: from the grader results when the receipt has none;
    - `score`: the cell score of a graded cell, when the receipt has none;
    - `grader_specs`: a running marker's `graders` (the specs, not results), which
      become an empty list;
    - `run_dir`: `run_dir` (the attempt's run folder in the cell's own folder)
      when the recorded path is elsewhere (the directory was moved, copied, or
      written on another machine). In the receipt's other strings (grader
      details, failure details; never prompts or grader specs) the output
      folder the recorded path was under becomes `out`, and the workspace it
      was in (`<workspace>/.brigade/evals/<name>`) becomes `<workspace>`: no
      path of that machine is kept.
    """
    view = derived(receipt)
    recorded = receipt.get("run_dir")
    if run_dir is not None and isinstance(recorded, str) and recorded != run_dir:
        root = _recorded_root(recorded, receipt.get("run_path"))
        if root is not None and root != out and len(root.strip("/")) > 1:
            moves = [(root, out)]
            workspace = _WORKSPACE.match(root)
            if workspace and len(workspace["workspace"].strip("/")) > 1:
                moves.append((workspace["workspace"], "<workspace>"))
            view = {
                key: value if key in _NOT_MOVED else relocated(value, moves)
                for key, value in view.items()
            }
        view = {**view, "run_dir": run_dir}
    return view


def _recorded_root(recorded: str, relative: Any) -> str | None:
    """The output folder a receipt was written in: its `run_dir` less its `run_path` (what
    brigade's receipts record), else as the original tool's `run_dir` names it."""
    if isinstance(relative, str) and relative and recorded.endswith("/" + relative):
        return recorded[: -len(relative) - 1] or None
    match = _RUN_DIR.match(recorded)
    return match["root"] if match else None


def derived(receipt: dict[str, Any]) -> dict[str, Any]:
    """A receipt with what brigade derives where the file lacks it (`receipt_view`) but
    nothing of where it is: its outcome, which a `ReceiptView` keeps, is the same in
    any folder (the file is untouched)."""
    view = receipt
    graders = receipt.get("graders")
    running = receipt.get("state") == "running"
    if running and "grader_specs" not in receipt and isinstance(graders, list):
        # the original tool's running marker carries the grader specs under `graders`:
        # they are no results (brigade's own marker says `grader_specs`)
        view = {**view, "grader_specs": graders, "graders": []}
    if "output_digest" not in receipt:
        digest = graders_digest(receipt.get("graders"))
        if digest is not None:
            view = {**view, "output_digest": digest}
    if "score" not in receipt and receipt.get("state") in GRADED:
        graders = receipt.get("graders")
        if isinstance(graders, list) and all(
            isinstance(g, dict) and isinstance(g.get("score"), (int, float, type(None)))
            for g in graders
        ):
            view = {**view, "score": cell_score(graders)}
    return view


# the default output folder of the original tool (and of brigade) inside a workspace
_WORKSPACE = re.compile(r"^(?P<workspace>/.*)/\.brigade/evals/[^/]+$")
# what a cell is (its identity) is never rewritten: prompts and grader specs
_NOT_MOVED = frozenset({"prompt", "case", "grader_specs", "seat"})


def relocated(value: Any, moves: list[tuple[str, str]]) -> Any:
    """Every string of a JSON value with each folder `old` (as a whole path) replaced by
    its `new`, in order."""
    patterns = [
        # the replacement is taken literally (a path may hold backslashes)
        (old, re.compile(re.escape(old) + r"(?![A-Za-z0-9._-])"), new.replace("\\", "\\\\"))
        for old, new in moves
    ]

    def move(text: str) -> str:
        for old, pattern, new in patterns:
            if old in text:
                text = pattern.sub(new, text)
        return text

    def walk(item: Any) -> Any:
        if isinstance(item, str):
            return move(item)
        if isinstance(item, list):
            return [walk(x) for x in item]
        if isinstance(item, dict):
            return {move(k): walk(v) for k, v in item.items()}
        return item

    return walk(value)
