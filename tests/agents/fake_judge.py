"""A fake judge for tests, run as an `exec:` seat: its model (BRIGADE_MODEL) says how it judges.

  pass      reasons, then `SCORE: 0.9`
  fail      reasons, then `VERDICT: fail`
  bold      reasons, then `**VERDICT: PASS**`
  low       reasons, then `SCORE: 0.3`
  garbage   reasons and no verdict line
  fault     `rate_limited: 429 from the provider` on stderr, exit 75 (an apparatus fault)
  crash     exit 1
  slow      sleep 600 s

$FAKE_JUDGE_FAULT (when set) makes any model fault like `fault`: the same judge, broken for
a while.

Every launch appends a JSON line {model, prompt, cwd, env} to $FAKE_JUDGE_LOG (when set),
so tests can count judge runs and read the prompt a judge was given. $JUDGE_USAGE (when set)
is written to $BRIGADE_USAGE_FILE: the judge's usage.
"""

import json
import os
import sys
import time

prompt = sys.stdin.read()
model = os.environ.get("BRIGADE_MODEL", "")
log = os.environ.get("FAKE_JUDGE_LOG")
if log:
    with open(log, "a") as handle:
        names = ("BRIGADE_CELL_ID", "BRIGADE_COORDINATE", "BRIGADE_EXECUTION_MODE", "JUDGE_TOKEN")
        env = {name: os.environ.get(name) for name in names}
        handle.write(json.dumps({"model": model, "prompt": prompt, "cwd": os.getcwd(), "env": env}))
        handle.write("\n")

if os.environ.get("JUDGE_USAGE"):
    with open(os.environ["BRIGADE_USAGE_FILE"], "w") as handle:
        handle.write(os.environ["JUDGE_USAGE"])

if os.environ.get("FAKE_JUDGE_FAULT"):
    model = "fault"

REASONS = "The answer greets the user as the rubric asks.\nIt is short."
if model == "pass":
    print(f"{REASONS}\nSCORE: 0.9")
elif model == "fail":
    print(f"{REASONS}\nBut it is in the wrong language.\nVERDICT: fail")
elif model == "bold":
    print(f"{REASONS}\n\n**VERDICT: PASS**\n")
elif model == "low":
    print(f"{REASONS}\nSCORE: 0.3")
elif model == "garbage":
    print(f"{REASONS}\nI would say it is fine overall.")
elif model == "fault":
    print("rate_limited: 429 from the provider, retry after 30s", file=sys.stderr)
    sys.exit(75)
elif model == "crash":
    print("judge: internal error", file=sys.stderr)
    sys.exit(1)
elif model == "slow":
    time.sleep(600)
else:
    print(f"unknown fake judge model {model!r}", file=sys.stderr)
    sys.exit(2)
