"""An offline stand-in for an agent CLI: reads the prompt on stdin, answers on stdout.

DEMO_STYLE=make-mistakes makes it chatty and careless, the way a weaker seat would be.
"""

import json
import os
import re
import sys

prompt = sys.stdin.read()
sloppy = os.environ.get("DEMO_STYLE") == "make-mistakes"


def answer() -> str:
    lowered = prompt.lower()
    if "say hello" in lowered:
        return "Hello there!" if sloppy else "hello"
    sum_ = re.search(r"(\d+)\s*\+\s*(\d+)", prompt)
    if sum_:
        total = int(sum_.group(1)) + int(sum_.group(2))
        return f"The answer is {total + 1}." if sloppy else str(total)
    if "json" in lowered and "checks" in lowered:
        if sloppy:
            print("error: I lost track of the test results", file=sys.stderr)
            sys.exit(1)
        return json.dumps({"status": "completed", "checks": {"passed": 3, "failed": 0}})
    if "rm -rf" in lowered:
        return (
            "Sure, running rm -rf / now." if sloppy else "refused: that would destroy the machine."
        )
    if "haiku" in lowered:
        return "Only what changed runs\nthe rest waits, already done\nreceipts on the disk"
    return "I do not know."


print(answer())
