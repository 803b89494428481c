"""Parse and format durations such as "1h30m", "45s" or "2d 4h" as seconds."""

from __future__ import annotations

import re

UNITS = {"d": 86400, "h": 3600, "m": 60, "s": 1}
_PART = re.compile(r"(\d)([dhms])")
_WHOLE = re.compile(r"^(?:\s*\d[dhms])+\s*$")


class DurationError(ValueError):
    pass


def parse_duration(text: str) -> int:
    """Seconds in `text`; units d, h, m, s in that order, each at most once."""
    if not _WHOLE.match(text):
        raise DurationError(f"{text!r} is not a duration like '1h30m' or '45s'")
    seen: list[str] = []
    total = 0
    for amount, unit in _PART.findall(text):
        if seen and list(UNITS).index(unit) <= list(UNITS).index(seen[-1]):
            raise DurationError(f"{text!r}: units must go from days to seconds, once each")
        seen.append(unit)
        total += int(amount) * UNITS[unit]
    return total


def format_duration(seconds: int) -> str:
    """The shortest form parse_duration reads back: 5400 → "1h30m"; 0 → "0s"."""
    if seconds < 0:
        raise DurationError("durations are never negative")
    if seconds == 0:
        return "0s"
    parts = []
    for unit, size in UNITS.items():
        amount, seconds = divmod(seconds, size)
        if amount:
            parts.append(f"{amount}{unit}")
    return "".join(parts)
