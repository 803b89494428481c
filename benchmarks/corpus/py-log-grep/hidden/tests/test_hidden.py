from logtools.filters import grep

LINES = [
    "09:59:58 DEBUG cache warm",
    "10:00:02 ERROR timeout calling billing",
    "10:00:05 WARNING retrying billing",
    "11:00:00 INFO done",
]


def test_pattern_at_the_end_of_lines():
    assert grep(LINES, "billing$") == LINES[1:3]


def test_pattern_at_the_start_still_matches():
    assert grep(LINES, r"^10:00") == LINES[1:3]


def test_ignore_case_in_the_middle():
    assert grep(LINES, "CACHE", ignore_case=True) == [LINES[0]]


def test_no_match():
    assert grep(LINES, "nothing here") == []
