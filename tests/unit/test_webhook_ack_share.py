"""The webhook benchmark's share of the floor: each round's rate against the floor's burst of
the same round, the median of those, and their range."""

from __future__ import annotations

import pytest

from benchmarks.webhook_ack import Measured, shares, table


def measured(name: str, rates: list[float]) -> Measured:
    return Measured(name, 2, latencies=[0.05] * 10, rates=rates, bad=0, cpu_ms=1.0)


def test_the_share_is_the_median_of_the_rounds_shares_not_a_ratio_of_medians():
    # The floor's median round (200/s) and Loopwright's (60/s) are different rounds: their
    # ratio, 0.30, is no round's share. Round by round the shares are 0.6, 0.3 and 0.9.
    floor = measured("floor", [100.0, 200.0, 1000.0])
    ours = measured("loopwright", [60.0, 60.0, 900.0])
    assert shares(ours, floor) == pytest.approx([0.6, 0.3, 0.9])
    header, _rule, floor_row, our_row = table([floor, ours])
    columns = [c.strip() for c in header.strip("|").split("|")]
    ours_cells = dict(zip(columns, [c.strip() for c in our_row.strip("|").split("|")], strict=True))
    assert ours_cells["share of floor"] == "0.60"
    assert ours_cells["rounds' shares"] == "0.30-0.90"
    assert ours_cells["deliveries/s"] == "60"  # the median round's own rate, as before
    floor_cells = [c.strip() for c in floor_row.strip("|").split("|")]
    assert floor_cells[columns.index("share of floor")] == ""


def test_rounds_of_the_two_servers_must_pair_up():
    with pytest.raises(ValueError):
        shares(measured("loopwright", [60.0, 60.0]), measured("floor", [100.0, 200.0, 1000.0]))
