"""How far this host's clock is from the clocks other hosts' timestamps are read against.

The store's heartbeats (`Mission.runner_seen_at`, the slots' `heartbeat_at`) are stamped
and judged by the database's clock (`models.database_now`), but SAQ's sweep compares a
job's `touched` (the worker's clock) with the sweeper's: hosts whose clocks are apart by a
good part of `LOOPWRIGHT_QUEUE_HEARTBEAT_S` have live jobs swept. So a worker measures its
clock against the database's and the queue's at start (and now and then after) and
refuses to run beside them when they are too far apart.

The verdict (`judge_clocks`) is a pure function of the readings, so it is tested with
readings of any skew; `read_*` take the readings.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from sqlalchemy import Engine, text

from loopwright.config import ConfigError

REFUSE_FRACTION = 1 / 2
"""A skew above this part of the heartbeat refuses the start."""
WARN_FRACTION = 1 / 6
"""A skew above this part of the heartbeat is logged as a warning."""
CLOCK_QUERY = "SELECT extract(epoch FROM clock_timestamp())"
"""PostgreSQL's clock now (`now()` is the transaction's start), in seconds since the epoch."""
CHECK_EVERY_S = 300.0
"""How often a running worker measures the skew again (clocks drift, NTP stops)."""


class ClockSkewed(ConfigError):
    """This host's clock is too far from the database's or the queue's (the message says
    which, by how much, and what to fix)."""


@dataclass(frozen=True)
class ClockReading:
    """One reading of another clock: this host's time just before the question and just
    after the answer, and the answer, all in seconds since the epoch."""

    source: str
    """Whose clock: "the database", "the queue's Redis"."""
    before: float
    remote: float
    after: float

    @property
    def skew_s(self) -> float:
        """How far the other clock is ahead of this host's (negative: behind), taking the
        answer as given halfway through the round trip."""
        return self.remote - (self.before + self.after) / 2

    @property
    def certain_skew_s(self) -> float:
        """The part of the skew the round trip cannot explain: a slow answer is not a
        skewed clock."""
        return max(0.0, abs(self.skew_s) - (self.after - self.before) / 2)


@dataclass(frozen=True)
class ClockVerdict:
    level: Literal["ok", "warn", "refuse"]
    message: str
    """Empty when ok."""


def judge_clocks(readings: list[ClockReading], heartbeat_s: float) -> ClockVerdict:
    """Whether this host may run missions beside the others: `refuse` above half the
    heartbeat, `warn` above a sixth, judged on the worst reading."""
    if not readings:
        return ClockVerdict("ok", "")
    worst = max(readings, key=lambda r: r.certain_skew_s)
    skew = worst.certain_skew_s
    if skew <= heartbeat_s * WARN_FRACTION:
        return ClockVerdict("ok", "")
    way = "ahead of" if worst.skew_s > 0 else "behind"
    said = (
        f"{worst.source}'s clock is {skew:.1f}s {way} this host's "
        f"(LOOPWRIGHT_QUEUE_HEARTBEAT_S is {heartbeat_s:g}s)"
    )
    if skew > heartbeat_s * REFUSE_FRACTION:
        return ClockVerdict(
            "refuse",
            f"{said}: workers would take live workers' missions for lost and run them "
            "twice; sync the hosts' clocks (NTP: chrony or systemd-timesyncd), or raise "
            f"LOOPWRIGHT_QUEUE_HEARTBEAT_S above {2 * skew:.0f}",
        )
    return ClockVerdict(
        "warn",
        f"{said}: above a sixth of the heartbeat; sync the hosts' clocks (NTP) before the "
        "skew reaches half of it, when workers refuse to start",
    )


def check_clocks(readings: list[ClockReading], heartbeat_s: float) -> ClockVerdict:
    """`judge_clocks`, raising `ClockSkewed` when it refuses."""
    verdict = judge_clocks(readings, heartbeat_s)
    if verdict.level == "refuse":
        raise ClockSkewed(verdict.message)
    return verdict


def read_clock(
    source: str, ask: Callable[[], float], now: Callable[[], float] = time.time
) -> ClockReading:
    """Time `ask()`, which returns the other clock in seconds since the epoch."""
    before = now()
    remote = ask()
    return ClockReading(source, before, remote, now())


def read_database_clock(
    engine: Engine, now: Callable[[], float] = time.time
) -> ClockReading | None:
    """The store's database's clock; None on SQLite, whose store is on this host."""
    if engine.dialect.name != "postgresql":
        return None

    def ask() -> float:
        with engine.connect() as connection:
            return float(
                connection.execute(
                    text("SELECT extract(epoch FROM clock_timestamp())")
                ).scalar_one()
            )

    with engine.connect() as connection:  # a connection ready, so the reading times the query
        connection.execute(text("SELECT 1"))
    return read_clock("the database", ask, now)
