import pytest

from stats.summary import EmptySample, mean, percentile, stdev


def test_mean_and_stdev():
    assert mean([2, 4, 4, 4, 5, 5, 7, 9]) == 5
    assert stdev([1, 1, 1]) == 0


def test_percentile_nearest_rank():
    assert percentile(range(1, 101), 95) == 95


def test_empty_sample():
    with pytest.raises(EmptySample):
        mean([])
