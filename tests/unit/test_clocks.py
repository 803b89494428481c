"""The clock-skew verdict a queue's worker starts on, from readings of any skew."""

from __future__ import annotations

import pytest

from loopwright.config import ConfigError
from loopwright.store.clocks import ClockReading, check_clocks, judge_clocks, read_clock

HEARTBEAT_S = 30


def reading(skew_s: float, round_trip_s: float = 0.002, source: str = "the database"):  # type: ignore[no-untyped-def]
    before = 1_800_000_000.0
    return ClockReading(source, before, before + round_trip_s / 2 + skew_s, before + round_trip_s)


def test_clocks_in_step_pass_quietly() -> None:
    assert judge_clocks([reading(0.0), reading(-0.3, source="the queue's Redis")], 30).level == (
        "ok"
    )
    assert judge_clocks([], HEARTBEAT_S).level == "ok"  # SQLite and no queue: nothing to compare


def test_a_skew_above_a_sixth_of_the_heartbeat_is_a_warning() -> None:
    verdict = check_clocks([reading(0.1), reading(-6.0, source="the queue's Redis")], HEARTBEAT_S)
    assert verdict.level == "warn"
    assert "the queue's Redis's clock is 6.0s behind" in verdict.message
    assert "NTP" in verdict.message


@pytest.mark.parametrize("skew_s", [16.0, -16.0, 3600.0])
def test_a_skew_above_half_the_heartbeat_refuses_the_start_and_says_what_to_fix(
    skew_s: float,
) -> None:
    with pytest.raises(ConfigError) as refused:
        check_clocks([reading(0.0, source="the queue's Redis"), reading(skew_s)], HEARTBEAT_S)
    message = str(refused.value)
    assert message.startswith("the database's clock is")
    assert ("ahead of" if skew_s > 0 else "behind") in message
    assert "NTP" in message and "LOOPWRIGHT_QUEUE_HEARTBEAT_S" in message
    assert f"above {2 * abs(skew_s):.0f}" in message


def test_a_slow_answer_is_not_taken_for_a_skewed_clock() -> None:
    """The other clock may have answered any time within the round trip: 20 s apart
    measured over a 30 s round trip proves at most 5 s of skew."""
    slow = ClockReading("the database", 100.0, 135.0, 130.0)
    assert slow.skew_s == pytest.approx(20.0)
    assert judge_clocks([slow], HEARTBEAT_S).level == "ok"


def test_read_clock_times_the_question_with_the_injected_clock() -> None:
    ticks = iter([10.0, 10.5])
    got = read_clock("the queue", lambda: 70.25, lambda: next(ticks))
    assert (got.before, got.remote, got.after) == (10.0, 70.25, 10.5)
    assert got.skew_s == pytest.approx(60.0)
