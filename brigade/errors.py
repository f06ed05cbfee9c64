"""Errors that stop a run before it starts: bad input and unusable environments.

An agent that answers wrongly, crashes or times out is a *result* recorded in a
receipt, never one of these. Everything here maps to exit code 2 with one line.
"""


class BrigadeError(Exception):
    """Bad input or an unusable environment; the message is one line for the user."""

    exit_code = 2


class InputError(BrigadeError):
    """A manifest, roster or command-line value is invalid."""


class LockHeld(BrigadeError):
    """Another run holds the output directory."""


class TamperedOutput(BrigadeError):
    """Stored seat output no longer matches its recorded digest."""


class EnvironmentProblem(BrigadeError):
    """The machine cannot run what was asked (e.g. workspace is not a git work tree)."""
