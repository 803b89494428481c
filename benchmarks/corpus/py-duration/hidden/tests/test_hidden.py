import pytest

from timeparse.duration import DurationError, format_duration, parse_duration


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("1h30m", 5400), ("100m", 6000), ("2d 4h", 187200), ("45s", 45), ("10d10h10m10s", 900610),
     ("0s", 0), ("120m 30s", 7230)],
)
def test_parse(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("seconds", [59, 3600, 5400, 86399, 90061, 1234567])
def test_round_trip(seconds):
    assert parse_duration(format_duration(seconds)) == seconds


@pytest.mark.parametrize("bad", ["", "h", "12", "1x", "30m1h", "1h1h", "-5s"])
def test_rejects(bad):
    with pytest.raises(DurationError):
        parse_duration(bad)
