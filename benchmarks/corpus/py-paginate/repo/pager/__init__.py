"""Split result lists into numbered pages for listing endpoints."""

from pager.paginator import Page, Paginator

__all__ = ["Page", "Paginator"]
