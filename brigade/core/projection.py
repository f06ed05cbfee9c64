"""Projection for anything that leaves the output directory, and the leak check (pure).

Receipts inline full prompts, absolute paths and seat env values. A projected
document replaces prompts by `prompt_digest: sha256:...`, redacts env values
and makes paths relative: inside free text only. Which strings of a document
are free text is said by its *roles* (ROLES below): names (keys, states,
identifiers, digests, schema tags, timestamps) are never touched, paths only
lose what is absolute about them, free text is scrubbed of every secret. The
leak check reads a document with the same roles, so whatever projection writes
passes it, and projection never breaks a document's schema.

Free text from anywhere (answers, transcripts, diffs, logs) goes through
`project_text`: secrets are replaced first, then the text is cut, so no cut or
escaped form of a secret survives.
"""

from __future__ import annotations

import bisect
import heapq
import json
import posixpath
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase
from functools import cached_property
from typing import Any, Literal, Union

import ahocorasick

from brigade.core.identity import text_digest
from brigade.core.jsonpath import format_path

REDACTED = "<redacted>"
PATH_STAND_IN = "<path>"  # an absolute path of this machine outside every known folder
WORKTREE_STAND_IN = "<worktree>"
HOME_STAND_IN = "~"
# Shorter prompts are only matched as whole string values, and shorter env
# values not at all: "1" or "on" would match everywhere. Both are still
# stripped where they live (prompt fields, seat.env).
MIN_SUBSTRING = 6
# Secrets are indexed by their first WINDOW characters (a long key in the
# automaton would overflow the C stack when it is freed); a match of a window
# is confirmed in Python. A text holding the first WINDOW or more characters
# of a prompt or env value holds a cut form of it: that is a leak too.
WINDOW = 32
# strings longer than this are not remembered by the matcher (see Matcher.first)
MEMO_CHARACTERS = 1024
# the name of a writable run's temporary worktree folder (run/worktree.py)
WORKTREE_PREFIX = "brigade-worktree-"
_PATH_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")
# brigade's own tokens inside free text: its stand-ins, digests and the
# placeholders of exec command lines. A secret inside one of them (an env
# value "python" in `{python}`, "redacted" in `<redacted>`) is not a leak.
_PUBLIC = re.compile(
    r"<prompt sha256:[0-9a-f]{64}>|sha256:[0-9a-f]{64}|<redacted>|<workspace>|<manifest-dir>"
    r"|<roster-dir>|<worktree>|<path>|\{python\}|\{roster_dir\}"
)
# An absolute path: slashes, then path components; it is one where it does not
# continue a word or a relative path (`a/b`, `~/x`, `attempt-001/run`: see
# `_starts_a_path`). (`https://host/x` is no path of this machine: `host` is no root.)
_COMPONENT = r"[^\s/\"'`<>|;,(){}\[\]:*?\\]"
_ABSOLUTE = re.compile(rf"(?<!/)/+{_COMPONENT}+(?:/+{_COMPONENT}*)*")
# what a word or a relative path is made of: a slash after one of these continues it
_WORD_CHARS = frozenset(_PATH_CHARS | {"~"})
# a run of these right before a slash is a marker (a diff's `-`, a list's `1`, `__`), not
# a word, when nothing of a word comes before it
_MARKERS = frozenset("-_0123456789")
# paths every machine has, which say nothing about this one (a diff's `--- /dev/null`)
_NEUTRAL_PATHS = frozenset({"/dev/null", "/dev/stdin", "/dev/stdout", "/dev/stderr"})

# A binary hunk of a git diff (`git diff --binary`): base85 of zlib-compressed file
# content, which no search for a secret can read. It is shown as one line, never as its
# data, and the leak check counts any left as a leak.
BINARY_STAND_IN = "binary file changed"
_BINARY_HEAD = "GIT binary patch"
# (a text without it, and without any secret's own text, holds no leak of known paths)
BINARY_HEAD = _BINARY_HEAD
_BINARY_BLOCK = re.compile(
    r"^GIT binary patch(?=\r?$)\r?"
    r"(?:\n(?:literal|delta) \d+\r?(?:\n[^\n]+)*(?:\n(?=\r?\n(?:literal|delta) \d))?)*",
    re.M,
)

Kind = Literal["prompt", "env value", "absolute path", "binary patch"]
Role = Literal["name", "path", "text"]


