from decimal import Decimal

import pytest

from splitter.bill import split, split_with_tip


@pytest.mark.parametrize(
    ("total", "people"),
    [("100.00", 7), ("0.05", 3), ("19.99", 4), ("1234.57", 6), ("0.01", 2), ("5.00", 1)],
)
def test_shares_always_sum_to_total(total, people):
    shares = split(total, people)
    assert len(shares) == people
    assert sum(Decimal(s) for s in shares) == Decimal(total)
    cents = [int(Decimal(s) * 100) for s in shares]
    assert max(cents) - min(cents) <= 1
    assert cents == sorted(cents, reverse=True)


def test_small_amount_leftover_goes_first():
    assert split("0.05", 3) == ["0.02", "0.02", "0.01"]


def test_split_with_tip_sums_to_tipped_total():
    shares = split_with_tip("50.00", 3, 15)
    assert sum(Decimal(s) for s in shares) == Decimal("57.50")
