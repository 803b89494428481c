import pytest

from textwrapper.wrap import fill, paragraphs, wrap

TEXT = "It was a bright cold day in April and the clocks were striking thirteen"


@pytest.mark.parametrize("width", [4, 7, 10, 13, 20, 33])
def test_lines_fit_and_are_greedy(width):
    lines = wrap(TEXT, width)
    assert " ".join(lines) == TEXT
    for i, line in enumerate(lines):
        assert len(line) <= width or " " not in line
        if i + 1 < len(lines):
            next_word = lines[i + 1].split()[0]
            assert len(line) + 1 + len(next_word) > width


def test_exact_fit_stays_on_one_line():
    assert wrap("ab cd", 5) == ["ab cd"]
    assert wrap("ab cd", 4) == ["ab", "cd"]


def test_fill_and_paragraphs_use_width():
    assert fill("aa bb cc", 5) == "aa bb\ncc"
    assert paragraphs("aa bb cc\n\ndd ee", 2) == "aa\nbb\ncc\n\ndd\nee"
