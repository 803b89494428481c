from pager import Paginator


def test_empty_list_has_one_page():
    p = Paginator([], per_page=3)
    assert p.page_count == 1
    assert p.page(1).items == []


def test_flags_in_the_middle():
    page = Paginator(list("abcdefghi"), per_page=3).page(2)
    assert page.items == ["d", "e", "f"]
    assert page.has_previous and page.has_next
