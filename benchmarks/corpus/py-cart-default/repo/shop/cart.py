"""Shopping carts: lines of (sku, unit price in cents, quantity)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Line:
    sku: str
    unit_cents: int
    quantity: int

    @property
    def total_cents(self) -> int:
        return self.unit_cents * self.quantity


class Cart:
    def __init__(self, customer: str, lines: list[Line] = []) -> None:
        self.customer = customer
        self.lines = lines

    def add(self, sku: str, unit_cents: int, quantity: int = 1) -> None:
        if quantity < 1:
            raise ValueError("quantity must be at least 1")
        for line in self.lines:
            if line.sku == sku:
                line.quantity += quantity
                return
        self.lines.append(Line(sku, unit_cents, quantity))

    def remove(self, sku: str) -> None:
        self.lines = [line for line in self.lines if line.sku != sku]

    @property
    def item_count(self) -> int:
        return sum(line.quantity for line in self.lines)

    @property
    def total_cents(self) -> int:
        return sum(line.total_cents for line in self.lines)
