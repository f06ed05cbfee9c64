"""What real CLIs printed (tests/data/cli_samples/, captured from their packages) as the
adapters read it; older and newer versions of one CLI; the argument parsers' refusals; the
versions each adapter drives."""

from __future__ import annotations

import argparse
import contextlib
import io
from pathlib import Path

import pytest
from agents.fake_cli import CLI_SAMPLES, load_sample

from brigade.adapters import adapter_for
from brigade.adapters.base import Reading, SeatRequest
from brigade.adapters.common import refused_command_line, retry_after
from brigade.adapters.versions import incompatible_detail, older_than, parse_version, supported
from brigade.core.specs import SeatSpec

NOW = 1791367200.0  # 2026-10-07T10:00:00Z
ALL_SAMPLES = sorted(path.stem for path in CLI_SAMPLES.glob("*.json"))
CLAUDE_404 = (
    'API Error: 404 {"type":"error","error":{"type":"not_found_error","message":'
    '"model: claude-fable-9"},"request_id":"req_011CTestFixture0001"}'
)
OPENAI_404 = (
    'unexpected status 404 Not Found: {"error": {"message": "The model `m-1` does not exist or '
    'you do not have access to it.", "type": "invalid_request_error", "param": null, "code": '
    '"model_not_found"}}'
)
OPENAI_404_URL = (
    "unexpected status 404 Not Found: The model `m-1` does not exist or you do not have access "
    "to it., url: http://127.0.0.1:18766/v1/responses, request id: req_test_fixture_0001"
)
QWEN_404 = "[API Error: 404 The model `m-1` does not exist or you do not have access to it.]"

AIDER_EDIT = (
    "I'll add the word.\n\nREADME.md\n```\n<<<<<<< SEARCH\nhello\n=======\nhello world\n"
    ">>>>>>> REPLACE\n```\n\nDone."
)

AIDER_EDIT_NOTICE = (
    "Here is the fix.\n\nREADME.md\n```\n<<<<<<< SEARCH\n"
    "litellm.RateLimitError: RateLimitError: rate limit exceeded\n=======\nhello world\n"
    ">>>>>>> REPLACE\n```"
)

