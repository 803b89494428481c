"""Command output capped for the model: the head and the tail survive, the middle is counted.

Both backends keep their output in one `CappedOutput`, so the model sees the same omission
marker whichever sandbox ran the command.
"""

from __future__ import annotations

from collections import deque


def omission_marker(dropped: int) -> str:
    """The line that stands in for the `dropped` bytes between the head and the tail."""
    return f"\n[... {dropped} bytes of output omitted ...]\n"


class CappedOutput:
    """Keeps the first half of `cap` bytes and the last half, and counts what falls between."""

    def __init__(self, cap: int) -> None:
        self.cap = max(cap, 0)
        self._head_cap = self.cap // 2
        self._tail_cap = self.cap - self._head_cap
        self._head = bytearray()
        self._tail: deque[bytes] = deque()
        self._tail_bytes = 0
        self.dropped = 0
        """Bytes that fell between the head and the tail."""

    def add(self, chunk: bytes) -> bytes:
        """Store `chunk`; return the part of it that went into the head (the part to stream)."""
        room = self._head_cap - len(self._head)
        streamed = chunk[: max(room, 0)]
        self._head += streamed
        rest = chunk[len(streamed) :]
        if rest:
            self._tail.append(rest)
            self._tail_bytes += len(rest)
            while self._tail_bytes > self._tail_cap:
                first = self._tail.popleft()
                excess = self._tail_bytes - self._tail_cap
                if len(first) > excess:
                    self._tail.appendleft(first[excess:])
                    self.dropped += excess
                    self._tail_bytes -= excess
                else:
                    self.dropped += len(first)
                    self._tail_bytes -= len(first)
        return bytes(streamed)

    @property
    def truncated(self) -> bool:
        return self.dropped > 0

    def text(self) -> str:
        """The output decoded (invalid UTF-8 replaced), with the marker where bytes were dropped."""
        tail = b"".join(self._tail)
        if not self.dropped:
            return (bytes(self._head) + tail).decode("utf-8", "replace")
        head = self._head.decode("utf-8", "replace")
        return head + omission_marker(self.dropped) + tail.decode("utf-8", "replace")