@dataclass(frozen=True)
class Secrets:
    """What must never appear in an exported file.

    `paths` are the known folders with what they become; `homes` are home
    folders of this machine (a path under one becomes `~/...`); `roots` are
    the names at the top of this machine's file system: any other absolute
    path starting with one of them is a path of this machine, and redacted.
    """

    prompts: frozenset[str]
    paths: tuple[tuple[str, str], ...]  # (absolute path, what it becomes when relativised)
    env_values: frozenset[str]
    homes: tuple[str, ...] = ()
    roots: frozenset[str] = frozenset()

    def items(self) -> Iterator[tuple[str, str]]:
        """(kind, text) pairs, longest first."""
        pairs = (
            [("prompt", p) for p in self.prompts]
            + [("absolute path", p) for p, _ in self.paths]
            + [("env value", v) for v in self.env_values]
        )
        return iter(sorted(pairs, key=lambda pair: -len(pair[1])))

    @cached_property
    def digest(self) -> str:
        """Changes whenever the secrets do (a key for caches of projected files)."""
        material = {
            "prompts": text_digest("\0".join(sorted(self.prompts))),
            "paths": [list(pair) for pair in self.paths],
            "env": text_digest("\0".join(sorted(self.env_values))),
            "homes": list(self.homes),
            "roots": sorted(self.roots),
            "window": WINDOW,
        }
        return text_digest(json.dumps(material, sort_keys=True))

    @cached_property
    def matcher(self) -> Matcher:
        """A multi-secret searcher built once."""
        return Matcher(self)


def escaped_forms(text: str) -> list[str]:
    """How a string reads once escaped: inside JSON (either ensure_ascii), inside a Python
    repr (either quote), inside HTML or XML (`&amp;`, `&lt;`, `&gt;`, quotes as they are or
    as `&quot;` / `&#34;`, apostrophes as they are or as `&#x27;` / `&apos;` / `&#39;`), and
    with its whitespace runs collapsed. Without `text` itself."""
    forms = [
        json.dumps(text)[1:-1],
        json.dumps(text, ensure_ascii=False)[1:-1],
        _python_escaped(text, "'"),
        _python_escaped(text, '"'),
        " ".join(text.split()),
        *_markup_escaped(text),
    ]
    return [form for form in dict.fromkeys(forms) if form != text and len(form) >= MIN_SUBSTRING]


_APOSTROPHES = ("'", "&#x27;", "&apos;", "&#39;")
_QUOTES = ('"', "&quot;", "&#34;")


def _markup_escaped(text: str) -> list[str]:
    """text as HTML or XML writers escape it (html.escape, xml.sax.saxutils, ElementTree),
    in each spelling of quotes and apostrophes they use."""
    if not any(char in text for char in "&<>'\""):
        return []
    base = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    forms = []
    for apostrophe in _APOSTROPHES if "'" in text else ("'",):
        for quote in _QUOTES if '"' in text else ('"',):
            forms.append(base.replace('"', quote).replace("'", apostrophe))
    return forms


def _python_escaped(text: str, quote: str) -> str:
    """The inside of repr(text) when repr chose `quote`."""
    out = []
    for char in text:
        if char == "\\" or char == quote:
            out.append("\\" + char)
        elif char == "\n":
            out.append("\\n")
        elif char == "\r":
            out.append("\\r")
        elif char == "\t":
            out.append("\\t")
        elif not char.isprintable():
            out.append(repr(char)[1:-1])
        else:
            out.append(char)
    return "".join(out)


@dataclass(frozen=True)
class _Form:
    """One searchable form of a secret (the secret itself or an escaped form of it)."""

    text: str
    kind: Kind
    stand_in: str


@dataclass(frozen=True)
class Found:
    """A secret (or a cut form of one) found at text[start:end]."""

    start: int
    end: int
    kind: Kind
    stand_in: str
    what: str  # the form found (for counting), or the absolute path


