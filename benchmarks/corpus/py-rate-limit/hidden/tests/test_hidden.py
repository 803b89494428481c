from throttle.window import SlidingWindowLimiter


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_limit_of_one():
    clock = Clock()
    limiter = SlidingWindowLimiter(1, 5, clock)
    assert limiter.check("k").allowed
    denied = limiter.check("k")
    assert not denied.allowed and denied.retry_after == 5


def test_window_slides():
    clock = Clock()
    limiter = SlidingWindowLimiter(2, 10, clock)
    assert limiter.check("k").allowed
    clock.now = 4
    assert limiter.check("k").allowed
    clock.now = 9
    assert not limiter.check("k").allowed
    clock.now = 10
    assert limiter.check("k").allowed
    assert not limiter.check("k").allowed


def test_reset_and_many_requests():
    clock = Clock()
    limiter = SlidingWindowLimiter(5, 1, clock)
    assert sum(limiter.check("k").allowed for _ in range(20)) == 5
    limiter.reset("k")
    assert sum(limiter.check("k").allowed for _ in range(20)) == 5
