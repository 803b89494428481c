from logtools.filters import at_least, count_by_level, parse

TEXT = """10:00:01 INFO started
not a log line
10:00:02 WARNING disk 91% full
10:00:03 ERROR crashed
10:00:04 INFO restarted
"""


def test_parse_skips_noise():
    assert [r.level for r in parse(TEXT.splitlines())] == ["INFO", "WARNING", "ERROR", "INFO"]


def test_at_least_and_counts():
    records = list(parse(TEXT.splitlines()))
    assert [r.message for r in at_least(records, "WARNING")] == ["disk 91% full", "crashed"]
    assert count_by_level(records) == {"INFO": 2, "WARNING": 1, "ERROR": 1}
