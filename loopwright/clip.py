"""The one way Loopwright shortens long text: keep the head and the tail, say what was cut.

Model observations, event payloads, failure messages and web-check errors all go through
`truncate_middle`, so a reader sees the same marker everywhere.
"""

from __future__ import annotations

MARKER_ROOM = 80
"""Characters reserved for the marker line when a text is cut."""

MIN_KEPT = 20
"""Characters kept (head and tail together) however small the limit."""


def truncate_middle(text: str, limit: int) -> str:
    """Keep the head and tail of `text` within `limit` characters, with a marker between."""
    if len(text) <= limit:
        return text
    keep = max(limit - MARKER_ROOM, MIN_KEPT)
    head = text[: keep // 2]
    tail = text[len(text) - keep // 2 :]
    elided = len(text) - len(head) - len(tail)
    return f"{head}\n[... {elided} characters elided ...]\n{tail}"
