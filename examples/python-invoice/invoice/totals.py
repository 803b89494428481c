"""Line and invoice totals with percentage discounts and VAT, in cents."""

from dataclasses import dataclass


@dataclass(frozen=True)
class Line:
    description: str
    unit_cents: int
    quantity: int = 1
    discount_percent: float = 0.0


def line_total(line: Line) -> int:
    """The line's price after its discount, rounded half up to whole cents."""
    gross = line.unit_cents * line.quantity
    discounted = gross - gross * line.discount_percent
    return int(discounted + 0.5)


def invoice_total(lines: list[Line], vat_percent: float = 0.0) -> int:
    """Sum of the line totals plus VAT on that sum, rounded half up to whole cents."""
    net = sum(line_total(line) for line in lines)
    return int(net * (1 + vat_percent / 100) + 0.5)