class Matcher:
    """Finds every secret in a string: an Aho-Corasick automaton (pyahocorasick, in C) of
    the first WINDOW characters of each form of each secret, confirmed in Python.

    Most strings hold no secret: the automaton says so in one pass. A window found
    is confirmed against the forms sharing it (sorted, so the form with the longest
    common prefix is a neighbour of the text in that order): a whole form, or, for
    prompts and env values, a cut form of WINDOW characters or more. Known folders
    must end at a path boundary. Any other absolute path under one of the machine's
    top-level folders is found by pattern.
    """

    def __init__(self, secrets: Secrets) -> None:
        self.exact: dict[str, str] = {}  # short prompts: whole strings only
        self.homes = sorted(secrets.homes, key=len, reverse=True)
        self.roots = secrets.roots
        forms: dict[str, _Form] = {}
        paths: dict[str, _Form] = {}
        for absolute, relative in secrets.paths:
            paths.setdefault(absolute, _Form(absolute, "absolute path", relative))
        for prompt in sorted(secrets.prompts):
            stand_in = f"<prompt {text_digest(prompt)}>"
            if len(prompt) < MIN_SUBSTRING:
                self.exact[prompt] = stand_in
                continue
            for form in (prompt, *escaped_forms(prompt)):
                forms.setdefault(form, _Form(form, "prompt", stand_in))
        for value in sorted(secrets.env_values):
            if len(value) >= MIN_SUBSTRING:
                for form in (value, *escaped_forms(value)):
                    forms.setdefault(form, _Form(form, "env value", REDACTED))
        # window -> (forms sharing it, sorted by text; known folders sharing it, longest
        # first; the length of its longest form)
        self._texts: dict[str, tuple[list[str], list[_Form], int]] = {}
        self._forms = forms
        grouped: dict[str, tuple[list[str], list[_Form]]] = {}
        for text in sorted(forms):
            grouped.setdefault(text[:WINDOW], ([], []))[0].append(text)
        for text in sorted(paths, key=len, reverse=True):
            grouped.setdefault(text[:WINDOW], ([], []))[1].append(paths[text])
        for window, (texts, folders) in grouped.items():
            self._texts[window] = (texts, folders, max(map(len, texts), default=0))
        # every form and known folder, sorted: which of them a cut text's end begins
        self._sorted = sorted({*forms, *paths})
        # env values' forms, and reversed: what a cut marker in a text may have cut short
        values = [text for text, form in forms.items() if form.kind == "env value"]
        self._values = sorted(values)
        self._reversed = sorted(value[::-1] for value in values)
        self._automaton = ahocorasick.Automaton()
        for window in self._texts:
            self._automaton.add_word(window, window)
        if self._texts:
            self._automaton.make_automaton()
        self._first_seen: dict[tuple[str, bool], str | None] = {}
        self._replaced: dict[tuple[str, bool], str] = {}

    # -- finding -----------------------------------------------------------------

    def _confirm(self, text: str, start: int, window: str, paths_only: bool) -> Found | None:
        """The longest secret (or cut form of one) starting at `start`, where `window` is."""
        texts, paths, longest = self._texts[window]
        best: Found | None = None
        for form in paths:  # known folders: whole, and ending at a path boundary
            end = start + len(form.text)
            if text.startswith(form.text, start) and (
                end == len(text) or text[end] not in _PATH_CHARS
            ):
                best = Found(start, end, form.kind, form.stand_in, form.text)
                break
        if paths_only or not texts:
            return best
        if len(window) < WINDOW:  # a form shorter than a window is its own window
            form = self._forms[window]
            found = Found(start, start + len(window), form.kind, form.stand_in, window)
            return found if best is None or found.end > best.end else best
        here = text[start : start + longest]
        position = bisect.bisect_left(texts, here)
        nearest, length = "", 0
        for neighbour in texts[max(0, position - 1) : position + 1]:
            common = _common_prefix(text, start, neighbour)
            if common > length:
                nearest, length = neighbour, common
        if length < WINDOW or (best is not None and best.end >= start + length):
            return best
        form = self._forms[nearest]
        return Found(start, start + length, form.kind, form.stand_in, nearest)

    def _secrets_in(self, text: str, paths_only: bool) -> list[Found]:
        """Secrets in text, leftmost-longest, not overlapping, outside brigade's own tokens."""
        if not self._texts:
            return []
        found: list[Found] = []
        public: list[tuple[int, int]] | None = None
        covered = 0
        pending: list[tuple[int, int, str]] = []  # (start, -length, window)

        def settle(before: int) -> None:
            nonlocal covered, public
            while pending and pending[0][0] < before:
                start, _, window = heapq.heappop(pending)
                if start < covered:
                    continue
                hit = self._confirm(text, start, window, paths_only)
                if hit is None:
                    continue
                if public is None:
                    public = [m.span() for m in _PUBLIC.finditer(text)]
                if any(s <= hit.start and hit.end <= e for s, e in public):
                    continue
                found.append(hit)
                covered = hit.end

        for end, window in self._automaton.iter(text):
            start = end - len(window) + 1
            heapq.heappush(pending, (start, -len(window), window))
            # every later hit starts after end - WINDOW: earlier ones are settled
            settle(end - WINDOW + 1)
        settle(len(text) + 1)
        return found

    def _absolute_paths(self, text: str, taken: list[Found]) -> list[Found]:
        """Absolute paths of this machine in text, outside `taken` and brigade's tokens."""
        if not self.roots or "/" not in text:
            return []
        found: list[Found] = []
        public: list[tuple[int, int]] | None = None
        spans: list[tuple[int, int]] = []
        after: set[int] = set()
        for match in _ABSOLUTE.finditer(text):
            path = match.group().rstrip(".")
            start, end = match.start(), match.start() + len(path)
            first = path.lstrip("/").split("/", 1)[0]
            if first not in self.roots or not _starts_a_path(text, start):
                continue
            if "/" + path.lstrip("/") in _NEUTRAL_PATHS:
                continue
            if public is None:
                public = [m.span() for m in _PUBLIC.finditer(text)]
                spans = public + [(t.start, t.end) for t in taken]
                after = {e for _, e in public} | {t.end for t in taken if t.kind == "absolute path"}
            # inside a secret or a token, or the rest of a known folder's path
            if any(s < end and start < e for s, e in spans) or start in after:
                continue
            found.append(Found(start, end, "absolute path", self._path_stand_in(path), path))
        return found

    def _path_stand_in(self, path: str) -> str:
        """What an absolute path of this machine becomes: `<worktree>/...`, `~/...`, `<path>`."""
        parts = path.split("/")
        for index, part in enumerate(parts):
            if part.startswith(WORKTREE_PREFIX):
                rest = "/".join(parts[index + 1 :])
                return f"{WORKTREE_STAND_IN}/{rest}" if rest else WORKTREE_STAND_IN
        normal = posixpath.normpath("/" + path.lstrip("/"))
        for home in self.homes:
            if normal == home:
                return HOME_STAND_IN
            if normal.startswith(home + "/"):
                return HOME_STAND_IN + normal[len(home) :]
        return PATH_STAND_IN

    def find(self, text: str, *, paths_only: bool = False) -> list[Found]:
        """Every secret in text, in order (known secrets first claim their place); a git
        binary hunk is one too (whatever its data holds)."""
        if not paths_only and text in self.exact:
            stand_in = self.exact[text]
            return [Found(0, len(text), "prompt", stand_in, text)]
        secrets = self._secrets_in(text, paths_only)
        if paths_only:
            secrets = [s for s in secrets if s.kind == "absolute path"]
        elif _BINARY_HEAD in text:
            hunks = binary_hunks(text)
            secrets = [
                s for s in secrets if not any(h.start < s.end and s.start < h.end for h in hunks)
            ]
            secrets = sorted(secrets + hunks, key=lambda f: f.start)
        if not paths_only and self._values and ("..." in text or ELLIPSIS in text):
            secrets = sorted(secrets + self._cut_values(text, secrets), key=lambda f: f.start)
        return sorted(secrets + self._absolute_paths(text, secrets), key=lambda f: f.start)

    def _cut_values(self, text: str, taken: list[Found]) -> list[Found]:
        """Pieces of env values that a cut of the text left beside its cut marker (`...` or
        `…`): an end cut off after MIN_SUBSTRING or more characters (before the marker), or
        a start cut off (after it). Shorter than WINDOW: longer ones are found anyway."""
        found: list[Found] = []
        for marker in ("...", ELLIPSIS):
            at = text.find(marker)
            while at != -1:
                after = at + len(marker)
                for start, end in (
                    self._piece(text[max(0, at - WINDOW + 1) : at], self._values, at, False),
                    self._piece(text[after : after + WINDOW - 1], self._reversed, after, True),
                ):
                    if end > start and not any(t.start < end and start < t.end for t in taken):
                        found.append(Found(start, end, "env value", REDACTED, text[start:end]))
                at = text.find(marker, after)
        return found

    @staticmethod
    def _piece(near: str, forms: list[str], at: int, forward: bool) -> tuple[int, int]:
        """The longest piece of `near` (the text before a marker ending at `at`, or after it
        starting at `at` when `forward`) that is the start (or, forward, the end) of one of
        `forms` (reversed when forward): (start, end) in the text, empty when none."""
        for length in range(len(near), MIN_SUBSTRING - 1, -1):
            piece = near[:length][::-1] if forward else near[-length:]
            index = bisect.bisect_left(forms, piece)
            if index < len(forms) and forms[index].startswith(piece):
                return (at, at + length) if forward else (at - length, at)
        return (0, 0)

    def kinds(self, text: str, *, first_only: bool = False, paths_only: bool = False) -> list[str]:
        """The kinds of secret found in text (all of them, or the first)."""
        found: list[str] = []
        for hit in self.find(text, paths_only=paths_only):
            if hit.kind not in found:
                found.append(hit.kind)
                if first_only:
                    break
        return found

    def first(self, text: str, *, paths_only: bool = False) -> str | None:
        """The kind of the first secret in text, or None."""
        # documents repeat the same strings (keys, states, seat names) thousands of times;
        # long free text (answers, transcripts) seldom repeats: remembering it would keep
        # every answer of a report in memory
        if len(text) > MEMO_CHARACTERS:
            found = self.kinds(text, first_only=True, paths_only=paths_only)
            return found[0] if found else None
        key = (text, paths_only)
        try:
            return self._first_seen[key]
        except KeyError:
            found = self.kinds(text, first_only=True, paths_only=paths_only)
            kind = self._first_seen[key] = found[0] if found else None
            return kind

    def cut_tail(self, text: str) -> int:
        """How many characters at the end of `text` (a text cut short) may be the start of a
        secret too short to be recognised as one (under WINDOW characters: a longer start is
        found and replaced); 0 when none."""
        for length in range(min(WINDOW - 1, len(text)), 0, -1):
            tail = text[-length:]
            at = bisect.bisect_left(self._sorted, tail)
            if at < len(self._sorted) and self._sorted[at].startswith(tail):
                return length
        return 0

    def replace(self, text: str, *, paths_only: bool = False) -> str:
        """Text with every secret replaced by its stand-in (longest match wins)."""
        if len(text) > MEMO_CHARACTERS:
            return self._replace(text, paths_only)
        key = (text, paths_only)
        try:
            return self._replaced[key]
        except KeyError:
            result = self._replaced[key] = self._replace(text, paths_only)
            return result

    def _replace(self, text: str, paths_only: bool) -> str:
        hits = self.find(text, paths_only=paths_only)
        if not hits:
            return text
        pieces: list[str] = []
        last = 0
        for hit in hits:
            pieces.append(text[last : hit.start])
            end, stand_in = hit.end, hit.stand_in
            if hit.kind == "absolute path" and stand_in == ".":
                # `<out>/cells/x` becomes `cells/x`; `<out>` alone becomes `.`
                if text.startswith("/", end):
                    end += 1
                    stand_in = ""
            pieces.append(stand_in)
            last = end
        pieces.append(text[last:])
        return "".join(pieces)

    def counts(self, text: str) -> Counter[tuple[str, str]]:
        """How often each secret (kind, form) occurs in text."""
        return Counter((hit.kind, hit.what) for hit in self.find(text))


