"""A mission's cancellation: set once from any thread, observed by the mission wherever it is.

The mission checks it between model steps and before each stage; whoever cancels also runs
the callbacks registered with `on_cancel` (the mission removes its sandboxes there, which
ends a long command the model started). Whatever the mission was doing when it noticed,
it ends with status `cancelled` and the summary given here.
"""

from __future__ import annotations

import threading
from collections.abc import Callable


class Cancelled(Exception):
    """Raised where a mission notices it was cancelled; the message is the summary."""


class Superseded(Exception):
    """Raised where a run finds it is no longer its mission's run (another worker took the
    mission over). It stops at once and reports nothing: no result is made of it, since the
    run that replaced it reports."""


class Cancellation:
    def __init__(self) -> None:
        self._set = threading.Event()
        self._lock = threading.Lock()
        self._callbacks: list[Callable[[], None]] = []
        self.summary = ""

    @property
    def cancelled(self) -> bool:
        return self._set.is_set()

    def cancel(self, summary: str) -> bool:
        """Cancel with `summary` ("Cancelled by @login."); False if it already was."""
        with self._lock:
            if self._set.is_set():
                return False
            self.summary = summary
            self._set.set()
            callbacks = list(self._callbacks)
        for callback in callbacks:
            callback()
        return True

    def on_cancel(self, callback: Callable[[], None]) -> None:
        """Run `callback` when the mission is cancelled (at once if it already is)."""
        with self._lock:
            if not self._set.is_set():
                self._callbacks.append(callback)
                return
        callback()

    def check(self) -> None:
        """Raise `Cancelled` if the mission was cancelled."""
        if self._set.is_set():
            raise Cancelled(self.summary)

    def wait(self, timeout: float) -> bool:
        return self._set.wait(timeout)
