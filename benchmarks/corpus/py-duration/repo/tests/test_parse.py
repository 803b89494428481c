import pytest

from timeparse.duration import DurationError, parse_duration


def test_single_digits():
    assert parse_duration("1h5m") == 3900


def test_several_digits():
    assert parse_duration("90s") == 90
    assert parse_duration("12h") == 43200


def test_units_out_of_order():
    with pytest.raises(DurationError):
        parse_duration("5s1m")