def _starts_a_path(text: str, start: int) -> bool:
    """Whether the slash at `start` begins an absolute path: it is at the start of the text,
    or after a character no word or relative path is made of (a space, a quote, `=`, `+`,
    `*`, `#`, a backslash...; an escaped line break `\\n`), or after a run of markers
    (`-`, `_`, digits) that itself follows one of those."""
    index = start
    while index > 0 and text[index - 1] in _MARKERS:
        index -= 1
    if index == 0:
        return True
    before = text[index - 1]
    if before not in _WORD_CHARS:
        return before != "/"  # markers after a slash: a component (`cells/001/run`)
    # an escaped line break or tab (`\n/etc/x` inside a JSON or Python string)
    return before in "ntr" and index >= 2 and text[index - 2] == "\\"


def binary_hunks(text: str) -> list[Found]:
    """The binary hunks of git diffs in text: a `GIT binary patch` line and its `literal N`
    / `delta N` blocks (data lines up to a blank line; to the end of a text cut inside)."""
    return [
        Found(m.start(), m.end(), "binary patch", BINARY_STAND_IN, m.group())
        for m in _BINARY_BLOCK.finditer(text)
    ]


def _common_prefix(text: str, start: int, form: str) -> int:
    """How many leading characters of `form` text has at `start`."""
    if text.startswith(form, start):
        return len(form)
    low, high = 0, min(len(form), len(text) - start)  # text[start:start+low] matches
    while low < high:
        middle = (low + high + 1) // 2
        if text[start + low : start + middle] == form[low:middle]:
            low = middle
        else:
            high = middle - 1
    return low


