"""The floor for a no-op resume: a plain Python loop over the cells folder that reads
every cell.json and checks its cell_id and state. Usage: floor.py OUT"""

import json
import os
import sys

TERMINAL = {"accepted", "rejected", "unscored", "execution_error", "adapter_error", "grader_error"}

cells = os.path.join(sys.argv[1], "cells")
finished = 0
for cell_id in os.listdir(cells):
    try:
        with open(os.path.join(cells, cell_id, "cell.json"), "rb") as handle:
            receipt = json.loads(handle.read())
    except (OSError, ValueError):
        continue
    if receipt.get("cell_id") == cell_id and receipt.get("state") in TERMINAL:
        finished += 1
print(finished)
