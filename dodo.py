"""`doit` brings every cell of a manifest up to date (README.md: doit manifest=PATH ...)."""

from doit import doit_cmd

from brigade.front.tasks import dodo_namespace

# doit parses `name=value` arguments before loading this file
globals().update(dodo_namespace(dict(getattr(doit_cmd, "_CMDLINE_VARS", None) or {})))