# Inherited environment variables whose values are credentials (patterns of names, as
# fnmatch reads them, matched in upper case): a CLI usually takes its key from the
# environment brigade runs in, and an agent can print it. The providers' own variables
# are credentials whatever their suffix (ANTHROPIC_AUTH_TOKEN, GOOGLE_API_KEY, ...).
CREDENTIAL_VARIABLES = (
    "*_API_KEY",
    "*_APIKEY",
    "*_API_KEYS",
    "*_TOKEN",
    "*_SECRET",
    "*_SECRET_*",
    "*PASSWORD*",
    "*PASSWD*",
    "*_PRIVATE_KEY",
    "ANTHROPIC_*",
    "CLAUDE_CODE_OAUTH_*",
    "OPENAI_*",
    "AZURE_OPENAI_*",
    "GEMINI_*",
    "GOOGLE_*",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_BEARER_TOKEN_*",
    "GITHUB_TOKEN",
    "GH_TOKEN",
)
# what those patterns take in that is configuration, not a credential: a model's id (it
# names the models in every usage and price table)
NOT_CREDENTIALS = ("*_MODEL", "*_MODELS")
# shorter values are no secret of anyone's ("1", "true", "us-east")
MIN_CREDENTIAL = 8


def credential_values(environ: Mapping[str, str], names: Iterable[str] = ()) -> list[str]:
    """The values in `environ` of credential-like variables (CREDENTIAL_VARIABLES, and the
    roster's `secrets.env` `names`, patterns too) of MIN_CREDENTIAL characters or more."""
    named = [name.upper() for name in names]  # what the roster names always counts
    values = []
    for name, value in environ.items():
        if len(value) < MIN_CREDENTIAL:
            continue
        upper = name.upper()
        if any(fnmatchcase(upper, pattern) for pattern in named) or (
            any(fnmatchcase(upper, pattern) for pattern in CREDENTIAL_VARIABLES)
            and not any(fnmatchcase(upper, pattern) for pattern in NOT_CREDENTIALS)
        ):
            values.append(value)
    return sorted(set(values))


def make_secrets(
    prompts: Iterable[str],
    paths: Iterable[tuple[str, str]],
    env_values: Iterable[str],
    *,
    homes: Iterable[str] = (),
    roots: Iterable[str] = (),
) -> Secrets:
    """Secrets without empty strings or useless root paths."""
    stand_ins: dict[str, str] = {}
    for path, stand_in in paths:
        normal = posixpath.normpath(path) if path else ""
        if len(normal.strip("/")) > 1:
            stand_ins.setdefault(normal, stand_in)  # the first stand-in named wins
    return Secrets(
        prompts=frozenset(p for p in prompts if p.strip()),
        paths=tuple(sorted(stand_ins.items(), key=lambda pair: (-len(pair[0]), pair[0]))),
        env_values=frozenset(v for v in env_values if v.strip()),
        homes=tuple(
            sorted({posixpath.normpath(h) for h in homes if len(posixpath.normpath(h)) > 1})
        ),
        roots=frozenset(r for r in roots if r and "/" not in r),
    )


def scrub_text(text: str, secrets: Secrets) -> str:
    """A string with every secret replaced by its safe stand-in."""
    return secrets.matcher.replace(text)


ELLIPSIS = "…"


