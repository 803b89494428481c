from datetime import date

from billing.schedule import Subscription


def test_prorated_first_month():
    assert Subscription("ada", date(2023, 4, 16), 3000).prorated_first_month_cents() == 1500


def test_started_on_the_first_pays_in_full():
    assert Subscription("ada", date(2024, 2, 1), 2900).prorated_first_month_cents() == 2900
