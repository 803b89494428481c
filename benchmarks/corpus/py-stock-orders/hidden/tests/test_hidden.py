import pytest

from warehouse.orders import OrderDesk
from warehouse.stock import OutOfStock, Stock


def test_available_is_on_hand_minus_reserved():
    item = Stock("pen", 10)
    item.reserve(3)
    assert item.available == 7
    item.release(1)
    assert item.available == 8


def test_cancel_frees_stock_for_the_next_order():
    d = OrderDesk({"pen": Stock("pen", 3)})
    first = d.place({"pen": 3})
    with pytest.raises(OutOfStock):
        d.place({"pen": 1})
    d.cancel(first.id)
    assert d.place({"pen": 3}).id == 2


def test_exact_remaining_quantity_is_accepted():
    d = OrderDesk({"pen": Stock("pen", 6)})
    d.place({"pen": 2})
    d.place({"pen": 4})
    assert d.stock["pen"].available == 0


def test_shipping_keeps_availability_right():
    d = OrderDesk({"pen": Stock("pen", 5)})
    a = d.place({"pen": 2})
    d.place({"pen": 1})
    d.ship(a.id)
    assert d.stock["pen"].available == 2