# sample -> (answer, fault kind, fault message or None for "any", input, output, cost)
EXPECTED: dict[str, tuple[str, str | None, str | None, int | None, int | None, float | None]] = {
    "aider-0.72.0-effort": (
        "",
        "cli_incompatible",
        "aider: error: unrecognized arguments: --reasoning-effort",
        *[None] * 3,
    ),
    "aider-0.86.2-401": (
        "",
        "auth",
        "litellm.AuthenticationError: AuthenticationError: OpenAIException - Incorrect API key "
        "provided: sk-refused. You can find your API key at "
        "https://platform.openai.com/account/api-keys.",
        *[None] * 3,
    ),
    "aider-0.86.2-404": (
        "",
        "model_unavailable",
        "litellm.NotFoundError: OpenAIException - The model `m-missing` does not exist or you do "
        "not have access to it.",
        *[None] * 3,
    ),
    "aider-0.86.2-429": (
        "",
        "rate_limited",
        "litellm.RateLimitError: RateLimitError: OpenAIException - Rate limit reached for "
        "requests. Please try again in 20s.",
        *[None] * 3,
    ),
    # litellm names a dropped connection an InternalServerError: still a dropped connection
    # the model's context window ran out: the seat's own end (OWN), no fault, 161 tokens sent
    # "6.0k sent" counts the 1.2k cache write twice: input is 4800 (1200 + 1200 + 2400)
    "aider-0.86.2-anthropic-ok": ("All good.", None, None, 4800, 345, 0.01),
    "aider-0.86.2-anthropic-529": (
        "",
        "overloaded",
        'litellm.InternalServerError: AnthropicError - {"type": "error", "error": {"type": '
        '"overloaded_error", "message": "Overloaded"}}',
        *[None] * 3,
    ),
    "aider-0.86.2-context": ("", None, None, 161, 0, None),
    "aider-0.86.2-drop": (
        "",
        "transport_drop",
        "litellm.InternalServerError: InternalServerError: OpenAIException - Connection error.",
        *[None] * 3,
    ),
    "aider-0.86.2-quota": (
        "",
        "quota",
        "litellm.RateLimitError: RateLimitError: OpenAIException - You exceeded your current "
        "quota, please check your plan and billing details. For more information on this error, "
        "read the docs: https://platform.openai.com/docs/guides/error-codes/api-errors.",
        *[None] * 3,
    ),
    "aider-0.86.2-500": (
        "",
        "provider_5xx",
        "litellm.InternalServerError: InternalServerError: OpenAIException - The server had an "
        "error while processing your request. Sorry about that!",
        *[None] * 3,
    ),
    "aider-0.86.2-529": (
        "",
        "overloaded",
        "litellm.APIError: APIError: OpenAIException - Overloaded",
        *[None] * 3,
    ),
    # aider prints no cost for a model it has no price of: unknown, never 0
    "aider-0.86.2-dumb": ("All good.", None, None, 1200, 4, None),
    "aider-0.86.2-ok": ("All good.", None, None, 1200, 4, None),
    "aider-0.86.2-release-notes": ("All good.", None, None, 1200, 4, None),
    "aider-0.86.2-priced": ("All good.", None, None, 1200, 4, 0.00018),
    # two requests (aider added the file the reply named and asked again): the last reply as
    # the model wrote it, from aider's chat history, never stdout's diff of it
    "aider-0.86.2-edit": (AIDER_EDIT, None, None, 2400, 8, None),
    # a failed edit quoting a line like aider's error notice, reflected on three times: no
    # fault (aider's own lines follow that one), the last reply from the history
    "aider-0.86.2-edit-notice": (AIDER_EDIT_NOTICE, None, None, 4800, 16, 0.01),
    # replies that look like aider's own lines are the model's words, as its history keeps
    # them: never an empty answer (a fault), a reply cut at a quote, or usage it did not spend
    "aider-0.86.2-notice-reply": (
        "litellm.RateLimitError: RateLimitError: rate limit exceeded",
        None,
        None,
        1200,
        4,
        None,
    ),
    "aider-0.86.2-quote-reply": (
        "Here is the poem:\n> roses are red  \n> violets are blue  \nThat is all.",
        None,
        None,
        1200,
        4,
        None,
    ),
    "aider-0.86.2-usage-reply": (
        "The answer is 4.\nTokens: 1..2 sent, 3 received.\n\n"
        "Tokens: 0 sent, 999k cache write, 0 received.\n\nDone.",
        None,
        None,
        1200,
        4,
        None,
    ),
    "claude-1.0.30-400": ("", "quota", "Credit balance is too low", 0, 0, 0.0),
    "claude-1.0.30-404": ("", "model_unavailable", CLAUDE_404, 0, 0, 0.0),
    "claude-1.0.30-effort": (
        "",
        "cli_incompatible",
        "error: unknown option '--effort'",
        *[None] * 3,
    ),
    "claude-1.0.30-ok": ("All good.", None, None, 12, 5, 0.00011100000000000001),
    "claude-1.0.30-strict": (
        "",
        "cli_incompatible",
        "error: unknown option '--strict-mcp-config'",
        *[None] * 3,
    ),
    "claude-2.1.38-404": (
        "",
        "model_unavailable",
        "There's an issue with the selected model (claude-fable-9). It may not exist or you may "
        "not have access to it. Use --model to pick a different model.",
        0,
        0,
        0.0,
    ),
    "claude-2.1.38-effort-value": (
        "",
        "cli_incompatible",
        "error: option '--effort <level>' argument 'xhigh' is invalid. It must be one of: low, "
        "medium, high, max",
        *[None] * 3,
    ),
    "claude-2.1.38-ok": ("All good.", None, None, 12, 4, 0.000096),
    "codex-0.42.0-404": ("", "model_unavailable", OPENAI_404, *[None] * 3),
    "codex-0.42.0-offline": (
        "",
        "transport_drop",
        "error sending request for url (https://api.openai.com/v1/responses)",
        *[None] * 3,
    ),
    "codex-0.42.0-ok": ("All good.", None, None, 1200, 4, None),
    "codex-0.44.0-404": ("", "model_unavailable", OPENAI_404, None, None, None),
    "codex-0.44.0-bad-sandbox": (
        "",
        "cli_incompatible",
        "error: invalid value 'readonly' for '--sandbox <SANDBOX_MODE>'",
        *[None] * 3,
    ),
    "codex-0.44.0-ok": ("All good.", None, None, 1200, 4, None),
    "codex-0.44.0-unexpected": (
        "",
        "cli_incompatible",
        "error: unexpected argument '--bogus-flag' found",
        *[None] * 3,
    ),
    "codex-0.99.0-404": ("", "model_unavailable", OPENAI_404_URL, None, None, None),
    "codex-0.99.0-ok": ("All good.", None, None, 1200, 4, None),
    "codex-0.99.0-app-server-404": ("", "model_unavailable", OPENAI_404_URL, None, None, None),
    "codex-0.99.0-app-server-ok": ("All good.", None, None, 1200, 4, None),
    "cursor-2026.09.10-model": (
        "",
        "model_unavailable",
        "ActionRequiredError: Named models unavailable Free plans can only use Auto. Switch to "
        "Auto or upgrade plans to continue.",
        *[None] * 3,
    ),
    # cursor counts fresh, cache-read and cache-write input apart: input is their sum
    "cursor-2026.09.10-ok": ("ok", None, None, 13112 + 7808, 28, None),
    "gemini-0.6.1-404": (
        "",
        "model_unavailable",
        '{"error":{"code":404,"message":"models/gemini-9-pro is not found for API version '
        "v1beta, or is not supported for generateContent. Call ListModels to see the list of "
        'available models and their supported methods.","status":"NOT_FOUND"}}',
        *[None] * 3,
    ),
    "gemini-0.61.0-404": (
        "",
        "model_unavailable",
        "[API Error: models/gemini-9-pro is not found for API version v1beta, or is not "
        "supported for generateContent. Call ListModels to see the list of available models and "
        "their supported methods.]",
        0,
        0,
        None,
    ),
    "gemini-0.6.1-stream-json": (
        "",
        "cli_incompatible",
        'Invalid values: Argument: output-format, Given: "stream-json", Choices: "text", "json"',
        *[None] * 3,
    ),
    "copilot-1.0.102-auth": (
        "",
        "auth",
        "Error: No authentication information found.",
        *[None] * 3,
    ),
    "copilot-1.0.102-unexpected": (
        "",
        "cli_incompatible",
        "error: unexpected argument '--no-such-flag' found",
        *[None] * 3,
    ),
    # its parser prints `run`'s usage alone: no flag named, still never the seat's failure
    "opencode-1.18.33-unknown": (
        "",
        "cli_incompatible",
        "the CLI printed its usage and nothing else: it refused brigade's command line",
        *[None] * 3,
    ),
    # a refused key: exit 0, the typed error in goose's words, totals known to be zero
    "goose-1.50.1-401": (
        "",
        "auth",
        "Ran into this error: Authentication error: Authentication failed for "
        "https://openrouter.ai/api/v1/chat/completions. Status: 401 Unauthorized.",
        0,
        0,
        0.0,
    ),
    "qwen-0.1.4-json": (
        "",
        "auth",
        "Please set an Auth method in your /tmp/clis/home/.qwen/settings.json or specify one of "
        "the following environment variables before running: QWEN_OAUTH, OPENAI_API_KEY",
        *[None] * 3,
    ),
    "qwen-0.1.4-ok": ("All good.", None, None, 1200, 4, None),
    "qwen-0.7.1-401": (
        "",
        "auth",
        "[API Error: 401 Incorrect API key provided: sk-test. You can find your API key at "
        "https://platform.openai.com/account/api-keys.]",
        0,
        0,
        None,
    ),
    "qwen-0.7.1-404": ("", "model_unavailable", QWEN_404, 0, 0, None),
    "qwen-0.7.1-json": (
        "",
        "auth",
        "No auth type is selected. Please configure an auth type (e.g. via settings or "
        "`--auth-type`) before running in non-interactive mode.",
        0,
        0,
        None,
    ),
    "qwen-0.7.1-ok": ("All good.", None, None, 1200, 4, None),
    "qwen-0.24.4-404": ("", "model_unavailable", QWEN_404, 0, 0, None),
    "qwen-0.24.4-ok": ("All good.", None, None, 3600, 12, None),
}


