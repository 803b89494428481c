"""Monthly billing: a subscription bills on its anchor day, or the month's last day."""

from __future__ import annotations

import calendar
from dataclasses import dataclass
from datetime import date


def add_months(day: date, months: int, anchor_day: int | None = None) -> date:
    """The same day of the month `months` later (the anchor day, when given)."""
    index = day.month - 1 + months
    year, month = day.year + index // 12, index % 12 + 1
    return day.replace(year=year, month=month, day=anchor_day or day.day)


def next_billing_date(last_billed: date, anchor_day: int) -> date:
    return add_months(last_billed, 1, anchor_day)


@dataclass(frozen=True)
class Subscription:
    customer: str
    started: date
    monthly_cents: int

    def billing_dates(self, count: int) -> list[date]:
        """The first `count` billing dates, starting with the day it started."""
        dates = [self.started]
        while len(dates) < count:
            dates.append(next_billing_date(dates[-1], self.started.day))
        return dates

    def prorated_first_month_cents(self) -> int:
        """The first charge covers the rest of the starting month only."""
        days = calendar.monthrange(self.started.year, self.started.month)[1]
        remaining = days - self.started.day + 1
        return round(self.monthly_cents * remaining / days)
