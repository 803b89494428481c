"""Meeting times: stored in UTC, shown in each attendee's fixed UTC offset."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

_OFFSET = re.compile(r"^UTC(?P<sign>[+-])(?P<hours>\d{1,2})(?::(?P<minutes>\d{2}))?$")


def parse_offset(text: str) -> timezone:
    """`UTC+2`, `UTC-05:30` or `UTC` as a fixed-offset time zone."""
    if text == "UTC":
        return timezone.utc
    found = _OFFSET.match(text)
    if not found:
        raise ValueError(f"{text!r} is not an offset like UTC+2 or UTC-05:30")
    delta = timedelta(hours=int(found["hours"]), minutes=int(found["minutes"] or 0))
    return timezone(-delta if found["sign"] == "-" else delta)


def to_utc(moment: datetime) -> datetime:
    """The same instant in UTC; naive datetimes are refused, their zone is unknown."""
    if moment.tzinfo is None:
        raise ValueError("naive datetime: say which time zone it is in")
    return moment.replace(tzinfo=timezone.utc)


@dataclass(frozen=True)
class Meeting:
    title: str
    start_utc: datetime
    minutes: int

    @classmethod
    def schedule(cls, title: str, local_start: str, offset: str, minutes: int) -> Meeting:
        """A meeting from an ISO local time ("2024-05-01T09:00") in the organiser's offset."""
        start = datetime.fromisoformat(local_start).replace(tzinfo=parse_offset(offset))
        return cls(title, to_utc(start), minutes)

    def local_start(self, offset: str) -> str:
        return self.start_utc.astimezone(parse_offset(offset)).strftime("%Y-%m-%d %H:%M")

    def overlaps(self, other: Meeting) -> bool:
        end = self.start_utc + timedelta(minutes=self.minutes)
        other_end = other.start_utc + timedelta(minutes=other.minutes)
        return self.start_utc < other_end and other.start_utc < end
