"""aider: `aider --message`, no commits, history files kept in the run folder.

aider has no structured output: stdout holds its banner, the reply, then a
`Tokens: ... sent, ... received. Cost: $... message, $... session.` line per
model call. A provider error is printed as `litellm.<ErrorClass>: <message>`
(aider exits 0 even then); the class names the fault. The reply on stdout is
not always the model's words (a whole-file edit is shown as a diff, a file
aider adds to the chat is named above the next reply); its chat history file,
kept in the run folder, holds them as the model wrote them, aider's own lines
quoted (`> ...`, ending in two spaces) and the prompt's marked `#### `: the
answer is the last reply there when there is one.
"""

from __future__ import annotations

import re

from brigade.adapters.base import OwnFailure, SeatRequest
from brigade.adapters.common import (
    AgentCli,
    ArgvPlan,
    CliOutput,
    Parsed,
    classify_fault,
    fault,
    one_line,
    opt,
)
from brigade.core.taxonomy import FaultKind
from brigade.core.usage import Usage, reported_cost

# aider's numbers: a count (`345`, `1.2k`, `1234k`) and a dollar amount; a line of the
# model's reply can look like its report, so nothing here may match what float() refuses
# (`1..2`) or what is too long to be a count (400 digits are an infinite float)
_COUNT = r"\d{1,12}(?:\.\d{1,6})?k?"
_DOLLARS = r"\d{1,12}(?:\.\d{1,12})?"
_TOKENS = re.compile(
    rf"^Tokens: (?P<sent>{_COUNT}) sent(?:, (?P<write>{_COUNT}) cache write)?"
    rf"(?:, (?P<hit>{_COUNT}) cache hit)?, (?P<received>{_COUNT}) received\."
    rf"(?: Cost: \$(?P<message>{_DOLLARS}) message, \$(?P<session>{_DOLLARS}) session\.)?$"
)
_COST = re.compile(
    rf"^Cost: \$(?P<message>{_DOLLARS}) message, \$(?P<session>{_DOLLARS}) session\.$"
)
_LITELLM = re.compile(r"^litellm\.(?P<name>\w+):\s*(?P<message>.*)$")
_MODEL = re.compile(r"^(?:Main model|Model): (?P<model>\S+) with ")
# what aider prints when the model's context window (or output limit) ran out
_TOKEN_LIMIT = re.compile(r"^Model \S+ has hit a token limit!$")
# what aider prints around a failed model call (never the model's words), and the
# release notes' address it prints on a version's first run unless told not to
_NOTICES = re.compile(
    r"^(?:litellm\.\w+:|Retrying in [\d.]+ seconds\.\.\.$|Empty response received from LLM"
    r"|The API provider(?:'s)? |Insufficient credits with the API provider"
    r"|https://aider\.chat/HISTORY\.html#release-notes$)"
)

# the address aider prints below its advice on an error (the provider's page on it)
_URL = re.compile(r"^https?://\S+$")

# how far down aider's banner may start
_BANNER_WITHIN = 20

# aider's chat history (in the run folder): where it keeps the model's replies as written
HISTORY = "aider.chat.history.md"
_SESSION = "# aider chat started at "
# its usage report of a model call and a line of the prompt, as the history keeps them
_REPORTED = re.compile(r"^> Tokens: .* received\..*  $")
_PROMPT = re.compile(r"^#### .*  $")

# litellm's exception classes, as aider prints them, and the fault each is
_LITELLM_KINDS: dict[str, FaultKind | None] = {
    "AuthenticationError": "auth",
    "PermissionDeniedError": "auth",
    "RateLimitError": "rate_limited",
    "ServiceUnavailableError": "overloaded",
    "InternalServerError": "provider_5xx",
    "BadGatewayError": "provider_5xx",
    "APIConnectionError": "transport_drop",
    "Timeout": "transport_drop",
    "NotFoundError": None,
    "ContextWindowExceededError": None,
    "ContentPolicyViolationError": None,
}


def _tokens(value: str | None) -> int | None:
    """aider's token count: an integer below 1000, else thousands (`1.2k`, `12k`)."""
    if value is None:
        return None
    if value.endswith("k"):
        return round(float(value[:-1]) * 1000)
    return int(float(value))


