"""The sandbox protocol: where a mission's repository lives and its commands run.

The agent runs on the host and talks to a sandbox only through this protocol. A failing
command is data (`ExecResult`); only infrastructure failures raise `SandboxError`. File
operations take paths relative to the workspace root and raise `FileToolError`, whose
message goes back to the model as an observation.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

OutputCallback = Callable[[str], None]
"""Receives command output as it arrives (decoded text, arbitrary chunking)."""
RawCallback = Callable[[bytes], None]
"""Receives every byte of command output as it arrives (uncapped, arbitrary chunking)."""

MISSION_LABEL = "loopwright.mission"
WORKSPACE = "/workspace"
SANDBOX_UID = 10001
MAX_FILE_BYTES = 10_000_000
"""The most a file read returns; a larger file is refused, saying its size."""


@dataclass(frozen=True)
class ExecResult:
    output: str
    """stdout and stderr interleaved, capped: head and tail kept around a marker."""
    exit_code: int
    """The command's exit status; 124 when the timeout ended it, 128+N when killed by signal N."""
    timed_out: bool = False
    truncated: bool = False
    duration_s: float = 0.0

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out


class SandboxError(Exception):
    """The sandbox itself failed (engine gone, container died, image missing).

    Raised, never returned: the mission ends with status `error` and this message.
    """


class FileToolError(Exception):
    """A file operation was refused or failed; the message is meant for the model."""


class Sandbox(Protocol):
    """One isolated workspace holding a copy of the repository."""

    mission_id: str

    def exec(
        self,
        command: str,
        *,
        timeout_s: float,
        on_output: OutputCallback | None = None,
        on_raw: RawCallback | None = None,
    ) -> ExecResult:
        """Run `command` with bash in the workspace root; kill its whole process tree on timeout.

        `on_raw` receives every byte of output as it arrives, before any cap is applied.
        """
        ...

    def read_file(self, path: str) -> bytes:
        """Read a workspace file. Symlinks are resolved inside the sandbox and must stay in it."""
        ...

    def write_file(self, path: str, data: bytes) -> None:
        """Create or replace a workspace file, creating parent directories."""
        ...

    def set_network(self, enabled: bool) -> None:
        """Connect or cut the sandbox's network (setup phase vs. the model's turn)."""
        ...

    def run_service(
        self, command: str, *, port: int, env: Mapping[str, str], log: str
    ) -> AbstractContextManager[str]:
        """Run `command` in the background while the context is open; yield a host URL base.

        For verification only (the model's commands can never start one). The URL base
        (`http://127.0.0.1:N`) reaches `port` inside the sandbox from the host. Output goes
        to the workspace file `log`; when the command ends, its exit status is written to
        `log + ".exit"`. Leaving the context stops the command and everything it started.
        """
        ...

    def close(self) -> None:
        """Destroy the sandbox and everything in it. Safe to call twice."""
        ...

    def resolve_path(self, path: str) -> str:
        """The workspace-relative path `path` names once symlinks are resolved in the sandbox.

        Components need not exist (the rest of the path is taken as written). Raises
        `FileToolError` for a path that is not a plain relative path or that resolves to a
        location outside the workspace. Used to match protected paths on the real target.
        """
        ...


class SandboxProvider(Protocol):
    """Creates sandboxes seeded with a copy of a directory tree on the host."""

    kind: str

    def create(self, mission_id: str, tree: Path, *, network: bool) -> Sandbox:
        """A new sandbox whose workspace holds a copy of `tree` (including its `.git`)."""
        ...

    def reap_abandoned(self) -> list[str]:
        """Remove sandboxes left by Loopwright processes on this host that have exited.

        Sandboxes of live processes (other CLI runs, a server) stay. Returns their ids.
        """
        ...

    def close(self) -> None:
        """Release shared resources (engine clients, warm pools)."""
        ...