# samples that are the seat's own end, not the apparatus's: (kind, detail)
OWN = {"aider-0.86.2-context": ("agent_error", "Model openai/m-context has hit a token limit!")}


def read_sample(name: str) -> Reading:
    sample = load_sample(name)
    return adapter_for(sample["cli"]).read(
        exit_code=sample["exit_code"],
        stdout=sample["stdout"],
        stderr=sample["stderr"],
        files=sample.get("files"),
        now=NOW,
    )


def test_every_sample_is_expected_and_documented() -> None:
    assert sorted(EXPECTED) == ALL_SAMPLES
    index = (CLI_SAMPLES / "README.md").read_text()
    for name in ALL_SAMPLES:
        sample = load_sample(name)
        assert f"`{name}`" in index, name
        assert name.startswith(f"{sample['cli']}-{sample['version']}-"), name
        assert sample["version"] in sample["version_output"] and sample["source"], name


@pytest.mark.parametrize("name", ALL_SAMPLES)
def test_real_output_is_read(name: str) -> None:
    answer, kind, message, inputs, output, cost = EXPECTED[name]
    reading = read_sample(name)
    assert reading.final_text == answer
    assert (reading.fault.kind if reading.fault else None) == kind
    own = reading.own_failure
    assert ((own.kind, own.detail) if own else None) == OWN.get(name)
    if message is not None:
        assert reading.fault is not None and reading.fault.detail == message
    usage = reading.usage
    got = (usage.input_tokens, usage.output_tokens, usage.cost_usd) if usage else (None,) * 3
    assert got == (inputs, output, cost)
    if cost is not None:
        # a request the provider refused cost nothing, and that is known
        assert usage is not None and usage.cost_source == "reported"


