"""The test run's report file, printed back at the end of the test command's own output.

Reading the report with a file tool costs a sandbox round trip of its own; instead the shell
that ran the suite prints it (base64, after a marker line naming this run's frame id) once
the test command has ended, and the host takes it from the output it already reads. The
frame is no more trustworthy than the file was: the tested code could write either, and a
report only ever counts against a verdict (a disagreement with the signed results stream),
never for it. A missing frame (the command was cut short) or a report too large to print
falls back to reading the file. Pure, apart from the shell text it builds.
"""

from __future__ import annotations

import base64
import binascii
import re
import secrets
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

MARK = "\x1dLOOPWRIGHT-REPORT "
"""How the frame's marker line starts (a group separator, never in base64 or XML text)."""
INLINE_MAX_BYTES = 65_536
"""Reports up to this size ride in the output; larger ones are read as a file. Well under
half the output cap, so the frame is never cut out of what the host keeps."""
_MARK_BYTES = MARK.encode()
_FRAME_TEXT = re.compile(
    "\n?" + re.escape(MARK) + r"[0-9a-f]+ (?:inline\n[A-Za-z0-9+/=]*\n?|file\n?|none\n?)"
)

Kind = Literal["inline", "file", "none"]


def new_frame_id() -> str:
    return secrets.token_hex(8)


def trailer(frame_id: str, report_path: str) -> str:
    """Shell that prints the report at `report_path` (relative to the current directory)
    as a frame: inline when it is a regular file of at most `INLINE_MAX_BYTES`, `file` when
    it must be read as a file (larger, or a symlink), `none` when there is none."""
    path = shlex.quote(report_path)
    mark = "\\035LOOPWRIGHT-REPORT " + frame_id
    return (
        f"if [ -L {path} ]; then printf '\\n{mark} file\\n'; "
        f"elif [ -f {path} ]; then "
        f'if [ "$(wc -c < {path})" -le {INLINE_MAX_BYTES} ]; then '
        f"printf '\\n{mark} inline\\n'; base64 < {path} | tr -d '\\n'; printf '\\n'; "
        f"else printf '\\n{mark} file\\n'; fi; "
        f"else printf '\\n{mark} none\\n'; fi"
    )


@dataclass
class ReportFrame:
    """Finds the last frame of `frame_id` in raw output fed in any chunking."""

    frame_id: str
    _tail: bytearray = field(default_factory=bytearray)
    _frame: bytearray | None = None
    _overflow: bool = False

    def feed(self, data: bytes) -> None:
        marker = _MARK_BYTES + self.frame_id.encode() + b" "
        if self._frame is not None:
            self._frame += data
            buffer = self._frame
        else:
            self._tail += data
            buffer = self._tail
        at = buffer.rfind(marker)
        if at >= 0:
            # A later marker replaces an earlier one: ours is printed after the command.
            self._frame = bytearray(buffer[at + len(marker) :])
            self._tail = bytearray()
            self._overflow = False
        elif self._frame is None:
            del self._tail[: max(0, len(self._tail) - len(marker))]
        if self._frame is not None and len(self._frame) > INLINE_MAX_BYTES * 2:
            self._overflow = True
            del self._frame[: len(self._frame) - len(marker)]

    def result(self) -> tuple[Kind, str | None] | None:
        """(`inline`, the report text) / (`file`, None) / (`none`, None); None when no
        well-formed frame arrived (the host reads the file instead)."""
        if self._frame is None or self._overflow:
            return None
        kind, _, rest = bytes(self._frame).partition(b"\n")
        if kind == b"none":
            return "none", None
        if kind == b"file":
            return "file", None
        if kind != b"inline":
            return None
        body = rest.split(b"\n", 1)[0]
        try:
            raw = base64.b64decode(body, validate=True)
        except (binascii.Error, ValueError):
            return None
        return "inline", raw.decode("utf-8", errors="replace")


def strip_frames(text: str) -> str:
    """`text` without report frames, for the output people and the model read."""
    return _FRAME_TEXT.sub("", text)


class FrameFilter:
    """Passes streamed text to `sink` with report frames taken out: a line from the
    separator byte is held until its newline shows whether it is a marker, and an inline
    marker's base64 line after it is dropped too."""

    def __init__(self, sink: Callable[[str], None]) -> None:
        self._sink = sink
        self._held = ""
        self._skip_line = False

    def __call__(self, text: str) -> None:
        data = self._held + text
        self._held = ""
        out: list[str] = []
        while data:
            if self._skip_line:
                end = data.find("\n")
                if end < 0:
                    return self._emit(out)
                data, self._skip_line = data[end + 1 :], False
                continue
            at = data.find("\x1d")
            if at < 0:
                out.append(data)
                break
            out.append(data[:at])
            data = data[at:]
            end = data.find("\n")
            if end < 0:
                if MARK.startswith(data[: len(MARK)]) and len(data) < 256:
                    self._held = data
                else:
                    out.append(data)
                break
            line, data = data[: end + 1], data[end + 1 :]
            if line.startswith(MARK):
                self._skip_line = line.rstrip("\n").endswith(" inline")
            else:
                out.append(line)
        return self._emit(out)

    def _emit(self, out: list[str]) -> None:
        shown = "".join(out)
        if shown:
            self._sink(shown)

    def flush(self) -> None:
        held, self._held = self._held, ""
        if held and not held.startswith(MARK):
            self._sink(held)
