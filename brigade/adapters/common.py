"""What the agent CLI adapters share: parsing their output, reading faults, building argv.

Each adapter drives one CLI non-interactively with the user's own login (no
provider SDKs, no stored keys): it builds the command line for a read-only or
a writable run and reads the answer, any apparatus fault, the usage and the
transcript back out of what the process printed. Flags follow each CLI's own
documentation.

Faults are read from the CLI's structured output first (an error object, a
status code, an error kind). Only the CLI's own error report is ever matched
as text: an error message inside a structured error, or the error line on
stderr when the CLI printed nothing structured. The answer, the prompt and
anything the agent wrote are never searched for fault words.
"""

from __future__ import annotations

import itertools
import json
import math
import re
import time
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta, tzinfo
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from brigade.adapters.base import (
    Enforcement,
    Fault,
    Invocation,
    OwnFailure,
    Reading,
    SeatRequest,
    last_line,
)
from brigade.core import jsontext
from brigade.core.specs import SeatSpec
from brigade.core.taxonomy import FaultKind
from brigade.core.transcript import Entry
from brigade.core.usage import Usage

# Prepended only where the CLI has no native read-only mode (goose): the run
# then happens in the user's shared checkout, so the instruction is all there is.
READ_ONLY_NOTICE = (
    "This is a read-only run: do not create, modify or delete any files and do not run "
    "commands that change the workspace. Inspect, then answer.\n\n"
)

DETAIL_LIMIT = 500

# What a CLI's own error report means, checked in this order: a message can name
# a 429 and a dropped stream, and the cause that does not go away by waiting wins.
FAULT_PATTERNS: tuple[tuple[FaultKind, re.Pattern[str]], ...] = (
    (
        # a model the account cannot use: before auth, whose "access" words it shares
        "model_unavailable",
        re.compile(
            r"model\W{0,3}\s?\S*\W{0,3} does not exist|\bmodel_not_found\b"
            r"|not_found_error\W+message\W+model:|issue with the selected model"
            r"|models/\S+ is not found|model (?:name )?is not (?:valid|available|supported)"
            r"|model not found|unknown model|invalid model|AI Model Not Found"
            r"|from --model flag is not available|no such model"
            r"|pull model manifest: file does not exist|model \S+ not found"
            r"|named models? (?:are )?unavailable",
            re.IGNORECASE,
        ),
    ),
    (
        "workspace_untrusted",
        re.compile(
            r"not inside a trusted directory|(?:workspace|folder|directory) (?:is )?not trusted"
            r"|untrusted (?:workspace|folder|directory)|trust (?:this|the) (?:workspace|folder)"
            r"|workspace trust",
            re.IGNORECASE,
        ),
    ),
    (
        "auth",
        re.compile(
            r"\b401\b|\bunauthori[sz]ed\b|\bunauthenticated\b"
            r"|authentication (?:failed|required|error)|not (?:logged|signed) in"
            r"|please run /login|(?:log|sign) in again|run '\w+ login'"
            r"|invalid (?:api[ _-]?key|x-api-key|auth(?:entication|orization)? token|credentials)"
            r"|api key not valid|incorrect api key"
            r"|no auth(?:entication)? (?:information|credentials)"
            r"|token (?:has )?(?:expired|been revoked|was revoked)|could not be refreshed"
            r"|missing environment variable: `?\w*(?:key|token)|\b403\b|\bforbidden\b"
            r"|please set an auth method|no auth type is selected|configure an auth type",
            re.IGNORECASE,
        ),
    ),
    (
        "quota",
        re.compile(
            r"\b402\b|payment required|insufficient[_ ](?:quota|credits?|balance|funds)"
            r"|credit balance|out of (?:credits|extra usage)|credits? (?:exhausted|depleted)"
            r"|(?<!disk )quota(?:_| )(?:exceeded|exhausted)|exceeded (?:your )?(?:current )?quota"
            r"|no quota|(?<!not your )usage limit|(?:hit|reached) your (?:(?!rate\b)\w+ )?limit"
            r"|\b\d+-hour limit|(?:session|weekly|monthly|daily) limit|spend(?:ing)? (?:cap|limit)"
            r"|upgrade to (?:plus|pro)\b",
            re.IGNORECASE,
        ),
    ),
    (
        "rate_limited",
        re.compile(
            r"\b429\b|rate[ _-]?limit|too many requests|resource[_ ]exhausted|throttl"
            r"|temporarily limiting requests",
            re.IGNORECASE,
        ),
    ),
    (
        "overloaded",
        re.compile(
            r"\b529\b|\b503\b|overloaded|service unavailable|at capacity|\[unavailable\]",
            re.IGNORECASE,
        ),
    ),
    (
        "provider_5xx",
        re.compile(
            r"(?:status|code|http|error)\W{0,3}50[0-4]\b|\b50[0-4] (?:internal|bad gateway"
            r"|gateway time-?out|server error)|internal server error|server_error|bad gateway"
            r"|gateway time-?out|InternalServerError|experiencing high demand|\[internal\]",
            re.IGNORECASE,
        ),
    ),
    (
        "transport_drop",
        re.compile(
            r"connection (?:reset|refused|closed|aborted|error|failed|lost)|stream disconnected"
            r"|disconnected before|broken pipe|ECONNRESET|ECONNREFUSED|ETIMEDOUT|ENOTFOUND"
            r"|EAI_AGAIN|socket hang up|network error|fetch failed|error sending request"
            r"|APIConnectionError|could not connect|unable to connect|dial tcp"
            r"|(?:request|connection|read) timed out|error while reading the server response",
            re.IGNORECASE,
        ),
    ),
)


