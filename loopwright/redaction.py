"""Removes secrets and token-shaped strings from text before it leaves the process.

Everything that is written somewhere a person or a model can read (events, logs, pull
request bodies, comments, commit messages) goes through `Redactor.text` first. Each
configured secret is masked as it is and in the encodings a command could print it in to
get it past a plain match: base64 (standard and URL-safe, at any of the three byte offsets a
longer encoded stream can put it at, padded or not), hex (lower and upper case) and URL
encoding.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import re
import urllib.parse
from collections.abc import Iterable
from typing import Any, TypeVar, cast

R = TypeVar("R")

TOKEN_PATTERN = re.compile(
    r"(?:gh[pousr]_[A-Za-z0-9_]{8,}|github_pat_[A-Za-z0-9_]{8,}|sk-[A-Za-z0-9_\-]{8,})"
)
TOKEN_SHORTEST = len("sk-") + 8
"""No token `TOKEN_PATTERN` matches is shorter; each holds `_` or `sk-`."""
MASK = "[REDACTED]"
MIN_SECRET = 4
MIN_ENCODED = 6
"""Shorter encoded fragments would mask ordinary text by chance."""


def _base64_cores(data: bytes, encode: Any) -> set[str]:
    """The base64 characters that depend only on `data`, wherever it sits in a stream.

    With `k` bytes before it (k = 0, 1, 2 modulo 3), character i of the encoding covers bits
    6i..6i+5 of the stream; those wholly inside `data` are the same for any surrounding bytes.
    """
    cores = set()
    for k in range(3):
        encoded = encode(b"\0" * k + data).decode("ascii").rstrip("=")
        first = -(-8 * k // 6)
        last = (8 * (k + len(data))) // 6
        core = encoded[first:last]
        if len(core) >= MIN_ENCODED:
            cores.add(core)
    return cores


def encoded_forms(secret: str) -> set[str]:
    """`secret` and every encoded form of it that `Redactor` masks."""
    data = secret.encode("utf-8")
    forms = {secret}
    for encode in (base64.b64encode, base64.urlsafe_b64encode):
        whole = encode(data).decode("ascii")
        forms.update({whole, whole.rstrip("=")})
        forms.update(_base64_cores(data, encode))
    hexed = binascii.hexlify(data).decode("ascii")
    forms.update({hexed, hexed.upper()})
    for quoted in (urllib.parse.quote(secret, safe=""), urllib.parse.quote_plus(secret)):
        forms.add(quoted)
        # Percent escapes are case-insensitive: %2f is %2F.
        forms.add(re.sub(r"%[0-9A-F]{2}", lambda m: m.group(0).lower(), quoted))
    return {form for form in forms if len(form) >= MIN_SECRET}


class Redactor:
    """Masks known secret values (and their encodings) and anything shaped like a GitHub or
    model API token."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self._secrets = sorted({s for s in secrets if s and len(s) >= MIN_SECRET}, key=len)
        forms: set[str] = set()
        for secret in self._secrets:
            forms |= encoded_forms(secret)
        # Longest first, so a whole encoding is masked rather than the core inside it.
        ordered = sorted(forms, key=len, reverse=True)
        self._pattern = re.compile("|".join(map(re.escape, ordered))) if ordered else None
        self._shortest = len(ordered[-1]) if ordered else 0

    def text(self, value: str) -> str:
        # Most strings a server masks (a log line's level, event, delivery id, address) are
        # shorter than any form of a secret and hold nothing token-shaped: they skip the
        # patterns, whose scan over many alternatives costs far more than these checks.
        if self._pattern is not None and len(value) >= self._shortest:
            value = self._pattern.sub(MASK, value)
        if len(value) >= TOKEN_SHORTEST and ("_" in value or "sk-" in value):
            value = TOKEN_PATTERN.sub(MASK, value)
        return value

    def data(self, value: Any) -> Any:
        """Redact every string inside a JSON-shaped value."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {k: self.data(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.data(v) for v in value]
        return value


def redacted_result(result: R, redactor: Redactor) -> R:
    """A copy of a result dataclass with every text in it (strings, and strings inside lists
    and dicts) redacted: how results are stored and served, since the model's text and the
    commands' output may quote secrets."""
    if not dataclasses.is_dataclass(result) or isinstance(result, type):
        raise TypeError(f"{type(result).__name__} is not a dataclass instance")
    changes = {
        f.name: redactor.data(getattr(result, f.name))
        for f in dataclasses.fields(result)
        if isinstance(getattr(result, f.name), str | list | dict)
    }
    return cast(R, dataclasses.replace(result, **changes))