@pytest.mark.parametrize(
    ("older", "newer"),
    [
        ("claude-1.0.30-ok", "claude-2.1.38-ok"),
        ("claude-1.0.30-404", "claude-2.1.38-404"),
        ("codex-0.42.0-ok", "codex-0.44.0-ok"),
        ("codex-0.42.0-404", "codex-0.44.0-404"),
        ("codex-0.44.0-ok", "codex-0.99.0-ok"),
        ("codex-0.44.0-404", "codex-0.99.0-404"),
        ("codex-0.99.0-ok", "codex-0.99.0-app-server-ok"),
        ("codex-0.99.0-404", "codex-0.99.0-app-server-404"),
        ("gemini-0.6.1-404", "gemini-0.61.0-404"),
        ("qwen-0.1.4-ok", "qwen-0.7.1-ok"),
        ("qwen-0.7.1-ok", "qwen-0.24.4-ok"),
        ("qwen-0.7.1-404", "qwen-0.24.4-404"),
        ("qwen-0.1.4-json", "qwen-0.7.1-json"),
    ],
)
def test_an_older_and_a_newer_version_mean_the_same(older: str, newer: str) -> None:
    """Version drift: the events change shape (codex's `msg` events before 0.44, qwen's json
    document before its message array, claude's labels); the reading does not."""
    old, new = read_sample(older), read_sample(newer)
    assert old.final_text == new.final_text
    assert (old.fault and old.fault.kind) == (new.fault and new.fault.kind)
    assert (old.usage is None) == (new.usage is None) or old.fault is not None


def test_codex_before_044_keeps_a_transcript() -> None:
    reading = read_sample("codex-0.42.0-404")
    assert reading.transcript is not None
    kinds = [entry.kind for entry in reading.transcript]
    # five retry notices, then the error that ended the task
    assert kinds == ["system"] * 5 + ["error"]
    ok = read_sample("codex-0.42.0-ok")
    assert ok.usage is not None and ok.usage.model == "m-1"
    assert [(e.kind, e.text) for e in ok.transcript or ()] == [("message", "All good.")]