def _litellm_kind(name: str, message: str) -> FaultKind | None:
    by_text = classify_fault(message)
    if by_text == "model_unavailable":
        # a NotFoundError or BadRequestError about the model: the roster's, not the seat's
        return by_text
    if name in _LITELLM_KINDS:
        kind = _LITELLM_KINDS[name]
        # a 429 for an empty balance, a 5xx that is an overload: the message is more precise
        if kind in ("rate_limited", "provider_5xx") and by_text in ("quota", "overloaded"):
            return by_text
        # litellm names a connection that dropped an InternalServerError too: the provider's
        # part of its message (after `OpenAIException - `, `AnthropicError - `) says which
        said = classify_fault(message.split(" - ", 1)[-1])
        if kind == "provider_5xx" and said == "transport_drop":
            return said
        return kind
    # APIError, BadRequestError...: only an account problem is the apparatus's
    return by_text if name == "APIError" or by_text in ("auth", "quota") else None


class AiderAdapter(AgentCli):
    """aider with `--message`, no commits, history files kept in the run folder."""

    name = "aider"
    # --reasoning-effort came in 0.73.0 (0.72.0 has none); the other flags are older
    min_version: str | None = "0.73.0"
    binary = "aider"
    state_paths = ("~/.aider",)
    # the keys its OpenRouter login saved; not ~/.aider.conf.yml or ~/.env
    auth_files = ("~/.aider/oauth-keys.env",)

    def _plan(self, request: SeatRequest) -> ArgvPlan:
        seat = request.seat
        read_only: tuple[str, ...] = ()
        if not request.writable:
            # Ask mode has no edit format: the model's reply is never applied to files.
            read_only = ("--chat-mode", "ask", "--no-suggest-shell-commands")
        args = (
            # --yes-always answers aider's own questions; the settings after it stop
            # it from committing, touching .gitignore, opting in to analytics or
            # opening a browser on the user's behalf (the release notes it offers on
            # a version's first run, which also print their URL above the reply).
            "--yes-always",
            "--no-auto-commits",
            "--no-dirty-commits",
            "--no-gitignore",
            "--no-analytics",
            "--no-check-update",
            "--no-show-release-notes",
            "--no-show-model-warnings",
            "--no-pretty",
            "--no-stream",
            f"--chat-history-file={request.run_dir / HISTORY}",
            f"--input-history-file={request.run_dir / 'aider.input.history'}",
            *read_only,
            *opt("--model", seat.model),
            *opt("--reasoning-effort", seat.reasoning),
            f"--message={request.prompt}",
        )
        return ArgvPlan(
            args=args,
            stdin_text=None,
            enforcement="none" if request.writable else "hard",
            # aider prints through a console that wraps at the terminal width (80
            # columns without a terminal); a wide one keeps the reply's lines whole
            env={"COLUMNS": "100000"},
            output_files=(HISTORY,),
        )

    def _parse(self, out: CliOutput) -> Parsed:
        lines = out.stdout.splitlines()
        start = 0
        # aider may say things before its banner ("Analytics have been permanently
        # disabled.", "Detected dumb terminal, ..." under TERM=dumb)
        banner = next(
            (i for i, line in enumerate(lines[:_BANNER_WITHIN]) if line.startswith("Aider v")),
            None,
        )
        if banner is not None:
            # the banner ends at the blank line aider prints before the reply
            start = next(
                (i + 1 for i, line in enumerate(lines) if i > banner and not line.strip()),
                len(lines),
            )
        model = next((m["model"] for line in lines[:start] if (m := _MODEL.match(line))), None)
        usage_lines = [i for i, line in enumerate(lines) if _TOKENS.match(line)]
        usage = _usage(lines, usage_lines, model)
        if usage_lines:
            last = usage_lines[-1]
            if len(usage_lines) > 1:
                # several model calls (a reflection): the reply is the last one's
                previous = usage_lines[-2] + 1
                start = previous + (1 if _COST.match(_at(lines, previous)) else 0)
            body, tail = lines[start:last], lines[last + 1 :]
        else:
            body, tail = lines[start:], lines[start:]
        # the run ended on a provider error when one follows the last model call with
        # nothing after it but aider's advice: a line like it inside what aider printed of
        # the model's words (a failed edit quoting its SEARCH lines, the file names a lint
        # names) is followed by more of that, and aider's own lines
        errors = [(i, m) for i, line in enumerate(tail) if (m := _LITELLM.match(line))]
        if errors and all(
            _NOTICES.match(line) or _URL.match(line) or not line.strip()
            for line in tail[errors[-1][0] + 1 :]
        ):
            name, text = errors[-1][1]["name"], errors[-1][1]["message"]
            message = f"litellm.{name}: {text}"
            found = fault(_litellm_kind(name, text), message, out.now)
            if found is not None:
                return Parsed("", fault=found, usage=usage, reported=True)
            own = OwnFailure(kind="agent_error", detail=one_line(message))
            return Parsed("", own_failure=own, usage=usage, reported=True)
        # the model ran out of its context window or its output limit: the seat's own end
        limit = next((line for line in tail if _TOKEN_LIMIT.match(line)), None)
        if limit is not None:
            own = OwnFailure(kind="agent_error", detail=one_line(limit))
            return Parsed("", own_failure=own, usage=usage, reported=True)
        # the model's words as aider kept them, when it kept them: stdout's are aider's
        # rendering, and a reply that is all lines like aider's notices reads as none there
        answer = _last_reply(out.files.get(HISTORY, "")) if usage_lines else None
        if answer is None:
            # retries before a reply leave aider's own notices above it
            answer = "\n".join(line for line in body if not _NOTICES.match(line)).strip()
        return Parsed(answer, usage=usage, reported=bool(usage_lines))


