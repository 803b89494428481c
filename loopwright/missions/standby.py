"""The verification sandbox, started in the background while the loop runs.

Verification needs a sandbox the model never touched. Starting it costs a container start
and a copy of the tree; started while the model works, verification finds it ready. It is
one of the mission's sandboxes (counted with them, closed with them on every way a mission
ends), it holds the clean base tree and nothing else, and nobody but verification ever gets
it. When it could not start, verification starts a sandbox as it would without one.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

from loopwright.cancellation import Cancelled
from loopwright.missions.base import MISSION_ERRORS, MissionSandboxes
from loopwright.sandbox.base import FileToolError, Sandbox
from loopwright.verify.stream import StreamKey

Prepare = Callable[[Sandbox], StreamKey | None]
"""What runs in the new sandbox right after it starts, before anything is asked of it (for
a fix: placing the verification run's key); returns the key it placed, if any."""


class Standby:
    """One fresh sandbox of `tree`, started through `sandboxes` on a thread of its own."""

    def __init__(
        self,
        sandboxes: MissionSandboxes,
        tree: Path,
        *,
        network: bool,
        prepare: Prepare | None = None,
    ) -> None:
        self.tree = tree
        self.network = network
        self._sandboxes = sandboxes
        self._prepare = prepare
        self._done = threading.Event()
        self._sandbox: Sandbox | None = None
        self._key: StreamKey | None = None
        self.problem = ""
        """Why the sandbox is not there (it failed to start, or was already taken)."""
        if not sandboxes.open_in_background(self._start, name="verification-sandbox"):
            self.problem = "the mission ended before the verification sandbox could start"
            self._done.set()

    def _start(self) -> None:
        try:
            sandbox = self._sandboxes.open(self.tree, network=self.network)
            try:
                key = self._prepare(sandbox) if self._prepare is not None else None
            except FileToolError as exc:
                # The sandbox itself is fine: what was not done now is done at verification
                # (a run key is then written by the run itself).
                self.problem = f"the verification sandbox was not prepared in advance ({exc})"
                key = None
        except (*MISSION_ERRORS, Cancelled) as exc:
            self.problem = f"the verification sandbox did not start in advance ({exc})"
        else:
            self._sandbox, self._key = sandbox, key
        finally:
            self._done.set()

    def ready(self, timeout_s: float | None = None) -> bool:
        """Wait up to `timeout_s` for the start to end; True when a sandbox is waiting."""
        self._done.wait(timeout_s)
        return self._done.is_set() and self._sandbox is not None

    def take(self) -> tuple[Sandbox, StreamKey | None] | None:
        """The started sandbox and the key placed in it, once; None when it did not start
        (the caller starts one itself). Waits for a start still under way."""
        self._done.wait()
        sandbox, key = self._sandbox, self._key
        self._sandbox = self._key = None
        if sandbox is None:
            self.problem = self.problem or "the verification sandbox was already taken"
            return None
        return sandbox, key
