"""Turn the lines of a CSV export into lists of fields."""

from __future__ import annotations

from collections.abc import Iterable, Iterator


def split_rows(lines: Iterable[str]) -> Iterator[list[str]]:
    """The fields of each non-blank line (RFC 4180: quoted fields may contain commas)."""
    for line in lines:
        line = line.rstrip("\r\n")
        if not line.strip():
            continue
        yield [field.strip().strip('"') for field in line.split(",")]
