import pytest

from splitter.bill import format_cents, to_cents, with_tip


def test_tip_rounds_half_up():
    assert with_tip("10.05", 10) == "11.06"


def test_cents_round_trip():
    assert format_cents(to_cents("7.05")) == "7.05"
    with pytest.raises(ValueError):
        to_cents("1.005")
