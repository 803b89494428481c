from datetime import date

from billing.schedule import Subscription, next_billing_date


def test_mid_month_anchor():
    assert next_billing_date(date(2024, 3, 15), 15) == date(2024, 4, 15)


def test_december_rolls_into_january():
    assert next_billing_date(date(2023, 12, 10), 10) == date(2024, 1, 10)


def test_end_of_month_subscription():
    sub = Subscription("ada", date(2023, 1, 31), 1000)
    assert sub.billing_dates(3) == [date(2023, 1, 31), date(2023, 2, 28), date(2023, 3, 31)]
