from datetime import datetime, timedelta, timezone

import pytest

from meetings.times import to_utc


def test_to_utc_converts_the_instant():
    berlin_summer = timezone(timedelta(hours=2))
    moment = datetime(2024, 5, 1, 9, 0, tzinfo=berlin_summer)
    assert to_utc(moment) == datetime(2024, 5, 1, 7, 0, tzinfo=timezone.utc)
    assert to_utc(moment).hour == 7


def test_naive_is_refused():
    with pytest.raises(ValueError):
        to_utc(datetime(2024, 5, 1, 9, 0))
