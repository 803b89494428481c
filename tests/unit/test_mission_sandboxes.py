"""A mission's sandboxes are closed together, whatever thread closes them: a cancel closes
them on its own thread, and the mission's end, racing it, returns only once they are gone
(the CLI's Ctrl-C cancels on a thread of its own, then prints the result and exits)."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any, cast

from loopwright.cancellation import Cancellation
from loopwright.config import SandboxLimits
from loopwright.events import Event, EventBus, EventList
from loopwright.missions.base import MissionSandboxes
from loopwright.redaction import Redactor
from loopwright.sandbox.base import Sandbox, SandboxProvider
from loopwright.sandbox.local.provider import LocalProvider
from loopwright.sandbox.local.sandbox import LocalSandbox


class _SlowClose:
    """A real local sandbox whose close stalls until `gate` opens, as a close stopping a
    command and removing a large tree does."""

    def __init__(self, inner: LocalSandbox, entered: threading.Event, gate: threading.Event):
        self.inner = inner
        self._entered = entered
        self._gate = gate

    def close(self) -> None:
        self._entered.set()
        assert self._gate.wait(10)
        self.inner.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class _SlowCloseProvider:
    kind = "local"

    def __init__(self, base_dir: Path) -> None:
        self.inner = LocalProvider(SandboxLimits(), base_dir=base_dir)
        self.entered = threading.Event()
        self.gate = threading.Event()
        self.made: list[_SlowClose] = []

    def create(self, mission_id: str, tree: Path, *, network: bool) -> Sandbox:
        sandbox = _SlowClose(
            self.inner.create(mission_id, tree, network=network), self.entered, self.gate
        )
        self.made.append(sandbox)
        return cast(Sandbox, sandbox)

    def reap_abandoned(self) -> list[str]:
        return []

    def close(self) -> None:
        self.inner.close()


def _mission(
    tmp_path: Path, sink: EventList, opened: int
) -> tuple[_SlowCloseProvider, EventBus, MissionSandboxes, threading.Thread]:
    """A mission's sandboxes as the CLI holds them (a cancel closes them all), `opened` of
    them open, and the Ctrl-C thread that will cancel it, not yet started."""
    tree = tmp_path / "repo"
    tree.mkdir()
    (tree / "a.txt").write_text("a\n")
    provider = _SlowCloseProvider(tmp_path / "sandboxes")
    events = EventBus("m-close", [sink], Redactor())
    cancellation = Cancellation()
    sandboxes = MissionSandboxes(cast(SandboxProvider, provider), "m-close", cancellation)
    cancellation.on_cancel(lambda: sandboxes.close_all(events))
    for _ in range(opened):
        sandboxes.open(tree, network=False)
    canceller = threading.Thread(target=cancellation.cancel, args=("Cancelled with Ctrl-C.",))
    return provider, events, sandboxes, canceller


def test_the_missions_end_waits_for_a_close_a_cancel_has_under_way(tmp_path: Path) -> None:
    sink = EventList()
    provider, events, sandboxes, canceller = _mission(tmp_path, sink, opened=1)
    (made,) = provider.made
    root = made.inner.root
    assert root.is_dir()

    canceller.start()
    assert provider.entered.wait(10)
    ended = threading.Event()
    ender = threading.Thread(target=lambda: (sandboxes.close_all(events), ended.set()))
    ender.start()
    # The cancel's close is still under way: the mission's end must not have returned.
    assert not ended.wait(0.5)
    assert root.is_dir()

    provider.gate.set()
    assert ended.wait(10)
    assert not root.exists()
    canceller.join(10)
    ender.join(10)
    assert sink.of_type("error") == []


class _SlowErrors(EventList):
    """A sink that takes its time over an error event, as a file or a live view may."""

    def __call__(self, event: Event) -> None:
        if event.type == "error":
            time.sleep(0.5)
        super().__call__(event)


def test_a_close_that_fails_is_reported_before_the_missions_end_returns(tmp_path: Path) -> None:
    sink = _SlowErrors()
    provider, events, sandboxes, canceller = _mission(tmp_path, sink, opened=2)
    failing_root, other_root = provider.made[0].inner.root, provider.made[1].inner.root
    # A tree that cannot be removed: its directory replaced by a link, which rmtree refuses.
    failing_root.rename(tmp_path / "moved")
    failing_root.symlink_to(tmp_path / "moved")
    provider.gate.set()

    canceller.start()
    assert provider.entered.wait(10)
    sandboxes.close_all(events)  # the mission's end, racing the cancel's close
    (error,) = sink.of_type("error")
    assert f"could not remove the local sandbox {failing_root}" in error.fields["message"]
    assert not other_root.exists()  # the failure did not stop the rest of the cleanup
    canceller.join(10)
