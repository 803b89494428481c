"""Split a bill into shares that add up to the bill exactly, to the cent."""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal


def to_cents(amount: str | int | Decimal) -> int:
    """Cents in a decimal amount like "12.50"; rejects fractions of a cent."""
    value = Decimal(str(amount))
    cents = value * 100
    if cents != cents.to_integral_value():
        raise ValueError(f"{amount} has fractions of a cent")
    return int(cents)


def format_cents(cents: int) -> str:
    sign = "-" if cents < 0 else ""
    return f"{sign}{abs(cents) // 100}.{abs(cents) % 100:02d}"


def split(total: str, people: int) -> list[str]:
    """`total` split into `people` shares; the first shares take any leftover cents."""
    if people < 1:
        raise ValueError("a bill needs at least one person")
    share = round(float(total) / people, 2)
    return [f"{share:.2f}"] * people


def with_tip(total: str, percent: int) -> str:
    """The total plus a tip of `percent`, rounded half up to the cent."""
    cents = Decimal(to_cents(total)) * (100 + percent) / 100
    return format_cents(int(cents.quantize(Decimal(1), rounding=ROUND_HALF_UP)))


def split_with_tip(total: str, people: int, percent: int) -> list[str]:
    return split(with_tip(total, percent), people)