def test_aider_samples_ran_brigades_own_command_line() -> None:
    """Every aider sample is the real aider given exactly the argv the adapter builds (the
    release-notes one: the argv before --no-show-release-notes)."""
    for name in (n for n in ALL_SAMPLES if n.startswith("aider-")):
        sample = load_sample(name)
        argv = sample["argv"]
        model = argv[argv.index("--model") + 1]
        reasoning = (
            argv[argv.index("--reasoning-effort") + 1] if "--reasoning-effort" in argv else None
        )
        request = SeatRequest(
            seat=SeatSpec(name="s", cli="aider", model=model, reasoning=reasoning),
            prompt="Say: All good.",
            cwd=Path("/tmp/aider-ws"),
            run_dir=Path("/tmp/aider-run"),
            writable="--chat-mode" not in argv,
            cell_id="x",
            coordinate="c:s:1",
        )
        argv = list(adapter_for("aider").invocation(request).argv)
        if name.endswith("-release-notes"):
            argv.remove("--no-show-release-notes")
        assert sample["argv"] == argv, name


# goose 1.50.1's frames as AdamFrisby/CodeyBox recorded them (tests/CodeyBox.Tests/
# GooseStreamParserTests.cs at af05c705): a thinking chunk of a reply, the run's totals
GOOSE_CHUNK = (
    '{"type":"message","message":{"id":"gen-1789551821-abc","role":"assistant","created":'
    '1789551821,"content":[{"type":"thinking","thinking":" reply","signature":""}],"metadata":'
    '{"userVisible":true,"agentVisible":true,"inference":{"provider":"openrouter",'
    '"requestedModel":"nvidia/nemotron-3.5-lightning:free"}}}}'
)
GOOSE_COMPLETE = (
    '{"type":"complete","total_tokens":5357,"input_tokens":5257,"output_tokens":100,'
    '"cache_read_input_tokens":4352,"cache_write_input_tokens":0,"cost_usd":0.0}'
)


def test_goose_stream_chunks_make_one_message() -> None:
    """stream-json prints a reply in chunks of one message id: one answer, the totals read,
    and a cost of 0 with tokens spent is goose not knowing the price, never a known 0."""
    thinking = '{"type":"thinking","thinking":" reply","signature":""}'
    first = GOOSE_CHUNK.replace(thinking, TEXT_CHUNK % "All")
    second = GOOSE_CHUNK.replace(thinking, TEXT_CHUNK % " good.")
    stdout = "\n".join([GOOSE_CHUNK, first, second, GOOSE_COMPLETE]) + "\n"
    reading = adapter_for("goose").read(exit_code=0, stdout=stdout, stderr="", now=NOW)
    assert reading.fault is None and reading.final_text == "All good."
    usage = reading.usage
    assert usage is not None and (usage.input_tokens, usage.output_tokens) == (5257, 100)
    assert usage.cached_input_tokens == 4352 and usage.cost_source == "unknown"
    assert usage.model == "nvidia/nemotron-3.5-lightning:free"
    kinds = [(e.kind, e.text) for e in reading.transcript or ()]
    assert kinds == [("reasoning", " reply"), ("message", "All good.")]


def test_goose_stream_error_event_is_goose_fault() -> None:
    """A run that failed ends on an `error` event in place of `complete`: its words."""
    stdout = GOOSE_CHUNK + '\n{"type":"error","error":"Stream decode error: unexpected end"}\n'
    reading = adapter_for("goose").read(exit_code=1, stdout=stdout, stderr="", now=NOW)
    assert reading.final_text == "" and reading.own_failure is None
    assert reading.fault is not None and reading.fault.kind == "unknown"
    assert reading.fault.detail == "Stream decode error: unexpected end"


TEXT_CHUNK = '{"type":"text","text":"%s"}'


# -- argument parsers ---------------------------------------------------------------


