import pytest

from pager import Paginator


@pytest.mark.parametrize(
    ("count", "per_page", "pages"),
    [(1, 10, 1), (9, 10, 1), (10, 10, 1), (11, 10, 2), (7, 3, 3), (100, 7, 15), (5, 1, 5)],
)
def test_page_count(count, per_page, pages):
    assert Paginator(list(range(count)), per_page).page_count == pages


def test_every_item_lands_on_exactly_one_page():
    items = list(range(53))
    seen = [x for page in Paginator(items, per_page=8).pages() for x in page.items]
    assert seen == items


def test_last_partial_page_has_no_next():
    last = Paginator(list("abcdefg"), per_page=3).page(3)
    assert last.items == ["g"]
    assert last.has_previous and not last.has_next