def project_text(text: str, secrets: Secrets, limit: int | None = None) -> str:
    """Free text (an answer, a transcript, a diff, a log, a detail) safe to show: secrets
    replaced first, then cut to `limit` characters (an ellipsis marks the cut)."""
    scrubbed = scrub_text(text, secrets)
    if limit is not None and len(scrubbed) > limit:
        return scrubbed[: max(0, limit - len(ELLIPSIS))] + ELLIPSIS
    return scrubbed


def without_cut_secret(text: str, secrets: Secrets) -> str:
    """A text read only in part (its start), without what its end may hold of a secret the
    cut made too short to be found: scrub it after this, as a whole text."""
    cut = secrets.matcher.cut_tail(text)
    return text[: len(text) - cut] if cut else text


def scrub(value: Any, secrets: Secrets) -> Any:
    """Scrub every string value of a JSON value as free text (keys are kept)."""
    return project(value, TEXT, secrets)


# -- roles -----------------------------------------------------------------------

NAME: Role = "name"  # keys, identifiers, enums, digests, timestamps: kept, never searched
PATH: Role = "path"  # a path: relative to the output directory; only absolute paths leak
TEXT: Role = "text"  # free text: every secret is replaced
# a role for a whole value, or per key: "*" any other key, "[]" the items of a list, and
# KEYS the role of an object's keys themselves (names unless it says otherwise)
Roles = Union[Role, Mapping[str, "Roles"]]
KEYS = "<keys>"

# a run's usage: counts and costs are numbers, the cost source an enum; the model ids and
# the session id are what the CLI (an exec: program: anything) wrote, free text
USAGE_ROLES: Roles = {
    "model": TEXT,
    "session_id": TEXT,
    "models": {KEYS: TEXT, "*": NAME},
    "*": NAME,
}

GRADER_RESULT_ROLES: Roles = {
    **dict.fromkeys(
        (
            "schema",
            "grader_id",
            "grader_type",
            "version",
            "status",
            "score",
            "score_min",
            "score_max",
            "duration_seconds",
            "cell_id",
            "output_digest",
            "exit_code",
            "enforcement",  # a command's confinement: {applied, network}, both names
        ),
        NAME,
    ),
    "usage": USAGE_ROLES,  # a judge's usage
    "detail": TEXT,
    "component_checks": {"[]": {"name": TEXT, "detail": TEXT, "*": NAME}},
    "output_refs": {"[]": PATH},
    # grader_result.v2: the logs of the grader's process, a judge's verdict
    "logs": {"*": PATH},
    "judge": {"seat": NAME, "verdict": NAME, "score": NAME, "pass_score": NAME, "*": TEXT},
    "*": TEXT,
}
_SEAT: Roles = {
    **dict.fromkeys(
        ("seat", "model", "reasoning", "transport", "transport_version", "codex_transport"), NAME
    ),
    "cli": TEXT,  # a command line: its paths and secrets go, its {python} stays
    "env": TEXT,  # values redacted whole by the projection; names are keys
    "*": TEXT,
}
# a judge grader's spec carries its seat's identity (written by the plan)
_GRADER_SPEC: Roles = {"type": NAME, "name": NAME, "seat": NAME, "judge_seat": _SEAT, "*": TEXT}
_CELL_FIELDS: dict[str, Roles] = {
    **dict.fromkeys(
        ("schema", "cell_id", "coordinate", "case_id", "prompt_digest", "trial", "execution_mode"),
        NAME,
    ),
    "case": {"id": NAME, "prompt_digest": NAME, "*": TEXT},
    "seat": _SEAT,
    # a case's own workspace: its repository or folder is a path of this machine (shown
    # by the known folder it is in); its commit and digests are names
    "workspace": {"commit": NAME, "digest": NAME, "setup": NAME, "*": TEXT},
}
PLAN_CELL_ROLES: Roles = {**_CELL_FIELDS, "graders": {"[]": _GRADER_SPEC}, "*": TEXT}
RECEIPT_ROLES: Roles = {
    **_CELL_FIELDS,
    **dict.fromkeys(
        (
            "state",
            "attempt",
            "started_at",
            "finished_at",
            "graded_at",
            "manifest_digest",
            "exit_code",
            "duration_seconds",
            "output_digest",
            "changes_digest",
            "score",
            "failure_reason",
            "acceptance",
            "reused_run",
            "grader_keys",
            "reused_grades",
            "attempts_in_run",
            "cli_version",
            "enforcement",
        ),
        NAME,
    ),
    "usage": USAGE_ROLES,
    "attempts_usage": {"[]": {"usage": USAGE_ROLES, "*": NAME}},
    "run_dir": PATH,
    "run_path": PATH,  # relative to the output directory already
    "failure_detail": TEXT,
    "fault": {"kind": NAME, "retry_after_seconds": NAME, "*": TEXT},
    "grader_specs": {"[]": _GRADER_SPEC},
    "graders": {"[]": GRADER_RESULT_ROLES},
    "*": TEXT,
}
PLAN_ROLES: Roles = {
    "schema": NAME,
    "name": NAME,
    "manifest_digest": NAME,
    "cells": {"[]": PLAN_CELL_ROLES},
    "stale_cells": NAME,
    "context": {"*": PATH},
    "prices": NAME,  # model ids and numbers
    "secrets": NAME,  # the names of the variables whose values are secrets
    "adaptive": NAME,  # adaptive trials: rules (numbers, seat names) and case ids
    "*": TEXT,
}
# summary.json's `adaptive`: rules, case and seat names, reasons; a stop's detail is text
_ADAPTIVE_ROLES: Roles = {
    "[]": {"stops": {"[]": {"detail": TEXT, "*": NAME}}, "*": NAME},
}
# summary.json holds counts, statistics and names; anything new in it is free text
SUMMARY_ROLES: Roles = {
    **dict.fromkeys(
        (
            "schema",
            "name",
            "manifest_digest",
            "generated_at",
            "outcome",
            "exit_code",
            "partial_scores_label",
        ),
        NAME,
    ),
    "partial_scores": {"label": NAME, "*": TEXT},
    # usage totals: counts and costs, and the model ids that answered (what the CLIs said)
    "usage_all_attempts": {"models": TEXT, "*": NAME},
    "grader_usage": NAME,
    "by_seat": {
        "*": {
            "usage_all_attempts": {"models": TEXT, "*": NAME},
            "grader_usage": NAME,
            # the seat's cli is a command line (paths, secrets), the models that answered
            # what the CLI said; the configured model and versions are names
            "agent": {"cli": TEXT, "models_used": TEXT, "*": NAME},
            "*": TEXT,
        }
    },
    "trial_stats": {
        "by_seat_case": {"[]": {"seat": NAME, "case": NAME, "*": TEXT}},
        "comparisons": {"[]": {"seats": NAME, "*": TEXT}},
        "*": TEXT,
    },
    "adaptive": _ADAPTIVE_ROLES,
    "*": TEXT,
}


