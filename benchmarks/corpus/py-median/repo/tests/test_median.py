from stats.summary import median, summarise


def test_odd_count():
    assert median([5, 1, 3]) == 3


def test_even_count_is_mean_of_middle_pair():
    assert median([4, 1, 3, 2]) == 2.5


def test_summary_uses_median():
    assert summarise([10, 20, 30, 40]).median == 25
