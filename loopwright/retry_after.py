"""The `retry-after` response header (RFC 9110 §10.2.3), shared by the model client and GitHub."""

from __future__ import annotations

import email.utils
import math


def parse_retry_after(value: str | None, now: float) -> float | None:
    """Seconds to wait that `value` asks for, or None when absent or unreadable.

    The header is delay-seconds or an HTTP date; `now` is the current time in epoch seconds,
    compared with a date. Waits in the past come back as 0.
    """
    if value is None:
        return None
    seconds = finite_number(value)
    if seconds is not None:
        return max(seconds, 0.0)
    try:
        when = email.utils.parsedate_to_datetime(value.strip())
    except (TypeError, ValueError):
        return None
    return max(when.timestamp() - now, 0.0)


def finite_number(value: str | None) -> float | None:
    """`value` as a finite float, or None when absent, not a number, NaN or infinite."""
    if value is None:
        return None
    try:
        number = float(value.strip())
    except ValueError:
        return None
    return number if math.isfinite(number) else None
