"""Which deliveries the webhook decides on the event loop: exactly those whose decision
needs nothing from the store. Every recorded payload is decided both ways: on the loop
(where asking the store for a count is refused) and with the store's counts (as in the
store's write, or on a thread); the loop's decision, when it makes one, must be the same."""

from __future__ import annotations

import gc
import json
import weakref
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest

from loopwright.app.runtime import Runtime
from loopwright.app.webhooks import _Checked, _decide, _NeedsStore, _NoStoreReads
from loopwright.config import Settings
from loopwright.github.triggers import Ignore

FIXTURES = sorted((Path(__file__).parents[1] / "fixtures/webhooks").glob("*.json"))


class _Counts(Mapping[str, int]):
    """The same count of missions for every head."""

    def __init__(self, count: int) -> None:
        self._count = count

    def __getitem__(self, sha: str) -> int:
        return self._count

    def __iter__(self) -> Iterator[str]:
        return iter(())

    def __len__(self) -> int:
        return 0


def _runtime() -> Runtime:
    settings = Settings.from_env({"LOOPWRIGHT_GITHUB_APP_SLUG": "loopwright"})
    return cast(Runtime, SimpleNamespace(settings=settings))


def _checked(path: Path) -> _Checked:
    payload: Any = json.loads(path.read_text())
    event = path.name.split(".", 1)[0]
    return _Checked("d-1", event, payload.get("action"), payload, cast(Any, None))


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.stem)
def test_the_loop_decides_only_what_needs_no_store_and_decides_it_the_same(path: Path) -> None:
    runtime, checked = _runtime(), _checked(path)
    on_loop = _decide(checked, runtime, _NoStoreReads())
    # The store's counts as a thread would read them: none for a new head, the cap reached.
    for attempts in (_Counts(0), _Counts(99)):
        on_thread = _decide(checked, runtime, attempts)
        assert not isinstance(on_thread, _NeedsStore)
        if not isinstance(on_loop, _NeedsStore):
            assert on_loop == on_thread


def test_a_red_check_is_decided_with_the_stores_count_and_an_ignored_event_on_the_loop() -> None:
    runtime = _runtime()
    red = _checked(next(p for p in FIXTURES if p.name == "check_run.completed.timed_out.json"))
    assert isinstance(_decide(red, runtime, _NoStoreReads()), _NeedsStore)
    green = _checked(next(p for p in FIXTURES if p.name == "check_run.completed.neutral.json"))
    assert isinstance(_decide(green, runtime, _NoStoreReads()), Ignore)


def test_a_decision_left_to_the_store_holds_nothing_of_the_delivery() -> None:
    """The loop's decision stays alive until the delivery is answered. It must not hold the
    delivery (and its parsed payload) in a reference cycle: a red check's payload would
    then wait for the garbage collector, and a burst's payloads pile up into its costliest
    collections."""
    runtime = _runtime()
    red = _checked(next(p for p in FIXTURES if p.name == "check_run.completed.timed_out.json"))
    alive = weakref.ref(red)
    gc.disable()
    try:
        decision = _decide(red, runtime, _NoStoreReads())
        del red
        assert isinstance(decision, _NeedsStore)
        assert alive() is None, "the decision keeps the delivery alive"
    finally:
        gc.enable()
