"""The server's sandbox reaping on a timer (`LOOPWRIGHT_SANDBOX_REAP_EVERY_S`): its rounds
are spread around the interval, and 0 turns the timer off."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from loopwright.app.runtime import REAP_JITTER, open_runtime, reap_now_and_then
from loopwright.config import ConfigError, Settings
from loopwright.sandbox.base import SandboxError
from loopwright.sandbox.local import LocalProvider
from loopwright.store.group_commit import GroupCommitClosed
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


class CloseFails(LocalProvider):
    def __init__(self, settings: Settings) -> None:
        super().__init__(settings.sandbox_limits)

    def close(self) -> None:
        super().close()
        raise SandboxError("could not remove the local sandbox /tmp/x: busy")


def test_a_provider_that_fails_to_close_still_lets_the_store_close(tmp_path: Path) -> None:
    """The store is closed last, whatever the provider's close raised: its writer finishes
    what is pending and takes nothing more."""
    with app_world(tmp_path, CORRECT, serve=False) as world:
        with (
            pytest.raises(SandboxError, match="could not remove the local sandbox"),
            open_runtime(world.settings, provider_factory=CloseFails) as runtime,
        ):
            store = runtime.store
            store.accept_delivery("d-before", "ping", None, decision="ignored: ping")
        with pytest.raises(GroupCommitClosed):
            store.accept_delivery("d-after", "ping", None, decision="ignored: ping")
