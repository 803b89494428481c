"""The warm pool: started, empty sandbox containers waiting for a mission to claim one."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable

from loopwright.sandbox.base import SandboxError

Member = tuple[str, str, bool]
"""An idle pool container: its id, its workspace volume, and whether it has the network."""


class WarmPool:
    """Keeps up to `size` idle containers; refills in the background after each claim.

    `start` creates and starts one member (blocking); `remove` removes one that is no longer
    wanted (the pool closed while it was starting, or at `close`).
    """

    def __init__(
        self,
        size: int,
        start: Callable[[], Member],
        remove: Callable[[str, str], None],
    ) -> None:
        self.size = size
        self._start = start
        self._remove = remove
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._idle: deque[Member] = deque()
        self._fillers: list[threading.Thread] = []
        self._starting = 0
        self._closed = False

    def __len__(self) -> int:
        with self._lock:
            return len(self._idle)

    def take(self) -> Member | None:
        """An idle member, or None when the pool is empty."""
        with self._lock:
            return self._idle.popleft() if self._idle else None

    def idle_ids(self) -> set[str]:
        with self._lock:
            return {cid for cid, _, _ in self._idle}

    def fill(self) -> None:
        """Start members until `size` are idle (blocking)."""
        while True:
            with self._changed:
                # Starting ones count too, so concurrent fillers never overshoot the size;
                # wait for those another filler is starting.
                while (
                    not self._closed
                    and len(self._idle) < self.size <= len(self._idle) + self._starting
                ):
                    self._changed.wait(timeout=1)
                if self._closed or len(self._idle) >= self.size:
                    return
                self._starting += 1
            try:
                self._add_member()
            finally:
                with self._changed:
                    self._starting -= 1
                    self._changed.notify_all()

    def _add_member(self) -> None:
        container_id, volume, network = self._start()
        with self._lock:
            if not self._closed:
                self._idle.append((container_id, volume, network))
                return
        self._remove(container_id, volume)

    def refill_later(self) -> None:
        """Fill the pool on a background thread."""
        if self.size <= 0:
            return
        thread = threading.Thread(target=self._refill, name="sandbox-pool-fill", daemon=True)
        with self._lock:
            if self._closed:
                return
            self._fillers = [t for t in self._fillers if t.is_alive()]
            self._fillers.append(thread)
        thread.start()

    def _refill(self) -> None:
        try:
            self.fill()
        except SandboxError:
            # The pool is an optimisation: missions fall back to cold starts, which report
            # the same engine or image problem to the user.
            return

    def close(self) -> None:
        """Stop refilling, wait for the fillers, and remove the idle members."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            idle = list(self._idle)
            self._idle.clear()
            fillers = list(self._fillers)
        for thread in fillers:
            thread.join(timeout=30)
        for container_id, volume, _ in idle:
            self._remove(container_id, volume)
