"""Fit text into fields whose limit is in UTF-8 bytes (SMS headers, database columns)."""

from __future__ import annotations

ELLIPSIS = "…"


def utf8_length(text: str) -> int:
    return len(text.encode("utf-8"))


def truncate_utf8(text: str, max_bytes: int) -> str:
    """The longest prefix of `text` whose UTF-8 encoding fits in `max_bytes`."""
    if max_bytes < 0:
        raise ValueError("max_bytes cannot be negative")
    encoded = text.encode("utf-8")
    if len(encoded) <= max_bytes:
        return text
    return encoded[:max_bytes].decode("utf-8")


def shorten(text: str, max_bytes: int) -> str:
    """`text` if it fits, else a prefix plus an ellipsis that fits together."""
    if utf8_length(text) <= max_bytes:
        return text
    room = max_bytes - utf8_length(ELLIPSIS)
    if room < 0:
        return truncate_utf8(text, max_bytes)
    return truncate_utf8(text, room).rstrip() + ELLIPSIS


def pad_field(text: str, width_bytes: int, fill: str = " ") -> bytes:
    """Exactly `width_bytes` bytes: the text truncated, then padded with an ASCII fill."""
    if len(fill) != 1 or not fill.isascii():
        raise ValueError("fill must be one ASCII character")
    body = truncate_utf8(text, width_bytes).encode("utf-8")
    return body + fill.encode("ascii") * (width_bytes - len(body))
