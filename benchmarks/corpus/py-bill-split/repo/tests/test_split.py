from decimal import Decimal

from splitter.bill import split


def test_even_split():
    assert split("30.00", 3) == ["10.00", "10.00", "10.00"]


def test_shares_add_up_to_the_total():
    shares = split("10.00", 3)
    assert sum(Decimal(s) for s in shares) == Decimal("10.00")
    assert shares == ["3.34", "3.33", "3.33"]