def classify_fault(message: str) -> FaultKind | None:
    """The apparatus fault a CLI's own error message clearly reports, or None."""
    for kind, pattern in FAULT_PATTERNS:
        if pattern.search(message):
            return kind
    return None


def kind_for_status(status: int | None, message: str = "") -> FaultKind | None:
    """The fault an HTTP status from the provider means (the message refines 4xx)."""
    if status is None:
        return classify_fault(message) if message else None
    if status in (401, 403):
        return "auth"
    if status == 402:
        return "quota"
    if status == 429:
        return "quota" if classify_fault(message) == "quota" else "rate_limited"
    if status in (503, 529):
        return "overloaded"
    if 500 <= status <= 599:
        return "provider_5xx"
    if status == 408:
        return "transport_drop"
    if 400 <= status <= 499:
        # a refused request is the seat's own failure, unless the message says
        # it was the account (a 400 "credit balance is too low", a bad key)
        kind = classify_fault(message) if message else None
        return kind if kind in ("auth", "quota", "model_unavailable") else None
    return None


def one_line(text: str) -> str:
    """Text on one line, bounded in length (a fault or failure detail)."""
    line = " ".join(text.split())
    return line if len(line) <= DETAIL_LIMIT else line[: DETAIL_LIMIT - 3] + "..."


# What the argument parser of each CLI prints when it refuses the command line
# brigade built (an option or a value its version does not have), named by the
# flag it refused: commander.js (claude, cursor-agent, copilot), yargs (gemini,
# qwen, opencode), clap 4 and older (codex, goose), argparse (aider), cobra/pflag
# (ollama), click. Matched on stderr only, where the parser writes before anything runs.
_REFUSALS: tuple[re.Pattern[str], ...] = (
    re.compile(r"^error: unknown option '(?P<flag>[^']+)'.*$", re.MULTILINE),
    re.compile(
        r"^error: option '(?P<flag>-[^' ]+)[^']*' argument '[^']*' is invalid\..*$", re.MULTILINE
    ),
    re.compile(r"^error: (?:unknown command|too many arguments).*$", re.MULTILINE),
    re.compile(r"^Unknown arguments?: (?P<flag>[^,\s]+).*$", re.MULTILINE),
    re.compile(r"^Invalid values:\s+Argument: (?P<flag>[^,\s]+), Given: .*$", re.MULTILINE),
    re.compile(r"^error: unexpected argument '(?P<flag>[^']+)' found.*$", re.MULTILINE),
    re.compile(r"^error: Found argument '(?P<flag>[^']+)' which wasn't expected.*$", re.MULTILINE),
    re.compile(r"^error: invalid value '[^']*' for '(?P<flag>-[^' ]+)[^']*'.*$", re.MULTILINE),
    re.compile(r"^\S+: error: unrecognized arguments: (?P<flag>\S+).*$", re.MULTILINE),
    re.compile(
        r"^\S+: error: argument (?P<flag>-[^:/\s]+)[^:]*: invalid choice: .*$", re.MULTILINE
    ),
    re.compile(r"^Error: unknown (?:shorthand )?flag: '?(?P<flag>[^'\s]+)'?.*$", re.MULTILINE),
    # click (8.x quotes the option, 7.x follows a colon)
    re.compile(r"^Error: No such option:? '?(?P<flag>-[^'\s]+?)'?\.?(?: .*)?$", re.MULTILINE),
    re.compile(r"^Error: Invalid value for '(?P<flag>-[^' ]+)'[^:]*: .*$", re.MULTILINE),
    re.compile(r'^Error: invalid argument "[^"]*" for "(?P<flag>-[^"]+)" flag.*$', re.MULTILINE),
)