def argparse_refusal(*argv: str) -> str:
    """What python's argparse (aider's, through configargparse) prints for argv."""
    parser = argparse.ArgumentParser(prog="aider")
    parser.add_argument("--chat-mode", choices=["code", "ask", "architect"])
    parser.add_argument("--message")
    err = io.StringIO()
    with contextlib.redirect_stderr(err), pytest.raises(SystemExit):
        parser.parse_args(list(argv))
    return err.getvalue()


@pytest.mark.parametrize(
    ("stderr", "line", "flag"),
    [
        # commander.js (claude 1.0.30, captured; cursor-agent uses it too)
        ("error: unknown option '--effort'\n", "error: unknown option '--effort'", "--effort"),
        (
            "error: unknown option '--verbos'\n(Did you mean --verbose?)\n",
            "error: unknown option '--verbos'",
            "--verbos",
        ),
        (
            "error: option '--output-format <format>' argument 'stream-json' is invalid. "
            "Allowed choices are text, json.\n",
            "error: option '--output-format <format>' argument 'stream-json' is invalid. "
            "Allowed choices are text, json.",
            "--output-format",
        ),
        # yargs (gemini, qwen, opencode): after its usage text
        (
            "Usage: gemini [options]\n\nOptions:\n  -m, --model  Model  [string]\n\n"
            "Unknown arguments: approval-mode, approvalMode\n",
            "Unknown arguments: approval-mode, approvalMode",
            "--approval-mode",
        ),
        ("Usage: qwen [options]\n\nUnknown argument: x\n", "Unknown argument: x", "-x"),
        # clap 2/3 (older Rust CLIs)
        (
            "error: Found argument '--json' which wasn't expected, or isn't valid in this "
            "context\n\nUSAGE:\n    codex exec [OPTIONS]\n",
            "error: Found argument '--json' which wasn't expected, or isn't valid in this context",
            "--json",
        ),
        # click 8.5.1 and 7.x, as they print it
        (
            "Usage: k.py [OPTIONS]\nTry 'k.py --help' for help.\n\nError: No such option "
            "'--verbos'. Did you mean '--verbose'?\n",
            "Error: No such option '--verbos'. Did you mean '--verbose'?",
            "--verbos",
        ),
        ("Error: No such option: --effort\n", "Error: No such option: --effort", "--effort"),
        (
            "Error: Invalid value for '--output-format': 'stream-json' is not one of 'text', "
            "'json'.\n",
            "Error: Invalid value for '--output-format': 'stream-json' is not one of 'text', "
            "'json'.",
            "--output-format",
        ),
        # cobra/pflag (ollama)
        ("Error: unknown flag: --think\n", "Error: unknown flag: --think", "--think"),
        (
            "Error: unknown shorthand flag: 'x' in -x\n",
            "Error: unknown shorthand flag: 'x' in -x",
            "x",
        ),
        (
            'Error: invalid argument "maybe" for "--think" flag: use true, false or a level\n',
            'Error: invalid argument "maybe" for "--think" flag: use true, false or a level',
            "--think",
        ),
    ],
)
def test_each_parser_refusal_is_recognised(stderr: str, line: str, flag: str) -> None:
    found = refused_command_line(stderr)
    assert found is not None
    assert found[0] == line
    assert found[1] in (flag, f"-{flag}")


def test_argparse_refusals_as_argparse_prints_them() -> None:
    unknown = argparse_refusal("--bogus")
    assert unknown.endswith("aider: error: unrecognized arguments: --bogus\n")
    assert refused_command_line(unknown) == (
        "aider: error: unrecognized arguments: --bogus",
        "--bogus",
    )
    choice = argparse_refusal("--chat-mode", "plan")
    found = refused_command_line(choice)
    assert found is not None and found[1] == "--chat-mode"
    assert found[0].startswith("aider: error: argument --chat-mode: invalid choice: 'plan'")


@pytest.mark.parametrize(
    "stderr",
    [
        "error: the agent wrote an unknown option into the file\n",
        "Error: unknown flag in the user's YAML config (line 3)\n",
        "fatal: not a git repository\n",
    ],
)
def test_other_errors_are_no_refusal(stderr: str) -> None:
    assert refused_command_line(stderr) is None


