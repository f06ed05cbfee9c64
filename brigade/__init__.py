"""brigade: evaluation runner for AI coding agents, built on doit."""

__version__ = "0.1.0"
