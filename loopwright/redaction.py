"""Removes secrets and token-shaped strings from text before it leaves the process.

Everything that is written somewhere a person or a model can read (events, logs, pull
request bodies, comments, commit messages) goes through `Redactor.text` first.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

TOKEN_PATTERN = re.compile(
    r"(?:gh[pousr]_[A-Za-z0-9_]{8,}|github_pat_[A-Za-z0-9_]{8,}|sk-[A-Za-z0-9_\-]{8,})"
)
MASK = "[REDACTED]"


class Redactor:
    """Masks known secret values and anything shaped like a GitHub or model API token."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self._secrets = sorted({s for s in secrets if s and len(s) >= 4}, key=len, reverse=True)

    def text(self, value: str) -> str:
        for secret in self._secrets:
            value = value.replace(secret, MASK)
        return TOKEN_PATTERN.sub(MASK, value)

    def data(self, value: Any) -> Any:
        """Redact every string inside a JSON-shaped value."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {k: self.data(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.data(v) for v in value]
        return value
