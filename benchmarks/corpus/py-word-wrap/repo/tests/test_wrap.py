from textwrapper.wrap import wrap


def test_lines_never_exceed_width():
    assert wrap("the quick brown fox", 9) == ["the quick", "brown fox"]
    assert wrap("aaa bbb ccc", 6) == ["aaa", "bbb", "ccc"]


def test_long_word_gets_own_line():
    assert wrap("a supercalifragilistic word", 5) == ["a", "supercalifragilistic", "word"]