# a parser that refuses a command line by printing its help alone (opencode 1.18's yargs
# prints `run`'s usage and exits 1 with no error line): an options section with the
# parser's own help option (yargs: "show help", commander: "display help for command")
_HELP_SECTION = re.compile(r"^Options:\s*$", re.MULTILINE)
_HELP_OPTION = re.compile(r"^\s+-h, --help\s+(?:show|display) help\b", re.MULTILINE)
USAGE_ONLY = "the CLI printed its usage and nothing else: it refused brigade's command line"


def refused_command_line(stderr: str) -> tuple[str, str | None] | None:
    """The parser's refusal of brigade's command line on stderr, and the flag it names
    (`--effort`), or None when stderr holds no such refusal. A refusal that is the
    parser's help text alone names no flag."""
    for pattern in _REFUSALS:
        found = pattern.search(stderr)
        if found is None:
            continue
        flag = found.groupdict().get("flag")
        if flag and not flag.startswith("-"):
            # yargs names the option without its dashes
            flag = ("-" if len(flag) == 1 else "--") + flag
        return found[0].strip(), flag
    if _HELP_SECTION.search(stderr) and _HELP_OPTION.search(stderr):
        return USAGE_ONLY, None
    return None


def error_report(stderr: str) -> str:
    """The CLI's own error line on stderr: the first `Error...` line, else the last line."""
    for line in stderr.splitlines():
        if re.match(r"\s*(?:error|fatal)\b\W", line, re.IGNORECASE):
            return line.strip()
    return last_line(stderr)


# -- retry hints ----------------------------------------------------------------

_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}
_RELATIVE = re.compile(
    r"(?:retry|try again|wait|resets?|available again)\s+(?:after|in)\s+"
    r"(\d+(?:\.\d+)?)\s*(ms|milliseconds?|s|secs?|seconds?|m|mins?|minutes?|h|hrs?|hours?"
    r"|d|days?)\b",
    re.IGNORECASE,
)
_EPOCH = re.compile(r"limit reached\|(\d{9,11})\b", re.IGNORECASE)
_CLOCK = re.compile(
    r"(?:resets|try again at|reset at)\s+(?:(?P<month>[A-Z][a-z]{2}) (?P<day>\d{1,2})"
    r"(?:st|nd|rd|th)?,?(?: (?P<year>\d{4}),?)?(?: at)? )?"
    r"(?P<hour>\d{1,2})(?::(?P<minute>\d{2}))?\s*"
    r"(?P<half>[ap]\.?m\.?)(?:\s*\((?P<zone>[^)]+)\))?",
    re.IGNORECASE,
)
_DATE = re.compile(r"(?:ends on|resets? on)\s+(\d{1,2})/(\d{1,2})/(\d{4})", re.IGNORECASE)
_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")


def _zone(name: str | None, now: float) -> tzinfo:
    if name:
        try:
            return ZoneInfo(name.strip())
        except (ZoneInfoNotFoundError, ValueError):
            pass
    # CLIs print reset times in the machine's own time zone
    zone = datetime.fromtimestamp(now).astimezone().tzinfo
    assert zone is not None
    return zone


