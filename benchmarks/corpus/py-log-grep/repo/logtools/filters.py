"""Pick log lines by level and pattern, and count them by level."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
_LINE = re.compile(r"^(?P<time>\S+) (?P<level>[A-Z]+) (?P<message>.*)$")


@dataclass(frozen=True)
class Record:
    time: str
    level: str
    message: str


def parse(lines: Iterable[str]) -> Iterator[Record]:
    """Records for the lines that look like `TIME LEVEL message`; others are skipped."""
    for line in lines:
        found = _LINE.match(line.rstrip("\n"))
        if found and found["level"] in LEVELS:
            yield Record(found["time"], found["level"], found["message"])


def at_least(records: Iterable[Record], level: str) -> list[Record]:
    threshold = LEVELS.index(level)
    return [r for r in records if LEVELS.index(r.level) >= threshold]


def grep(lines: Iterable[str], pattern: str, ignore_case: bool = False) -> list[str]:
    """The lines in which `pattern` (a regular expression) occurs anywhere."""
    flags = re.IGNORECASE if ignore_case else 0
    compiled = re.compile(pattern, flags)
    return [line for line in lines if compiled.match(line)]


def count_by_level(records: Iterable[Record]) -> dict[str, int]:
    counts = Counter(r.level for r in records)
    return {level: counts[level] for level in LEVELS if counts[level]}
