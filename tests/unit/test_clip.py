import pytest

from loopwright.clip import truncate_middle


@pytest.mark.parametrize("size", [0, 10, 999, 1000])
def test_short_text_is_unchanged(size):
    text = "x" * size
    assert truncate_middle(text, 1000) == text


def test_long_text_keeps_head_and_tail_with_marker():
    text = "HEAD" + "m" * 50_000 + "TAIL"
    cut = truncate_middle(text, 2_000)
    assert len(cut) <= 2_000
    assert cut.startswith("HEAD") and cut.endswith("TAIL")
    assert "characters elided" in cut
    elided = int(cut.split("[... ")[1].split(" ")[0])
    assert elided == len(text) - len(cut.split("\n[...")[0]) - len(cut.rsplit("...]\n", 1)[1])


@pytest.mark.parametrize("limit", [0, 5, 50])
def test_a_tiny_limit_still_keeps_some_head_and_tail(limit):
    cut = truncate_middle("a" * 30 + "z" * 30, limit)
    assert cut.startswith("a" * 10) and cut.endswith("z" * 10)
    assert "40 characters elided" in cut
