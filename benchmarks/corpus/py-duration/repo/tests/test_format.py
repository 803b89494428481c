from timeparse.duration import format_duration


def test_format():
    assert format_duration(0) == "0s"
    assert format_duration(3661) == "1h1m1s"
    assert format_duration(86400 * 2 + 5) == "2d5s"
