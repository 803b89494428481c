"""The server's sandbox reaping on a timer (`LOOPWRIGHT_SANDBOX_REAP_EVERY_S`): its rounds
are spread around the interval, and 0 turns the timer off."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
import structlog.testing

from loopwright.app.runtime import REAP_JITTER, reap_now_and_then
from loopwright.config import ConfigError, Settings
from loopwright.sandbox.base import SandboxError
from loopwright.sandbox.local import LocalProvider
from tests.integration.app_harness import app_world
from tests.scenarios import CORRECT


class CountingProvider(LocalProvider):
    """The local provider, noting when each reaping round was asked for."""

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings.sandbox_limits)
        self.rounds: list[float] = []

    def reap_abandoned(self) -> list[str]:
        self.rounds.append(time.monotonic())
        return super().reap_abandoned()


@pytest.mark.parametrize(("every_s", "rounds_in_3_s"), [("0", (1, 1)), ("1", (3, 5))])
def test_the_timer_reaps_every_interval_and_zero_turns_it_off(
    tmp_path: Path, every_s: str, rounds_in_3_s: tuple[int, int]
) -> None:
    """The start-up round, then one about every second; with 0, the start-up round only."""
    providers: list[CountingProvider] = []

    def factory(settings: Settings) -> CountingProvider:
        providers.append(CountingProvider(settings))
        return providers[-1]

    env = {"LOOPWRIGHT_SANDBOX_REAP_EVERY_S": every_s}
    with app_world(tmp_path, CORRECT, env=env, app_kwargs={"provider_factory": factory}):
        time.sleep(3.0)
        (provider,) = providers
        low, high = rounds_in_3_s
        assert low <= len(provider.rounds) <= high, provider.rounds


def test_a_negative_interval_is_refused_with_what_to_set() -> None:
    with pytest.raises(
        ConfigError, match="LOOPWRIGHT_SANDBOX_REAP_EVERY_S='-1' must be at least 0"
    ):
        Settings.from_env({"LOOPWRIGHT_SANDBOX_REAP_EVERY_S": "-1"})
    assert Settings.from_env({"LOOPWRIGHT_SANDBOX_REAP_EVERY_S": "0"}).sandbox_reap_every_s == 0


def test_rounds_are_spread_within_the_jitter_of_the_interval(tmp_path: Path) -> None:
    """Each wait is drawn within 10% of the interval: some rounds come before it, which a
    plain wait of the interval never does, and none comes before its lower bound."""
    every_s = 0.1
    provider = CountingProvider(Settings.from_env({"LOOPWRIGHT_DATA_DIR": str(tmp_path)}))
    stop = threading.Event()
    reaper = threading.Thread(target=reap_now_and_then, args=(provider, stop, every_s))
    reaper.start()
    try:
        deadline = time.monotonic() + 30
        while len(provider.rounds) < 25 and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        stop.set()
        reaper.join(5)
    assert not reaper.is_alive()
    gaps = [b - a for a, b in zip(provider.rounds, provider.rounds[1:], strict=False)]
    assert len(gaps) >= 24
    assert min(gaps) >= every_s * (1 - REAP_JITTER) - 0.002, gaps
    assert min(gaps) < every_s * 0.99, gaps


class StuckProvider(CountingProvider):
    """A provider whose timed reaping rounds hang, as one on an engine that stopped
    answering does (the start-up round, before the timer, returns)."""

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings)
        self.stuck = threading.Event()
        self.release = threading.Event()

    def reap_abandoned(self) -> list[str]:
        removed = super().reap_abandoned()
        if len(self.rounds) > 1:
            self.stuck.set()
            self.release.wait(120)
        return removed


def test_a_stopping_server_does_not_wait_out_a_reaping_round_under_way(tmp_path: Path) -> None:
    providers: list[StuckProvider] = []

    def factory(settings: Settings) -> StuckProvider:
        providers.append(StuckProvider(settings))
        return providers[-1]

    env = {"LOOPWRIGHT_SANDBOX_REAP_EVERY_S": "1"}
    try:
        with app_world(tmp_path, CORRECT, env=env, app_kwargs={"provider_factory": factory}):
            (provider,) = providers
            assert provider.stuck.wait(10)
            stopping = time.monotonic()
        # The round's 2 s, not the 30 s a stopping server used to give it.
        assert time.monotonic() - stopping < 10
    finally:
        for provider in providers:
            provider.release.set()


def test_a_round_the_shutdown_cuts_short_ends_the_timer_without_an_error(tmp_path: Path) -> None:
    """The provider closed under a round makes it fail: while stopping, that is expected,
    and said as such, not logged as reaping that failed."""
    stop = threading.Event()

    class ClosedUnderIt(CountingProvider):
        def reap_abandoned(self) -> list[str]:
            super().reap_abandoned()
            stop.set()  # the shutdown begins and closes the provider while the round runs
            raise SandboxError("the engine client is closed")

    provider = ClosedUnderIt(Settings.from_env({"LOOPWRIGHT_DATA_DIR": str(tmp_path)}))
    with structlog.testing.capture_logs() as logs:
        reaper = threading.Thread(target=reap_now_and_then, args=(provider, stop, 0.05))
        reaper.start()
        reaper.join(5)
    assert not reaper.is_alive()
    assert len(provider.rounds) == 1
    assert [(line["log_level"], line["event"]) for line in logs] == [
        ("info", "reaping round cut short by the shutdown")
    ]
