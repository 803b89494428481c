import pytest

from pager import Paginator
from pager.paginator import PageNotFound


def test_exact_pages():
    p = Paginator(list(range(20)), per_page=10)
    assert p.page_count == 2
    assert p.page(2).items == list(range(10, 20))
    assert not p.page(2).has_next


def test_partial_last_page():
    p = Paginator(list(range(25)), per_page=10)
    assert p.page_count == 3
    assert p.page(3).items == [20, 21, 22, 23, 24]


def test_out_of_range():
    p = Paginator(list(range(5)), per_page=10)
    with pytest.raises(PageNotFound):
        p.page(2)
