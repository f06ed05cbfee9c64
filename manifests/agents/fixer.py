"""An offline stand-in for a coding agent: asked to fix calc.py (or the shop's total.py),
it edits the file in the folder it runs in (its own worktree) and says what it did.

DEMO_STYLE=make-mistakes makes it hasty: its fix passes two of the three tests.
"""

import os
import sys
from pathlib import Path

prompt = sys.stdin.read()
hasty = os.environ.get("DEMO_STYLE") == "make-mistakes"
shop = Path("total.py")
if "total.py" in prompt and shop.is_file():
    shop.write_text(shop.read_text().replace("sum(amounts[1:])", "sum(amounts)"))
    print("Fixed total() in total.py: it now sums every amount.")
    sys.exit(0)
source = Path("calc.py")
if "calc.py" not in prompt or not source.is_file():
    print("I found nothing to fix.")
    sys.exit(0)
fixed = "abs(a) + b" if hasty else "a + b"
source.write_text(source.read_text().replace("return a - b", f"return {fixed}"))
print(f"Fixed add() in calc.py: it now returns {fixed}.")
