"""Pair mode in the terminal (`loopwright fix --pair`): each request for approval is shown
with its exact command or diff and answered at a prompt, and `g` sends the model guidance
at any time while the loop runs.

On a terminal, stdin is read key by key (cbreak mode, so one key answers without Enter;
Ctrl-C still interrupts) by a thread of its own, because guidance may come while the
mission's thread waits on the model or a command. Stray keys outside a prompt never
approve anything. Without a terminal (`--pair-lines`), stdin is read as lines, for scripts.
"""

from __future__ import annotations

import contextlib
import os
import queue
import select
import threading
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, TextIO

from loopwright.agent.pair import ApprovalRequest, Decision, wait_for_decision
from loopwright.cancellation import Cancellation, Cancelled
from loopwright.missions.progress import terminal_safe, wait_words

BY = "terminal"
PROMPT = "Approve? [y]es / [n]o (reject) / [r]edirect"
GUIDANCE_KEY_HINT = "pair mode: press g at any time to send the model guidance"
LINES_HINT = (
    "pair mode: answer each request with a line: y, n [REASON] or r GUIDANCE; "
    "a line g GUIDANCE sends guidance at any time"
)
CLOSED = "stdin is closed, so nobody can approve it"
_READ_WAIT_S = 0.1
"""How long the reader waits for input before it looks whether it should stop."""
_POLL_S = 0.05