def _last_reply(history: str) -> str | None:
    """The model's reply to the last model call in aider's chat history (of the session this
    run started), or None when that call has none there.

    aider writes a reply after a blank line, right before its usage report (`> Tokens: ...`,
    quoted as all its own messages are, on their first line). Before the reply come the
    prompt (each line `#### `, ending in two spaces) or the report of the call before, then
    aider's own messages (a notice, a question it answered, an edit it could not apply),
    each ending on a line that ends in two spaces: an empty reply leaves no blank line after
    them. A reply's own quotes, headings and lines ending in two spaces stay in it.
    """
    lines = history.splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith(_SESSION)]
    session = lines[starts[-1] + 1 if starts else 0 :]
    reports = [i for i, line in enumerate(session) if _REPORTED.match(line)]
    if not reports:
        return None
    end = reports[-1]
    begin = reports[-2] + 1 if len(reports) > 1 else 0
    # the prompt (the last run of its lines: aider echoes its command line, with a
    # prompt's lines, above it)
    prompt = [i for i in range(begin, end) if _PROMPT.match(session[i])]
    if prompt:
        begin = prompt[-1] + 1
    # aider's own messages: each quoted on its first line, ending on a line that ends in two
    # spaces (a message of several lines, such as its report of an edit it could not apply,
    # quotes its first line only)
    while begin < end and session[begin].startswith(">"):
        while begin < end and not session[begin].endswith("  "):
            begin += 1
        begin += 1
    # then the blank line aider writes before a reply
    while begin < end and session[begin].strip():
        begin += 1
    text = "\n".join(session[begin:end]).strip()
    return text or None


def _at(lines: list[str], index: int) -> str:
    return lines[index] if index < len(lines) else ""


def _usage(lines: list[str], usage_lines: list[int], model: str | None) -> Usage | None:
    if not usage_lines:
        return None
    sent = hit = write = received = 0
    saw_hit = saw_write = False
    session: float | None = None
    for index in usage_lines:
        match = _TOKENS.match(lines[index])
        assert match is not None
        written = _tokens(match["write"]) or 0
        # aider adds the cache write to litellm's prompt count, which already holds it
        # (aider 0.72.0 to 0.86.2, with litellm 1.58.2 to 1.81.10): counted once here
        # (a line that says more was written than sent is none of aider's: never below 0)
        sent += max((_tokens(match["sent"]) or 0) - written, 0)
        received += _tokens(match["received"]) or 0
        if match["hit"]:
            saw_hit, hit = True, hit + (_tokens(match["hit"]) or 0)
        if match["write"]:
            saw_write, write = True, write + written
        cost = match if match["session"] else _COST.match(_at(lines, index + 1))
        if cost is not None:
            session = float(cost["session"])
    return Usage(
        input_tokens=sent,
        cached_input_tokens=hit if saw_hit else None,
        cache_write_tokens=write if saw_write else None,
        output_tokens=received,
        turns=len(usage_lines),
        model=model,
        **reported_cost(session, tokens_spent=bool(sent or received)),
    )
