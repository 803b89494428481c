"""Loopwright: a self-correcting coding agent that fixes red CI and proves the fix."""

__version__ = "0.1.0"
