"""A paginator over an in-memory sequence, numbering pages from 1."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, Sequence, TypeVar

T = TypeVar("T")


class PageNotFound(LookupError):
    """The requested page number is outside 1..page_count."""


@dataclass(frozen=True)
class Page(Generic[T]):
    number: int
    items: list[T]
    has_previous: bool
    has_next: bool


class Paginator(Generic[T]):
    def __init__(self, items: Sequence[T], per_page: int) -> None:
        if per_page < 1:
            raise ValueError("per_page must be at least 1")
        self.items = items
        self.per_page = per_page

    @property
    def count(self) -> int:
        return len(self.items)

    @property
    def page_count(self) -> int:
        """How many pages there are; an empty list still has one (empty) page."""
        if self.count == 0:
            return 1
        return self.count // self.per_page

    def page(self, number: int) -> Page[T]:
        if not 1 <= number <= self.page_count:
            raise PageNotFound(f"page {number} is not in 1..{self.page_count}")
        start = (number - 1) * self.per_page
        end = start + self.per_page
        return Page(
            number=number,
            items=list(self.items[start:end]),
            has_previous=number > 1,
            has_next=number < self.page_count,
        )

    def pages(self) -> list[Page[T]]:
        return [self.page(n) for n in range(1, self.page_count + 1)]
