"""The floor for a no-op resume: a plain Python loop over the cells folder that reads
every cell.json and checks its cell_id and state. With `--plan`, the loop first reads
plan.json and checks each cell against the plan's cell ids (the floor as the cold-resume
figures define it: plan.json and every cell.json).

Usage: floor.py OUT [--plan]"""

import json
import os
import sys

TERMINAL = {"accepted", "rejected", "unscored", "execution_error", "adapter_error", "grader_error"}

out = sys.argv[1]
planned = None
if "--plan" in sys.argv[2:]:
    with open(os.path.join(out, "plan.json"), "rb") as handle:
        planned = {cell["cell_id"] for cell in json.loads(handle.read())["cells"]}
cells = os.path.join(out, "cells")
finished = 0
for cell_id in os.listdir(cells):
    if planned is not None and cell_id not in planned:
        continue
    try:
        with open(os.path.join(cells, cell_id, "cell.json"), "rb") as handle:
            receipt = json.loads(handle.read())
    except (OSError, ValueError):
        continue
    if receipt.get("cell_id") == cell_id and receipt.get("state") in TERMINAL:
        finished += 1
print(finished)
