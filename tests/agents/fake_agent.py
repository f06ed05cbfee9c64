"""A fake agent CLI for tests: the prompt tells it what to do, one `key: value` per line.

  answer: TEXT        print TEXT (default: "ok")
  stderr: TEXT        print TEXT on stderr
  sleep: SECONDS      sleep before answering
  block: PATH         wait until PATH exists (at most 120 s)
  await: PATH         wait until PATH exists (at most 30 s), else exit 9 ($VARS expanded)
  exit: CODE          exit with CODE after answering
  tempfail: DETAIL    print DETAIL on stderr and exit 75 (an apparatus fault; $VARS expanded)
  write: PATH=TEXT    write TEXT to PATH (relative to the working directory; $VARS expanded)
  try-write: PATH=TEXT  write TEXT to PATH; if that fails say so on stderr, go on and exit 1
  list: PATH          print the names in folder PATH, one line (or "PATH: missing")
  connect: HOST:PORT  print what a TCP connection to HOST:PORT reads, or why it failed
  delete: PATH        delete PATH ($VARS expanded)
  env: NAME           print the value of environment variable NAME
  spawn: SECONDS      start a background child that sleeps (pid in $FAKE_AGENT_PIDS)
  tempfail_before: N KIND: DETAIL
                      attempts before attempt N (read from BRIGADE_RUN_DIR) report
                      the fault `KIND: DETAIL` (exit 75); attempt N and later answer
  sleep_before: N SECONDS
                      attempts before attempt N sleep SECONDS first
  usage: TEXT         write TEXT (a usage document, or anything) to $BRIGADE_USAGE_FILE

Every launch appends a line to $FAKE_AGENT_LOG (when set), so tests can count
agent processes; with $FAKE_AGENT_SPANS set, each run appends
`<seat> <start_ns> <end_ns>` there when it ends (monotonic clock), so tests can
count how many runs of a seat overlapped.
"""

import os
import re
import socket
import subprocess
import sys
import time

started = time.monotonic_ns()
prompt = sys.stdin.read()
log = os.environ.get("FAKE_AGENT_LOG")
if log:
    with open(log, "a") as handle:
        handle.write(f"{os.environ.get('BRIGADE_COORDINATE', '?')} {os.getpid()}\n")

answer = "ok"
code = 0
for line in prompt.splitlines():
    key, _, value = line.partition(":")
    key, value = key.strip().lower(), value.strip()
    if key == "answer":
        answer = value
    elif key == "stderr":
        print(value, file=sys.stderr, flush=True)
    elif key == "sleep":
        time.sleep(float(value))
    elif key == "block":
        deadline = time.monotonic() + 120
        while not os.path.exists(value) and time.monotonic() < deadline:
            time.sleep(0.05)
    elif key == "await":
        value = os.path.expandvars(value)
        deadline = time.monotonic() + 30
        while not os.path.exists(value) and time.monotonic() < deadline:
            time.sleep(0.02)
        if not os.path.exists(value):
            print(f"nobody wrote {value}", file=sys.stderr)
            sys.exit(9)
    elif key == "exit":
        code = int(value)
    elif key == "tempfail":
        print(os.path.expandvars(value), file=sys.stderr, flush=True)
        sys.exit(75)
    elif key in ("tempfail_before", "sleep_before"):
        until, _, rest = value.partition(" ")
        found = re.search(r"attempt-(\d+)", os.environ.get("BRIGADE_RUN_DIR", ""))
        if found and int(found.group(1)) < int(until):
            if key == "sleep_before":
                time.sleep(float(rest))
            else:
                print(rest, file=sys.stderr, flush=True)
                sys.exit(75)
    elif key == "write":
        path, _, text = value.partition("=")
        path = os.path.expandvars(path)
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        with open(path, "w") as handle:
            handle.write(text + "\n")
    elif key == "try-write":
        path, _, text = value.partition("=")
        try:
            with open(path, "a") as handle:
                handle.write(text + "\n")
        except OSError as exc:
            print(f"try-write {path}: {exc.strerror}", file=sys.stderr, flush=True)
            code = 1
    elif key == "list":
        try:
            print(" ".join(sorted(os.listdir(value))), flush=True)
        except OSError:
            print(f"{value}: missing", flush=True)
    elif key == "connect":
        host, _, port = value.rpartition(":")
        try:
            with socket.create_connection((host, int(port)), timeout=10) as connection:
                print(connection.recv(64).decode().strip(), flush=True)
        except OSError as exc:
            print(f"connect {value}: {exc.strerror or exc}", flush=True)
    elif key == "delete":
        os.remove(os.path.expandvars(value))
    elif key == "usage":
        with open(os.environ["BRIGADE_USAGE_FILE"], "w") as handle:
            handle.write(value)
    elif key == "env":
        answer = os.environ.get(value, "<unset>")
    elif key == "spawn":
        child = subprocess.Popen([sys.executable, "-c", f"import time; time.sleep({value})"])
        pids = os.environ.get("FAKE_AGENT_PIDS")
        if pids:
            with open(pids, "a") as handle:
                handle.write(f"{child.pid}\n")

print(answer, flush=True)
spans = os.environ.get("FAKE_AGENT_SPANS")
if spans:
    with open(spans, "a") as handle:
        handle.write(f"{os.environ.get('BRIGADE_SEAT', '?')} {started} {time.monotonic_ns()}\n")
sys.exit(code)
