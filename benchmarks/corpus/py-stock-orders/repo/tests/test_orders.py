import pytest

from warehouse.orders import OrderDesk
from warehouse.stock import OutOfStock, Stock


def desk():
    return OrderDesk({"mug": Stock("mug", 5), "tea": Stock("tea", 10)})


def test_second_order_cannot_take_promised_stock():
    d = desk()
    d.place({"mug": 4})
    with pytest.raises(OutOfStock) as info:
        d.place({"mug": 2})
    assert info.value.available == 1


def test_order_is_all_or_nothing():
    d = desk()
    with pytest.raises(OutOfStock):
        d.place({"tea": 2, "mug": 6})
    assert d.stock["tea"].reserved == 0