@dataclass
class TerminalPair:
    """A `Pair` whose decisions a person makes in the terminal; use it as a context manager
    (it starts the reader and, on a terminal, restores the terminal's settings on the way
    out, whether the mission ended, was cancelled or failed).

    `interactive`: stdin is a terminal read key by key; otherwise stdin is read as lines
    (`y`, `n [REASON]`, `r GUIDANCE` answer the oldest request waiting, or the next one
    to come; `g GUIDANCE` is guidance for the next step)."""

    stdin: int
    out: TextIO
    expiry_s: float
    interactive: bool
    color: bool = False
    _answers: queue.Queue[tuple[int, Decision]] = field(default_factory=queue.Queue)
    _guidance: list[Decision] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _write_lock: threading.Lock = field(default_factory=threading.Lock)
    _prompt: int = 0
    """The number of the request the prompt waits on; 0 when none waits."""
    _asked: int = 0
    _closed: threading.Event = field(default_factory=threading.Event)
    _stop: threading.Event = field(default_factory=threading.Event)
    _saved: list[Any] | None = None
    _reader: threading.Thread | None = None

    def __enter__(self) -> TerminalPair:
        if self.interactive:
            import termios

            self._saved = termios.tcgetattr(self.stdin)
            self._cbreak()
        self._reader = threading.Thread(
            target=self._read_keys if self.interactive else self._read_lines,
            name="pair-input",
            daemon=True,
        )
        self._reader.start()
        self._say(GUIDANCE_KEY_HINT if self.interactive else LINES_HINT, "2")
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        try:
            # Joined, so no read of this descriptor outlives the pair (it waits at most
            # _READ_WAIT_S between looks at the stop flag).
            if self._reader is not None:
                self._reader.join(1.0)
        finally:
            self._restore()

    # The Pair protocol, called on the mission's thread.

    def open(self, request: ApprovalRequest) -> None:
        """Nothing to record: the terminal's request is the prompt `ask` prints."""

    def ask(self, request: ApprovalRequest, cancellation: Cancellation) -> Decision:
        self._show(request)
        with self._lock:
            self._asked += 1
            number = self._asked
            self._prompt = number
        self._say(
            f"  {PROMPT} (no answer in {wait_words(self.expiry_s)} rejects it): ", "1", end=""
        )
        try:
            decision = wait_for_decision(
                lambda: self._poll(number),
                expiry_s=self.expiry_s,
                cancellation=cancellation,
                interval_s=_POLL_S,
            )
        except Cancelled:
            self._say("\nThe mission is cancelled; the request is not run.", "31")
            raise
        finally:
            with self._lock:
                self._prompt = 0
        if not self.interactive and decision.by == BY and decision.text != CLOSED:
            self._say(" ".join(filter(None, (decision.kind, decision.text))))
        if decision.by == "expiry":
            self._say(f"\nNo answer within {wait_words(self.expiry_s)}: rejected (expiry).", "33")
        elif decision.text == CLOSED:
            self._say(f"\n{CLOSED[0].upper()}{CLOSED[1:]}: rejected.", "33")
        return decision

    def guidance(self) -> list[Decision]:
        with self._lock:
            taken, self._guidance = self._guidance, []
        return taken

    def taking_guidance(self, on: bool) -> None:
        """Nothing to record: `g` is read only while this process runs the loop."""

    # What the mission's thread shows and waits on.

    def _poll(self, number: int) -> Decision | None:
        # Read before the queue: the reader queues its last answers before it marks
        # stdin closed, so none of them is lost to the closing.
        closed = self._closed.is_set()
        while True:
            try:
                answered, decision = self._answers.get_nowait()
            except queue.Empty:
                break
            # On a terminal an answer belongs to the prompt it was typed at; a line
            # answers whichever request comes next.
            if answered == number or not self.interactive:
                return decision
        return Decision("reject", BY, CLOSED) if closed else None

    def _show(self, request: ApprovalRequest) -> None:
        # The `approval_requested` line above this names the action; these are the details.
        lines = [f"    why: {terminal_safe(request.why)}"]
        if request.command:
            lines.append("    command: " + self._c("1", terminal_safe(request.command)))
        if request.network:
            lines.append("    approving runs it with the network attached, for this command only")
        if request.diff:
            lines.extend("    " + self._diff_line(line) for line in request.diff.splitlines())
        self._say("\n".join(lines))

    def _diff_line(self, line: str) -> str:
        shown = terminal_safe(line)
        if line.startswith(("+++", "---")):
            return self._c("1", shown)
        if line.startswith("+"):
            return self._c("32", shown)
        if line.startswith("-"):
            return self._c("31", shown)
        if line.startswith("@@"):
            return self._c("36", shown)
        return shown

    # The reader thread.

    def _read_keys(self) -> None:
        while not self._stop.is_set():
            key = self._read(1)
            if key is None:
                continue
            if key == b"":
                self._hang_up()
                return
            with self._lock:
                number = self._prompt
            char = key.decode("ascii", errors="ignore").lower()
            if number:
                self._at_prompt(number, char)
            elif char == "g":
                self._take_guidance()

    def _at_prompt(self, number: int, char: str) -> None:
        if char == "y":
            self._say("yes")
            self._answer(number, Decision("approve", BY))
        elif char == "n":
            self._say("no")
            reason = self._line("  Reason for the model (optional, Enter to skip): ")
            if reason is not None:
                self._answer(number, Decision("reject", BY, reason))
        elif char == "r":
            self._say("redirect")
            text = self._line("  Guidance for the model (Enter to send): ")
            if text:
                self._answer(number, Decision("redirect", BY, text))
            elif text is not None:
                self._say(f"No guidance given; the request still waits. {PROMPT}: ", "1", end="")
        elif char == "\x04":
            self._say("no (Ctrl-D)")
            self._answer(number, Decision("reject", BY, "rejected with Ctrl-D"))
        elif char not in ("\r", "\n", ""):
            self._say(f"\nPress y, n or r. {PROMPT}: ", "1", end="")

    def _take_guidance(self) -> None:
        text = self._line("  Guidance for the model's next step (Enter to send, empty to cancel): ")
        if text:
            with self._lock:
                self._guidance.append(Decision("redirect", BY, text))
            self._say("Guidance queued: the model reads it at its next step.", "2")
        elif text is not None:
            self._say("No guidance sent.", "2")

    def _answer(self, number: int, decision: Decision) -> None:
        with self._lock:
            current = self._prompt
        if current != number:
            self._say("Too late: that request was already decided.", "33")
            return
        self._answers.put((number, decision))

    def _line(self, prompt: str) -> str | None:
        """One line typed with the terminal's own line editing and echo; None once stdin
        is gone (then everything waiting is rejected)."""
        self._restore()
        try:
            self._say(prompt, "1", end="")
            data = b""
            while not self._stop.is_set():
                chunk = self._read(4096)
                if chunk is None:
                    continue
                if chunk == b"":
                    break  # Ctrl-D on an empty line ends it; a hang-up shows at the next key
                data += chunk
                if b"\n" in data:
                    break
            return data.decode("utf-8", errors="replace").strip()
        finally:
            if not self._stop.is_set():
                self._cbreak()

    def _read_lines(self) -> None:
        buffered = b""
        while not self._stop.is_set():
            chunk = self._read(4096)
            if chunk is None:
                continue
            if chunk == b"":
                if buffered.strip():
                    self._line_answer(buffered.decode("utf-8", errors="replace"))
                self._hang_up()
                return
            buffered += chunk
            while b"\n" in buffered:
                line, buffered = buffered.split(b"\n", 1)
                self._line_answer(line.decode("utf-8", errors="replace"))

    def _line_answer(self, line: str) -> None:
        word, _, rest = line.strip().partition(" ")
        word, rest = word.lower(), rest.strip()
        if not word:
            return
        if word in ("g", "guidance") and rest:
            with self._lock:
                self._guidance.append(Decision("redirect", BY, rest))
        elif word in ("y", "yes"):
            self._answers.put((0, Decision("approve", BY)))
        elif word in ("n", "no"):
            self._answers.put((0, Decision("reject", BY, rest)))
        elif word in ("r", "redirect") and rest:
            self._answers.put((0, Decision("redirect", BY, rest)))
        else:
            self._say(
                f"pair mode: cannot read {terminal_safe(line.strip())!r} as an answer; write "
                "y, n [REASON], r GUIDANCE or g GUIDANCE",
                "33",
            )

    def _hang_up(self) -> None:
        self._closed.set()

    def _read(self, size: int) -> bytes | None:
        """Up to `size` bytes of stdin; None when nothing came in a short while, b"" at its
        end (closed, or the terminal hung up)."""
        try:
            ready, _, _ = select.select([self.stdin], [], [], _READ_WAIT_S)
            if not ready:
                return None
            return os.read(self.stdin, size)
        except OSError:
            return b""

    # The terminal.

    def _cbreak(self) -> None:
        """Keys arrive one at a time and are not echoed; Ctrl-C still interrupts."""
        import termios

        if self._saved is None:
            return
        mode = termios.tcgetattr(self.stdin)
        mode[3] &= ~(termios.ECHO | termios.ICANON)
        mode[6][termios.VMIN] = 1
        mode[6][termios.VTIME] = 0
        termios.tcsetattr(self.stdin, termios.TCSANOW, mode)

    def _restore(self) -> None:
        import termios

        if self._saved is not None:
            # A terminal that is gone has nothing left to restore.
            with contextlib.suppress(termios.error):
                termios.tcsetattr(self.stdin, termios.TCSANOW, self._saved)

    def _say(self, text: str, code: str = "", end: str = "\n") -> None:
        shown = self._c(code, text) if code else text
        with self._write_lock:
            self.out.write(shown + end)
            self.out.flush()

    def _c(self, code: str, text: str) -> str:
        return f"\033[{code}m{text}\033[0m" if self.color else text


def pair_refusal(*, as_json: bool, stdin_is_tty: bool, lines: bool) -> str | None:
    """Why `fix --pair` cannot run with these flags and this stdin, or None."""
    if as_json:
        return (
            "--pair prompts in the terminal and cannot run with --json (one JSON object on "
            "stdout); drop --json, and use --events FILE.ndjson for a machine-readable record"
        )
    if not stdin_is_tty and not lines:
        return (
            "--pair reads your answers from a terminal, and stdin is not one; run it in a "
            "terminal, or add --pair-lines to answer with lines on stdin "
            "(y, n [REASON], r GUIDANCE, g GUIDANCE)"
        )
    return None
