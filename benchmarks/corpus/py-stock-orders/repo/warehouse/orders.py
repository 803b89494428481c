"""Accept orders against stock, and cancel or ship them."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from warehouse.stock import OutOfStock, Stock


@dataclass
class Order:
    id: int
    lines: dict[str, int]
    status: str = "open"


@dataclass
class OrderDesk:
    stock: dict[str, Stock]
    orders: dict[int, Order] = field(default_factory=dict)
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def place(self, lines: dict[str, int]) -> Order:
        """Reserve every line or none: an order is accepted only if all of it is available."""
        for sku, quantity in lines.items():
            item = self.stock[sku]
            if quantity > item.available:
                raise OutOfStock(sku, quantity, item.available)
        for sku, quantity in lines.items():
            self.stock[sku].reserve(quantity)
        order = Order(next(self._ids), dict(lines))
        self.orders[order.id] = order
        return order

    def cancel(self, order_id: int) -> None:
        order = self.orders[order_id]
        if order.status == "open":
            for sku, quantity in order.lines.items():
                self.stock[sku].release(quantity)
            order.status = "cancelled"

    def ship(self, order_id: int) -> None:
        order = self.orders[order_id]
        if order.status != "open":
            raise ValueError(f"order {order_id} is {order.status}")
        for sku, quantity in order.lines.items():
            self.stock[sku].ship(quantity)
        order.status = "shipped"