def _child(roles: Roles, key: str) -> Roles:
    if isinstance(roles, str):
        return roles
    return roles.get(key, roles.get("*", TEXT))


def project(value: Any, roles: Roles, secrets: Secrets, out: str | None = None) -> Any:
    """A JSON value with its free text scrubbed and its paths made relative (to `out`),
    as its roles say; names and keys are kept."""
    if isinstance(value, str):
        if roles == TEXT:
            return secrets.matcher.replace(value)
        if roles == PATH:
            return _project_path(value, secrets, out)
        return value
    if roles == NAME or not isinstance(value, (dict, list)):
        return value
    if isinstance(value, list):
        item = _child(roles, "[]")
        return [project(v, item, secrets, out) for v in value]
    projected = {k: project(v, _child(roles, k), secrets, out) for k, v in value.items()}
    keys = _keys_role(roles)
    if keys == NAME:
        return projected
    return _renamed(projected, lambda key: project(key, keys, secrets, out))


def _keys_role(roles: Roles) -> Roles:
    return roles.get(KEYS, NAME) if not isinstance(roles, str) else NAME


def _renamed(value: dict[str, Any], rename: Callable[[str], str]) -> dict[str, Any]:
    """An object with its keys renamed; two keys renamed alike are told apart (`key (2)`)."""
    renamed: dict[str, Any] = {}
    for key, item in value.items():
        new = rename(key)
        if new in renamed:
            count = 2
            while f"{new} ({count})" in renamed:
                count += 1
            new = f"{new} ({count})"
        renamed[new] = item
    return renamed


def blank_text(value: Any, roles: Roles, blank: str = "") -> Any:
    """A JSON value with every free text replaced by `blank` (names and paths kept)."""
    if isinstance(value, str):
        return blank if roles == TEXT else value
    if roles == NAME or not isinstance(value, (dict, list)):
        return value
    if isinstance(value, list):
        item = _child(roles, "[]")
        return [blank_text(v, item, blank) for v in value]
    blanked = {k: blank_text(v, _child(roles, k), blank) for k, v in value.items()}
    keys = _keys_role(roles)
    return blanked if keys == NAME else _renamed(blanked, lambda key: blank_text(key, keys, blank))


def _project_path(path: str, secrets: Secrets, out: str | None) -> str:
    if out is not None and posixpath.isabs(path):
        relative = posixpath.relpath(path, out)
        if not relative.startswith(".."):
            return relative
    return secrets.matcher.replace(path, paths_only=True)


def _strip_prompt(doc: dict[str, Any]) -> dict[str, Any]:
    """Replace `prompt` by `prompt_digest` at this level and inside `case`; redact env."""
    projected = dict(doc)
    if "prompt" in projected:
        projected["prompt_digest"] = text_digest(projected.pop("prompt"))
    case = projected.get("case")
    if isinstance(case, dict) and "prompt" in case:
        case = dict(case)
        case["prompt_digest"] = text_digest(case.pop("prompt"))
        projected["case"] = case
    seat = projected.get("seat")
    if isinstance(seat, dict) and seat.get("env"):
        projected["seat"] = {**seat, "env": {k: REDACTED for k in seat["env"]}}
    # grader specs: a judge's seat carries its env too (a receipt's grader_specs, a plan
    # cell's graders; a receipt's graders are results, which carry none)
    for key in ("grader_specs", "graders"):
        specs = projected.get(key)
        if isinstance(specs, list) and any(_judge_env(spec) for spec in specs):
            projected[key] = [_without_judge_env(spec) for spec in specs]
    return projected


