"""Stock levels per SKU: units on hand, and units reserved for open orders."""

from __future__ import annotations

from dataclasses import dataclass


class OutOfStock(Exception):
    def __init__(self, sku: str, wanted: int, available: int) -> None:
        super().__init__(f"{sku}: wanted {wanted}, only {available} available")
        self.sku = sku
        self.available = available


@dataclass
class Stock:
    sku: str
    on_hand: int
    reserved: int = 0

    @property
    def available(self) -> int:
        return self.on_hand + self.reserved

    def reserve(self, quantity: int) -> None:
        self.reserved += quantity

    def release(self, quantity: int) -> None:
        self.reserved = max(0, self.reserved - quantity)

    def ship(self, quantity: int) -> None:
        """Units leave the building: they stop being reserved and stop being on hand."""
        self.release(quantity)
        self.on_hand -= quantity
