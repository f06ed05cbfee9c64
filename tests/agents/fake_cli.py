"""A fake agent CLI, installed under a real CLI's binary name first on PATH.

`install(folder, name)` writes an executable `folder/<binary>` that runs
`main(name)`. Each launch appends {argv, stdin, prompt, cwd, env} to
`<binary>.calls.jsonl` beside it, finds the prompt where that CLI takes it
(stdin, after `--`, or an option's value) and answers in that CLI's real
output format. `SCENARIO:<word>` in the prompt picks the answer, one of
SCENARIOS (see cli_outputs.py; a CLI without that case answers normally), or
untrusted (cursor, codex: the workspace-trust refusal they also give without
their trust flag); anything else succeeds with "All good.". $FAKE_CLI_SCENARIO
(a seat's `env`) picks the answer for every prompt instead.
With FAKE_CLI_STATE set it also keeps the session in the CLI's state folder,
as the real one does (failing if it cannot). With FAKE_CLI_HOME set it records what
it finds in its HOME and tries to change every file there (`home` in the call).

`install(folder, name, sample=NAME)` installs instead a fake of the version a
sample of tests/data/cli_samples/ was captured from: it prints that version's
`--version` line, and for any other command line that sample's exact output
and exit code (what the real CLI of that version printed), writing the files
the sample keeps (`files`) where the command line names them.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
CLI_SAMPLES = HERE.parent / "data" / "cli_samples"

BINARIES = {
    "claude": "claude",
    "codex": "codex",
    "cursor": "cursor-agent",
    "gemini": "gemini",
    "opencode": "opencode",
    "aider": "aider",
    "goose": "goose",
    "qwen": "qwen",
    "copilot": "copilot",
    "ollama": "ollama",
}

# every scenario but success, in the order tests list them
SCENARIOS = (
    "auth",
    "quota",
    "rate",
    "overloaded",
    "5xx",
    "drop",
    "maxturns",
    "echo",
    "empty",
    "plain",
    "turns",
    "model",
    "args",
    "extra",
    "unknown",
    "messages",
    "notices",
)
# scenarios that answer normally ("All good."), each in a shape of its own
ANSWERING = ("turns", "messages", "notices")

# CLIs that refuse to work in a workspace they do not trust, what they print, and
# the flag that tells them to go ahead (the adapters pass it; `SCENARIO:untrusted`
# makes the fake refuse anyway).
TRUST_REFUSALS = {
    # cursor-agent 2026.09.10's lines as a public capture quotes them (Sirdar,
    # docs/research/11-cursor-wire-formats.md), the lines it cuts left out
    "cursor": (
        "--trust",
        "\u26a0 Workspace Trust Required\n\n"
        "  Cursor Agent can execute code and access files in this directory.\n"
        "  To proceed, you can either:\n"
        "    \u2022 Run 'agent' interactively to decide\n"
        "    \u2022 Pass --trust, --yolo, or -f if you trust this directory",
    ),
    "codex": (
        "--skip-git-repo-check",
        "Not inside a trusted directory and --skip-git-repo-check was not specified.",
    ),
}


def install(folder: Path, name: str, sample: str | None = None) -> Path:
    """Write the fake for adapter `name` into folder (of the version `sample` was
    captured from, when given); its path."""
    path = folder / BINARIES[name]
    # installed with its modules beside it, as a real CLI's install is self-contained
    # (a sandboxed seat sees the program's folder, not this checkout's tests/)
    package = folder / "fake_cli_modules" / "agents"
    if not package.is_dir():
        shutil.copytree(HERE, package, ignore=shutil.ignore_patterns("__pycache__"))
        shutil.copytree(CLI_SAMPLES, package / "cli_samples")
    path.write_text(
        f"#!{sys.executable}\n"
        "import os, sys\n"
        "sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "
        "'fake_cli_modules'))\n"
        "from agents.fake_cli import main\n"
        f"sys.exit(main({name!r}, {sample!r}))\n"
    )
    path.chmod(0o755)
    return path


def load_sample(name: str, folder: Path = CLI_SAMPLES) -> dict[str, Any]:
    """A captured sample of tests/data/cli_samples/ (see its README.md)."""
    sample: dict[str, Any] = json.loads((folder / f"{name}.json").read_text())
    return sample


def _replay(name: str, sample: str, args: list[str]) -> int:
    """Be the version `sample` was captured from: its version line, or its output."""
    doc = load_sample(sample, HERE / "cli_samples")
    assert doc["cli"] == name, (doc["cli"], name)
    if args == ["--version"]:
        print(doc["version_output"])
        return 0
    stdin = "" if sys.stdin is None or sys.stdin.isatty() else sys.stdin.read()
    call = {"argv": args, "stdin": stdin, "sample": sample}
    with open(sys.argv[0] + ".calls.jsonl", "a") as handle:
        handle.write(json.dumps(call) + "\n")
    # files the CLI wrote beside its output, where this command line names them
    for name, text in (doc.get("files") or {}).items():
        for arg in args:
            path = arg.split("=", 1)[-1]
            if os.path.basename(path) == name:
                with open(path, "w") as handle:
                    handle.write(text)
    sys.stdout.write(doc["stdout"])
    sys.stderr.write(doc["stderr"])
    code: int = doc["exit_code"]
    return code


def _option(args: list[str], *names: str) -> str | None:
    """The value of the last of `names` in args, as `--x=v` or `--x v`."""
    found = None
    for i, arg in enumerate(args):
        for name in names:
            if arg == name and i + 1 < len(args):
                found = args[i + 1]
            elif arg.startswith(name + "="):
                found = arg[len(name) + 1 :]
    return found


def prompt_of(name: str, args: list[str], stdin: str) -> str | None:
    """Where the CLI itself would find the prompt."""
    if name == "cursor":
        return "\n".join(args[args.index("--") + 1 :]) if "--" in args else None
    if name == "aider":
        return _option(args, "--message", "-m")
    if name == "goose":
        return _option(args, "--text", "-t")
    return stdin


def _home_seen() -> dict[str, Any]:
    """What a hostile CLI finds in its HOME: every file (with its text), and which of them
    it managed to change (it tries them all)."""
    home = os.environ.get("HOME", "")
    files: dict[str, str] = {}
    changed: list[str] = []
    for root, _, names in os.walk(home):
        for name in names:
            path = os.path.join(root, name)
            relative = os.path.relpath(path, home)
            with open(path, errors="replace") as handle:
                files[relative] = handle.read()
            try:
                with open(path, "a") as handle:
                    handle.write("tampered")
                changed.append(relative)
            except OSError:
                pass
    return {"HOME": home, "files": files, "changed": sorted(changed)}


def main(name: str, sample: str | None = None) -> int:
    from agents.cli_outputs import SAMPLES

    args = sys.argv[1:]
    if sample is not None:
        return _replay(name, sample, args)
    if args == ["--version"]:
        print(f"{name} 1.2.3 (fake)")
        return 0
    stdin = "" if sys.stdin is None or sys.stdin.isatty() else sys.stdin.read()
    prompt = prompt_of(name, args, stdin)
    call = {
        "argv": args,
        "stdin": stdin,
        "prompt": prompt,
        "cwd": os.getcwd(),
        "env": {k: v for k, v in os.environ.items() if k.startswith("BRIGADE_")},
    }
    if os.environ.get("FAKE_CLI_HOME"):
        call["home"] = _home_seen()
    with open(sys.argv[0] + ".calls.jsonl", "a") as handle:
        handle.write(json.dumps(call) + "\n")
    if os.environ.get("FAKE_CLI_STATE"):
        # like the real CLI, keep the session in its state folder (~/.claude, ...)
        from brigade.adapters import adapter_for

        folder = os.path.expanduser(adapter_for(name).state_paths[0])
        try:
            with open(os.path.join(folder, "fake-sessions.jsonl"), "a") as handle:
                handle.write(json.dumps({"cwd": call["cwd"]}) + "\n")
        except OSError as exc:
            sys.stderr.write(f"Error: {exc.strerror}, open '{exc.filename}'\n")
            return 1
    if prompt is None:
        sys.stderr.write("error: no prompt given\n")
        return 2
    if name in TRUST_REFUSALS:
        flag, refusal = TRUST_REFUSALS[name]
        if flag not in args or "SCENARIO:untrusted" in prompt:
            sys.stderr.write(refusal + "\n")
            return 1
    samples = SAMPLES[name]
    scenario = os.environ.get("FAKE_CLI_SCENARIO") or next(
        (s for s in SCENARIOS if f"SCENARIO:{s}" in prompt and s in samples), "success"
    )
    code, out, err = samples[scenario]
    sys.stdout.write(out)
    sys.stderr.write(err)
    return code
