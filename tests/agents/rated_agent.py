"""A seat of known per-case pass rates, for comparisons and adaptive trials (an `exec:` seat).

The prompt names its case with a line `case: NAME`. The seat's environment gives the rates:

  RATES       a JSON object: case -> a pass rate in [0, 1], or "fault" (an apparatus fault:
              the seat exits 75, EX_TEMPFAIL, with `upstream 502` as its last stderr line)
  RATE        the rate of a case RATES does not name (default 1)
  RATE_SEED   mixed into every draw (default 0)

A cell's draw is u = sha256("<seed>:<case>:<trial>") read as a number in [0, 1), the trial
taken from BRIGADE_COORDINATE (`case:seat:trial`); the seat answers `pass` when u < rate, else
`fail`. So an outcome is fixed by its case and trial: the seat passes a case at its rate over
trials, and the same way every time it runs. Every launch appends a line to $FAKE_AGENT_LOG
(when set), so tests can count agent runs.
"""

import hashlib
import json
import os
import sys

prompt = sys.stdin.read()
log = os.environ.get("FAKE_AGENT_LOG")
coordinate = os.environ.get("BRIGADE_COORDINATE", "?:?:1")
if log:
    with open(log, "a") as handle:
        handle.write(f"{coordinate} {os.getpid()}\n")
case = next(
    (line.split(":", 1)[1].strip() for line in prompt.splitlines() if line.startswith("case:")),
    "",
)
trial = coordinate.rsplit(":", 1)[-1]
rates = json.loads(os.environ.get("RATES", "{}"))
rate = rates.get(case, float(os.environ.get("RATE", "1")))
if rate == "fault":
    print("upstream 502", file=sys.stderr)
    sys.exit(75)
digest = hashlib.sha256(f"{os.environ.get('RATE_SEED', '0')}:{case}:{trial}".encode()).digest()
draw = int.from_bytes(digest[:8], "big") / 2**64
print("pass" if draw < float(rate) else "fail")
