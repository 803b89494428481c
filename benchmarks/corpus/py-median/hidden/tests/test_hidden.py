import pytest

from stats.summary import EmptySample, median


@pytest.mark.parametrize(
    ("values", "expected"),
    [([1, 2], 1.5), ([7, 7], 7), ([-3, 1, 10, 2], 1.5), ([0.5, 0.25], 0.375), ([9, 1, 8, 2, 7, 3], 5)],
)
def test_even_counts(values, expected):
    assert median(values) == expected


def test_odd_counts_unchanged():
    assert median([42]) == 42
    assert median([3, 1, 2, 5, 4]) == 3


def test_generator_input():
    assert median(x * 2 for x in range(4)) == 3


def test_empty():
    with pytest.raises(EmptySample):
        median([])
