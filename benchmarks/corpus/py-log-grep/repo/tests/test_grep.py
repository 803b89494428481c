from logtools.filters import grep

LINES = [
    "10:00:01 INFO user ada logged in",
    "10:00:02 ERROR payment declined for order 17",
    "10:00:03 INFO user grace logged in",
]


def test_grep_finds_pattern_in_the_middle():
    assert grep(LINES, r"order \d+") == [LINES[1]]


def test_grep_ignore_case():
    assert grep(LINES, "GRACE", ignore_case=True) == [LINES[2]]