def _wall_clock(match: re.Match[str], now: float) -> float | None:
    zone = _zone(match["zone"], now)
    hour = int(match["hour"]) % 12 + (12 if match["half"].lower().startswith("p") else 0)
    minute = int(match["minute"] or 0)
    current = datetime.fromtimestamp(now, zone)
    if match["month"]:
        month = match["month"].lower()
        if month not in _MONTHS:
            return None
        year = int(match["year"] or current.year)
        try:
            target = datetime(year, _MONTHS.index(month) + 1, int(match["day"]), hour, minute)
            if not match["year"] and target.replace(tzinfo=zone) <= current:
                # a date without a year is the next one to come ("resets Jan 2" in December)
                target = target.replace(year=year + 1)
        except ValueError:  # Feb 30, Feb 29 of a year without it
            return None
        target = target.replace(tzinfo=zone)
    else:
        target = current.replace(hour=hour, minute=minute, second=0, microsecond=0)
        if target <= current:  # a bare time is the next one to come
            target += timedelta(days=1)
    return target.timestamp()


def retry_after(text: str, now: float) -> float | None:
    """Seconds to wait that a CLI's error message names (a delay or a reset time), or None."""
    relative = _RELATIVE.search(text)
    if relative:
        unit = relative[2].lower()
        key = "ms" if unit.startswith("mil") or unit == "ms" else unit[0]
        wait = float(relative[1]) * _UNITS[key]
        # 400 nines are a float, and infinite: no wait JSON can hold
        return wait if math.isfinite(wait) else None
    target: float | None = None
    epoch = _EPOCH.search(text)
    clock = _CLOCK.search(text)
    date = _DATE.search(text)
    if epoch:
        target = float(epoch[1])
    elif clock:
        target = _wall_clock(clock, now)
    elif date:
        month, day, year = (int(part) for part in date.groups())
        try:
            target = datetime(year, month, day, tzinfo=_zone(None, now)).timestamp()
        except (ValueError, OverflowError):  # 13/45/2026, 1/1/0000: no date, no wait
            return None
    return until(target, now)


def until(target: float | None, now: float) -> float | None:
    """Seconds from now to an epoch time; None when it is unknown, past or no finite time."""
    if target is None or not math.isfinite(target) or target <= now:
        return None
    return round(target - now, 3)


# -- JSON output ----------------------------------------------------------------


def opt(flag: str, value: str | None) -> tuple[str, ...]:
    return (flag, value) if value else ()


def opt_eq(flag: str, value: str | None) -> tuple[str, ...]:
    # The `--flag=value` form: the CLI's variadic options cannot swallow it and a
    # value starting with '-' is not mistaken for an option.
    return (f"{flag}={value}",) if value else ()


def reasoning_not_applied(seat: SeatSpec) -> tuple[str, ...]:
    return ("reasoning",) if seat.reasoning else ()


# how many lines that open a JSON document `json_values` tries to read one from, after chatter
DOCUMENT_STARTS = 8


def json_values(text: str) -> list[Any]:
    """Every JSON document in text: the whole of it, else one per line (JSONL)."""
    stripped = text.strip()
    if not stripped:
        return []
    try:
        return [jsontext.parse(stripped, limit=None)]
    except ValueError:
        pass
    values: list[Any] = []
    for line in stripped.splitlines():
        line = line.strip()
        if line.startswith(("{", "[")):
            try:
                value = jsontext.parse(line, limit=None)
            except ValueError:
                continue
            # an empty `{}` or `[]` alone on a line says nothing, and is the one line of a
            # pretty-printed document that parses by itself (`"edits": [` then `{}`)
            if value not in ({}, []):
                values.append(value)
    if values:
        return values
    # A pretty-printed document after lines of chatter (a login notice, a banner). Each try
    # may read far (nested brackets, one a line, parse up to the recursion limit before they
    # fail), so only the first few lines that open a document are tried: a megabyte of
    # `[1,` lines would otherwise take the parser minutes.
    starts = (m.start() + 1 for m in re.finditer(r"\n[{\[]", stripped))
    for start in itertools.islice(starts, DOCUMENT_STARTS):
        try:
            value, _ = json.JSONDecoder().raw_decode(stripped[start:])
        except (ValueError, RecursionError):  # not JSON, or nested beyond the parser
            continue
        return [value]
    return []


def obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def dicts(values: Iterable[Any]) -> list[dict[str, Any]]:
    """The JSON objects among values, arrays flattened one level."""
    found: list[dict[str, Any]] = []
    for value in values:
        if isinstance(value, dict):
            found.append(value)
        elif isinstance(value, list):
            found.extend(item for item in value if isinstance(item, dict))
    return found


def text_of(value: Any) -> str | None:
    """A non-empty string value, else None."""
    return value if isinstance(value, str) and value else None


def count(value: Any) -> int | None:
    """A token count from JSON (a whole number of 0 or more), else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    # `1e999` parses as an infinite float (and a pretty-printed document after chatter
    # may hold NaN): neither is a count, nor can int() take it
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if value < 0 or value != int(value):
        return None
    return int(value)


def status_of(value: Any) -> int | None:
    """An HTTP status from JSON (a number or numeric string in 100-599), else None."""
    if isinstance(value, str) and value.isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    status = int(value)
    return status if 100 <= status <= 599 else None


def message_of(error: Any) -> str | None:
    """A readable message from an error field (string, or object with message/code)."""
    if error is None or error is False:
        return None
    if isinstance(error, str):
        return error or None
    if isinstance(error, dict):
        data = obj(error.get("data"))
        message = error.get("message") or data.get("message") or error.get("name")
        status = error.get("code") or error.get("status") or data.get("statusCode")
        text = str(message) if message else json.dumps(error, sort_keys=True)
        name = error.get("name") or error.get("type")
        if name and message and str(name) != str(message):
            text = f"{name}: {text}"
        if status is not None and str(status) not in text:
            text = f"{text} (status {status})"
        return text
    return str(error)


def fault(
    kind: FaultKind | None, message: str, now: float, wait: float | None = None
) -> Fault | None:
    """A Fault of `kind` with the message (None when there is no kind); the wait it names."""
    if kind is None:
        return None
    if wait is None:
        wait = retry_after(message, now)
    return Fault(kind=kind, detail=one_line(message), retry_after_seconds=wait)


def after_the_end(
    events: list[dict[str, Any]], ends: Collection[str], cli: str
) -> OwnFailure | None:
    """The seat's own failure when events follow the CLI's end-of-run event (a `type` in
    `ends`), else None.

    A CLI prints its end-of-run report last, once. A process the seat ran can open the
    CLI's stdout through /proc and append lines, a fault's report among them: they are
    never the CLI's, and make the run the seat's own failure rather than an apparatus
    fault (not scored, retried) or an answer.
    """
    first = next((i for i, e in enumerate(events) if e.get("type") in ends), None)
    if first is None or first == len(events) - 1:
        return None
    after = len(events) - 1 - first
    reports = sum(1 for e in events if e.get("type") in ends)
    detail = (
        f"{cli}'s output holds {after} event(s) after its end-of-run report, {reports} such "
        "report(s) in all: lines a process the seat ran wrote into it; none of them is read"
    )
    return OwnFailure(kind="agent_error", detail=detail)


# -- reading a finished process --------------------------------------------------


@dataclass(frozen=True)
class CliOutput:
    """What a finished seat process left: its exit status, its output, the files it wrote."""

    exit_code: int | None
    stdout: str
    stderr: str
    files: Mapping[str, str] = field(default_factory=dict)
    now: float = 0.0


@dataclass(frozen=True)
class Parsed:
    """What an adapter read in its CLI's output.

    - `fault`: a fault the CLI reported in structured form (its kind known)
    - `error`: an error the CLI reported whose kind only its message tells
    - `reported`: the CLI printed its own end-of-run report (a result event, a
      failed turn): then its stderr is not searched for a cause
    - `diagnostic`: the part of stderr that is the CLI's diagnostics, when stderr
      also holds other output (statistics)
    """

    final_text: str
    fault: Fault | None = None
    error: str | None = None
    own_failure: OwnFailure | None = None
    usage: Usage | None = None
    transcript: tuple[Entry, ...] | None = None
    reported: bool = False
    notes: tuple[str, ...] = ()
    diagnostic: str | None = None


def judge(parsed: Parsed, out: CliOutput) -> Reading:
    """Turn what was parsed and the exit status into a Reading, flagging only clear faults."""

    def reading(found: Fault | None = None) -> Reading:
        return Reading(
            final_text=parsed.final_text,
            fault=found,
            own_failure=parsed.own_failure,
            usage=parsed.usage,
            transcript=parsed.transcript,
            notes=parsed.notes,
        )

    if out.exit_code is not None and out.exit_code < 0:
        # Killed by a signal brigade did not send (its time limit's kill is recorded
        # elsewhere): the CLI wrote no report of its own end, and a process the seat ran
        # can write into its output (through /proc) and then kill it. Nothing there is a
        # fault or an answer: the run is the seat's failure, as its signal says.
        return Reading(
            final_text="", usage=parsed.usage, transcript=parsed.transcript, notes=parsed.notes
        )
    if parsed.fault is not None:
        return reading(parsed.fault)
    if parsed.error:
        found = fault(classify_fault(parsed.error), parsed.error, out.now)
        if found is not None:
            return reading(found)
    if out.exit_code is None:
        return reading()  # killed (timeout or signal): the caller records that
    if parsed.own_failure is not None:
        return reading()
    stderr = out.stderr if parsed.diagnostic is None else parsed.diagnostic
    refused = None if parsed.reported else refused_command_line(stderr)
    if out.exit_code != 0 and refused is not None:
        # the CLI ran nothing: its parser refused an option of this version
        return reading(Fault(kind="cli_incompatible", detail=one_line(refused[0])))
    line = "" if parsed.reported else error_report(stderr)
    if out.exit_code != 0:
        found = fault(classify_fault(line), line, out.now, retry_after(stderr, out.now))
        return reading(found)
    if not parsed.final_text.strip():
        found = fault(classify_fault(line), line, out.now) if line else None
        if found is not None:
            return reading(found)
        detail = parsed.error or line or "exited 0 without a final message"
        return reading(Fault(kind="empty_output", detail=one_line(detail)))
    return reading()


@dataclass(frozen=True)
class ArgvPlan:
    """The CLI-specific part of an Invocation."""

    args: tuple[str, ...]
    stdin_text: str | None
    enforcement: Enforcement
    env: Mapping[str, str] = field(default_factory=dict)
    not_applied: tuple[str, ...] = ()
    driver: tuple[str, ...] = ()
    output_files: tuple[str, ...] = ()


class AgentCli:
    """Shared behaviour: subclasses supply the argv plan and the output parser."""

    name: str
    binary: str
    state_paths: tuple[str, ...] = ()
    auth_files: tuple[str, ...] = ()
    min_version: str | None = None

    def invocation(self, request: SeatRequest) -> Invocation:
        """The command, stdin and environment for this seat and prompt."""
        plan = self._plan(request)
        return Invocation(
            argv=(self.binary, *plan.args),
            stdin_text=plan.stdin_text,
            read_only_enforcement=plan.enforcement,
            env=dict(plan.env),
            settings_not_applied=plan.not_applied,
            transport=request.seat.transport,
            driver=plan.driver,
            output_files=plan.output_files,
        )

    def read(
        self,
        *,
        exit_code: int | None,
        stdout: str,
        stderr: str,
        files: Mapping[str, str] | None = None,
        now: float | None = None,
    ) -> Reading:
        """The answer, fault, usage and transcript from the process output."""
        out = CliOutput(
            exit_code=exit_code,
            stdout=stdout,
            stderr=stderr,
            files=dict(files or {}),
            now=time.time() if now is None else now,
        )
        return judge(self._parse(out), out)

    def version_argv(self, seat: SeatSpec) -> tuple[str, ...] | None:
        """The CLI's `--version` command."""
        return (self.binary, "--version")

    def _plan(self, request: SeatRequest) -> ArgvPlan:
        raise NotImplementedError

    def _parse(self, out: CliOutput) -> Parsed:
        return Parsed(final_text=out.stdout.strip())
