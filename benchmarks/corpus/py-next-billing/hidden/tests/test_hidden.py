from datetime import date

import pytest

from billing.schedule import Subscription, next_billing_date


@pytest.mark.parametrize(
    ("last", "anchor", "expected"),
    [
        (date(2024, 1, 31), 31, date(2024, 2, 29)),
        (date(2024, 1, 30), 30, date(2024, 2, 29)),
        (date(2023, 1, 29), 29, date(2023, 2, 28)),
        (date(2024, 3, 31), 31, date(2024, 4, 30)),
        (date(2024, 2, 29), 31, date(2024, 3, 31)),
        (date(2024, 2, 29), 30, date(2024, 3, 30)),
        (date(2024, 8, 31), 31, date(2024, 9, 30)),
    ],
)
def test_short_months_clamp_to_their_last_day(last, anchor, expected):
    assert next_billing_date(last, anchor) == expected


def test_a_year_of_end_of_month_billing():
    dates = Subscription("grace", date(2024, 1, 31), 500).billing_dates(13)
    assert [d.day for d in dates] == [31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31, 31]
    assert dates[-1] == date(2025, 1, 31)
