from warehouse.orders import OrderDesk
from warehouse.stock import Stock


def test_ship_reduces_on_hand():
    d = OrderDesk({"mug": Stock("mug", 5)})
    order = d.place({"mug": 2})
    d.ship(order.id)
    assert d.stock["mug"].on_hand == 3
    assert d.stock["mug"].reserved == 0
    assert d.orders[order.id].status == "shipped"