def _judge_env(spec: Any) -> dict[str, Any] | None:
    """The env of a judge grader spec's seat, when it has one."""
    if not isinstance(spec, dict) or not isinstance(spec.get("judge_seat"), dict):
        return None
    env = spec["judge_seat"].get("env")
    return env if isinstance(env, dict) and env else None


def _without_judge_env(spec: Any) -> Any:
    env = _judge_env(spec)
    if env is None:
        return spec
    return {**spec, "judge_seat": {**spec["judge_seat"], "env": {k: REDACTED for k in env}}}


def project_receipt(receipt: Mapping[str, Any], out: str, secrets: Secrets) -> dict[str, Any]:
    """A cell receipt safe to leave the output directory."""
    projected: dict[str, Any] = project(_strip_prompt(dict(receipt)), RECEIPT_ROLES, secrets, out)
    return projected


def project_plan(plan: dict[str, Any], secrets: Secrets) -> dict[str, Any]:
    """plan.json safe to leave the output directory."""
    projected = dict(plan)
    projected["cells"] = [_strip_prompt(cell) for cell in plan.get("cells", [])]
    result: dict[str, Any] = project(projected, PLAN_ROLES, secrets)
    return result


def project_summary(summary: Mapping[str, Any], secrets: Secrets) -> dict[str, Any]:
    """summary.json safe to leave the output directory."""
    result: dict[str, Any] = project(dict(summary), SUMMARY_ROLES, secrets)
    return result


# -- the leak check -------------------------------------------------------------


@dataclass(frozen=True)
class Leak:
    """A secret found in an exported file."""

    file: str
    where: str
    kind: str

    def __str__(self) -> str:
        return f"{self.file}: {self.where}: contains {self.kind}"


def find_leaks_in_json(
    name: str, doc: Any, secrets: Secrets, roles: Roles | None = None
) -> list[Leak]:
    """Every string of a JSON document that holds a secret where its roles allow none,
    with its JSON path. Without roles (a file brigade does not know), every string
    is free text, keys included."""
    leaks: list[Leak] = []
    stack: list[tuple[Any, list[Any], Roles]] = [(doc, [], roles or TEXT)]
    first = secrets.matcher.first
    check_keys = roles is None
    while stack:
        value, path, role = stack.pop()
        if role == NAME:
            continue
        if isinstance(value, dict):
            keys = TEXT if check_keys else _keys_role(role)
            for key, item in value.items():
                if keys != NAME:
                    kind = first(key, paths_only=keys == PATH)
                    if kind:
                        leaks.append(Leak(name, format_path([*path, key]) + " (key)", kind))
                stack.append((item, [*path, key], _child(role, key)))
        elif isinstance(value, list):
            item_role = _child(role, "[]")
            stack.extend(
                (item, [*path, i], item_role)
                for i, item in enumerate(value)
                if isinstance(item, (str, list, dict))  # numbers cannot leak anything
            )
        elif isinstance(value, str):
            kind = first(value, paths_only=role == PATH)
            if kind:
                leaks.append(Leak(name, format_path(path), kind))
    return leaks


def find_leaks_in_text(
    name: str,
    text: str,
    secrets: Secrets,
    skeleton: str | None = None,
    where: str = "(text)",
    names: Iterable[str] = (),
) -> list[Leak]:
    """Secrets in a non-JSON exported file (a rendered report, anything planted).

    A secret inside one of `names` (seat names, case ids, coordinates: identifiers,
    shown as they are) is not a leak. With a `skeleton` (the same file rendered with
    every free text blanked), a short secret (under WINDOW characters) is a leak only
    where the file holds it more often than the skeleton does: a state or a word of
    the page that equals an env value is not a leak; the same value in free text is.
    A longer secret is never a word of the page.
    """
    labels = [n for n in set(names) if n]
    hits = [hit for hit in secrets.matcher.find(text) if not _inside_name(text, hit, labels)]
    allowed: Counter[tuple[str, str]] = Counter()
    if hits and skeleton is not None:
        allowed = Counter(
            (hit.kind, hit.what)
            for hit in secrets.matcher.find(skeleton)
            if len(hit.what) < WINDOW and not _inside_name(skeleton, hit, labels)
        )
    kinds: set[str] = set()
    for hit in hits:
        key = (hit.kind, hit.what)
        if allowed[key] > 0:
            allowed[key] -= 1
        else:
            kinds.add(hit.kind)
    return [Leak(name, where, kind) for kind in sorted(kinds)]


def _inside_name(text: str, hit: Found, names: list[str]) -> bool:
    """Whether the secret found is part of one of `names` written out in text."""
    found = text[hit.start : hit.end]
    for label in names:
        offset = label.find(found)
        while offset != -1:
            if text.startswith(label, hit.start - offset) and hit.start >= offset:
                return True
            offset = label.find(found, offset + 1)
    return False
