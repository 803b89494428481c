from throttle.window import SlidingWindowLimiter


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def test_allows_exactly_limit_requests():
    limiter = SlidingWindowLimiter(3, 10, Clock())
    results = [limiter.check("ada").allowed for _ in range(4)]
    assert results == [True, True, True, False]


def test_remaining_counts_down():
    limiter = SlidingWindowLimiter(2, 10, Clock())
    assert [limiter.check("ada").remaining for _ in range(2)] == [1, 0]
