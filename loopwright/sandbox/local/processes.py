"""A local sandbox command's process tree: its output, read as it arrives, and the kill
that reaches every process it started.

Each command runs under the launcher (a child subreaper, in its own process group); the
launcher is never reaped before the kill, so its pid, the group id, cannot be reused.
"""

from __future__ import annotations

import codecs
import contextlib
import os
import queue
import select
import signal
import subprocess
import threading
import time
from typing import IO

from loopwright.sandbox.base import OutputCallback, RawCallback
from loopwright.sandbox.output import CappedOutput

READ_CHUNK = 65536
POLL_S = 0.02
DRAIN_GRACE_S = 1.0
"""After the command ends, how long to wait for output still in flight before returning."""
STOP_GRACE_S = 5.0
"""How long a launcher told to stop gets to kill its command's processes."""


class PipeReader:
    """Reads a pipe on a thread into a queue; `b""` marks end of file."""

    def __init__(self, pipe: IO[bytes]) -> None:
        self._pipe = pipe
        self._queue: queue.Queue[bytes] = queue.Queue()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="local-sandbox-output", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        fd = self._pipe.fileno()
        # select with a short timeout, so stop() works even while an escaped descendant
        # keeps the pipe open.
        while not self._stop.is_set():
            ready, _, _ = select.select([fd], [], [], POLL_S)
            if not ready:
                continue
            data = os.read(fd, READ_CHUNK)
            self._queue.put(data)
            if not data:
                return

    def get(self, timeout: float) -> bytes | None:
        try:
            return self._queue.get(timeout=timeout)
        except queue.Empty:
            return None

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        self._pipe.close()

    def drain(self) -> list[bytes]:
        """What is left in the queue after `stop`, without the end-of-file marker."""
        chunks: list[bytes] = []
        while True:
            try:
                chunk = self._queue.get_nowait()
            except queue.Empty:
                return chunks
            if chunk:
                chunks.append(chunk)


def pump(
    proc: subprocess.Popen[bytes],
    reader: PipeReader,
    deadline: float,
    output: CappedOutput,
    decoder: codecs.IncrementalDecoder,
    on_output: OutputCallback | None,
    on_raw: RawCallback | None = None,
) -> bool:
    """Forward output until the command ends and its output is drained; True on timeout."""
    timed_out = False
    stop_by: float | None = None
    eof = False
    while True:
        now = time.monotonic()
        if stop_by is None:
            exited = has_exited(proc.pid)
            if exited or now >= deadline:
                timed_out = not exited
                if timed_out:
                    stop(proc)
                # The launcher has killed its descendants; this catches any left in its
                # group if it was killed first. It is still unreaped here (WNOWAIT), so
                # its pid, the group id, cannot have been reused.
                kill_group(proc.pid)
                stop_by = time.monotonic() + DRAIN_GRACE_S
        if stop_by is not None and (eof or now >= stop_by):
            return timed_out
        if eof:
            time.sleep(POLL_S)  # output closed but bash still running: wait for it
            continue
        limit = (stop_by if stop_by is not None else deadline) - now
        chunk = reader.get(max(0.0, min(POLL_S, limit)))
        if chunk is None:
            continue
        if chunk == b"":
            eof = True
            continue
        if on_raw is not None:
            on_raw(chunk)
        output.add(chunk)
        emit(on_output, decoder.decode(chunk))


def emit(on_output: OutputCallback | None, text: str) -> None:
    if on_output is not None and text:
        on_output(text)


def has_exited(pid: int) -> bool:
    """Whether the child has exited, without reaping it (WNOWAIT keeps its pid reserved)."""
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


def stop(proc: subprocess.Popen[bytes]) -> None:
    """Tell the launcher to kill everything its command started, give it a moment, then
    kill its process group. The launcher is never reaped here (its pid stays reserved), so
    neither signal can reach a process that reused the pid."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_GRACE_S
    while not has_exited(proc.pid) and time.monotonic() < deadline:
        time.sleep(POLL_S / 4)
    kill_group(proc.pid)


def kill_group(pgid: int) -> None:
    # ProcessLookupError: the group is already empty, which is the state we want.
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)
