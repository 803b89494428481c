from datetime import timedelta

import pytest

from meetings.times import parse_offset


def test_parse_offsets():
    assert parse_offset("UTC+2").utcoffset(None) == timedelta(hours=2)
    assert parse_offset("UTC-05:30").utcoffset(None) == -timedelta(hours=5, minutes=30)
    assert parse_offset("UTC").utcoffset(None) == timedelta(0)


def test_bad_offset():
    with pytest.raises(ValueError):
        parse_offset("CET")
