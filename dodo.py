"""`doit` brings every cell of a manifest up to date (docs/commands.md: doit manifest=PATH ...)."""

from brigade.dodo import *  # noqa: F403  (DOIT_CONFIG and brigade's task creators)