# -- versions -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "version"),
    [
        ("2.1.38 (Claude Code)", (2, 1, 38)),
        ("codex-cli 0.44.0", (0, 44, 0)),
        ("0.6.1", (0, 6, 1)),
        ("aider 0.86.2", (0, 86, 2)),
        ("ollama version is 0.12.6", (0, 12, 6)),
        ("2025.09.18-7ae6800", (2025, 9, 18)),
        ("version unknown", None),
        (None, None),
    ],
)
def test_parse_version(text: str | None, version: tuple[int, ...] | None) -> None:
    assert parse_version(text) == version


def test_older_than() -> None:
    assert older_than("1.0.30 (Claude Code)", "2.1.38")
    assert older_than("2.1.37 (Claude Code)", "2.1.38")
    assert not older_than("2.1.38 (Claude Code)", "2.1.38")
    assert not older_than("2.1.290 (Claude Code)", "2.1.38")
    assert older_than("0.11", "0.11.3") and not older_than("0.12", "0.11.3")
    # what cannot be compared is not called old
    assert not older_than(None, "2.1.38") and not older_than("1.0", None)
    assert supported("2.1.38") == "2.1.38 or newer"
    assert supported(None) == "no minimum version known"


def test_the_hint_names_the_version_and_the_flag() -> None:
    assert incompatible_detail(
        "claude", "2.1.38", "1.0.30 (Claude Code)", "error: unknown option '--effort'"
    ) == (
        "error: unknown option '--effort' (claude 1.0.30 (Claude Code) refused --effort; "
        "brigade's claude adapter needs 2.1.38 or newer: upgrade it; brigade doctor checks "
        "every seat)"
    )
    # a version new enough: the seat's own settings (a level the CLI does not know)
    refusal = "error: option '--effort <level>' argument 'xhigh' is invalid. It must be one of"
    assert incompatible_detail("claude", "2.1.38", "2.1.38 (Claude Code)", refusal) == (
        f"{refusal} (claude 2.1.38 (Claude Code) refused --effort; brigade's claude adapter "
        "passes it (2.1.38 or newer): check the seat's model and reasoning, or whether this "
        "version dropped the option; brigade doctor checks every seat)"
    )
    assert "(aider (version unknown) refused --bogus;" in incompatible_detail(
        "aider", None, None, "aider: error: unrecognized arguments: --bogus"
    )
    # a version line that names the CLI is not named twice
    refusal = "aider: error: unrecognized arguments: --reasoning-effort"
    assert f"{refusal} (aider 0.72.0 refused --reasoning-effort; " in incompatible_detail(
        "aider", "0.73.0", "aider 0.72.0", refusal
    )
    assert "(codex-cli 0.44.0 refused --sandbox; " in incompatible_detail(
        "codex", "0.42.0", "codex-cli 0.44.0", "error: invalid value 'x' for '--sandbox <MODE>'"
    )


@pytest.mark.parametrize(
    ("text", "hours"),
    [
        # a date without a year, in the zone given: the next one to come
        ("You're out of extra usage · resets Apr 24, 4am (Asia/Tokyo)", 4761.0),
        ("You're out of extra usage · resets Mar 5 at 10pm (America/Chicago)", 3594.0),
        ("You're out of extra usage · resets Feb 4, 8pm (Europe/Budapest)", 2889.0),
        ("You're out of extra usage · resets 9am (America/Cordoba)", 2.0),
        ("You've hit your usage limit. Try again at Oct 8th, 2026 10:03 PM.", 36.05),
    ],
)
def test_reset_times_users_paste(text: str, hours: float) -> None:
    # anthropics/claude-code#42654, #30379, #22603 (versions 2.1.90, 2.1.63, 2.1.23)
    assert round(retry_after(text, NOW) / 3600, 2) == hours  # type: ignore[operator]


def test_samples_are_installed_with_the_fake(tmp_path: Path) -> None:
    from agents.fake_cli import install

    install(tmp_path, "claude", sample="claude-1.0.30-effort")
    assert (tmp_path / "fake_cli_modules" / "agents" / "cli_samples" / "README.md").is_file()
