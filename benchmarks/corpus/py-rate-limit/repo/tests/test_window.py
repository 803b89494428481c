import pytest

from throttle.window import SlidingWindowLimiter


def test_clients_are_separate():
    limiter = SlidingWindowLimiter(1, 60, lambda: 5.0)
    assert limiter.check("a").allowed
    assert limiter.check("b").allowed


def test_bad_settings():
    with pytest.raises(ValueError):
        SlidingWindowLimiter(0, 1)
