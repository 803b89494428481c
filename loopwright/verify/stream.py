"""Loopwright's signed results stream: the records its reporters print as each test ends.

A reporter that lives outside the repository (`reporters/run_pytest.py`,
`reporters/node_reporter.mjs`) prints one line per record on the test process's original
stdout: `\\x1eLOOPWRIGHT1 <run-id> <seq> <json> <hmac>`, the HMAC-SHA256 of
`<run-id> <seq> <json>` under a key made for this run alone. The host feeds every byte of the
command's output to `StreamParser` as it arrives, so records cannot be rewritten after the
fact, and lines the tested code prints to imitate them fail the signature check. Pure: no I/O.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from loopwright.verify.reports import Outcome, TestResult

MAGIC = b"\x1eLOOPWRIGHT1 "
"""How every record line starts; the record runs to the next newline."""
STREAM_ENV = "LOOPWRIGHT_STREAM"
"""Names the workspace file holding the run id and key; the reporter deletes it at load."""
MAX_RECORD_BYTES = 65_536
"""A record line longer than this is not one of ours (the reporters clip messages)."""

_OUTCOMES: frozenset[str] = frozenset({"passed", "failed", "error", "skipped"})
_SEVERITY: dict[str, int] = {"passed": 0, "skipped": 1, "failed": 2, "error": 3}
_COUNT_KEYS = ("passed", "failed", "error", "skipped")
_MAGIC_TEXT = MAGIC.decode()
_RECORD_TEXT = re.compile(re.escape(_MAGIC_TEXT) + "[^\n]*\n?")


@dataclass(frozen=True)
class StreamKey:
    """The per-run secret: a run id that names the run and the key that signs its records."""

    run_id: str
    key: bytes

    @classmethod
    def new(cls) -> StreamKey:
        return cls(secrets.token_hex(8), secrets.token_bytes(32))

    def file_bytes(self) -> bytes:
        """What the reporter reads from the key file: the run id and the key in hex."""
        return f"{self.run_id}\n{self.key.hex()}\n".encode()

    def sign(self, seq: int, payload: str) -> str:
        message = f"{self.run_id} {seq} {payload}".encode()
        return hmac.new(self.key, message, hashlib.sha256).hexdigest()

    def record(self, seq: int, body: dict[str, Any]) -> bytes:
        """One signed record line, exactly as the reporters write it."""
        payload = json.dumps(body, separators=(",", ":"), ensure_ascii=True, sort_keys=True)
        return b"%s%s %d %s %s\n" % (
            MAGIC,
            self.run_id.encode(),
            seq,
            payload.encode(),
            self.sign(seq, payload).encode(),
        )


@dataclass(frozen=True)
class StreamResult:
    """What one run's stream showed: whether it started and completed, and every result."""

    started: bool
    completed: bool
    status: int | None
    """The runner's exit status as the completion record gives it; None without one."""
    counts: dict[str, int] | None
    results: tuple[TestResult, ...]
    problems: tuple[str, ...]
    """Signs that something other than the reporter wrote or replayed records, in words."""


class StreamParser:
    """Checks records as output arrives; `feed` takes raw bytes in any chunking."""

    def __init__(self, key: StreamKey) -> None:
        self._key = key
        self._buffer = bytearray()
        self._next_seq = 0
        self._seen: dict[int, bytes] = {}
        self._started = False
        self._completed = False
        self._status: int | None = None
        self._counts: dict[str, int] | None = None
        self._end_error = ""
        self._results: dict[str, TestResult] = {}
        self._test_records = 0
        self._forged = 0
        self._foreign = 0
        self._problems: list[str] = []

    def feed(self, data: bytes) -> None:
        self._buffer += data
        while True:
            start = self._buffer.find(MAGIC[:1])
            if start < 0:
                self._buffer.clear()
                return
            if start:
                del self._buffer[:start]
            head = bytes(self._buffer[: len(MAGIC)])
            if not MAGIC.startswith(head):
                del self._buffer[:1]  # a stray separator byte in ordinary output
                continue
            if len(head) < len(MAGIC):
                return  # the rest of the marker is still in flight
            end = self._buffer.find(b"\n")
            if end < 0:
                if len(self._buffer) > MAX_RECORD_BYTES:
                    self._forged += 1
                    del self._buffer[: len(MAGIC)]
                    continue
                return
            line = bytes(self._buffer[len(MAGIC) : end])
            del self._buffer[: end + 1]
            self._line(line)

    def result(self) -> StreamResult:
        """The stream as it stands; call once the command has ended."""
        if self._buffer.startswith(MAGIC):
            # A record cut off by the end of the output: the process died while writing it.
            self._buffer.clear()
        problems = list(self._problems)
        if self._forged:
            problems.insert(
                0,
                f"{_lines(self._forged)} in the test output imitate Loopwright's result records "
                "but are not signed with this run's key: something in the test run printed "
                "forged results",
            )
        if self._foreign:
            problems.insert(
                0,
                f"{_lines(self._foreign)} in the test output are result records of another run "
                "(a different run id): results replayed from an earlier run",
            )
        if self._completed and self._counts is not None:
            counted = sum(self._counts.get(k, 0) for k in _COUNT_KEYS)
            if counted != self._test_records:
                problems.append(
                    f"the completion record counts {counted} test results but "
                    f"{self._test_records} arrived: results were lost on the way"
                )
        if self._end_error:
            problems.append(f"Loopwright's reporter stopped the run: {self._end_error}")
        return StreamResult(
            started=self._started,
            completed=self._completed,
            status=self._status,
            counts=self._counts,
            results=tuple(self._results.values()),
            problems=tuple(problems),
        )

    def _line(self, line: bytes) -> None:
        text = line.decode("ascii", "replace")
        head = text.split(" ", 2)
        tail = text.rsplit(" ", 1)
        if len(head) < 3 or len(tail) < 2 or not head[1].isdigit():
            self._forged += 1
            return
        run_id, seq_text = head[0], head[1]
        payload = head[2].rsplit(" ", 1)[0] if " " in head[2] else ""
        mac = tail[1]
        if run_id != self._key.run_id:
            self._foreign += 1
            return
        seq = int(seq_text)
        if not payload or not hmac.compare_digest(self._key.sign(seq, payload), mac):
            self._forged += 1
            return
        try:
            body = json.loads(payload)
        except (ValueError, RecursionError):
            body = None
        if not isinstance(body, dict):
            self._problems.append(f"record {seq} is signed but unreadable")
            return
        if seq in self._seen:
            what = "arrived twice" if self._seen[seq] == line else "arrived twice, changed"
            self._problems.append(f"record {seq} {what}: the results stream was replayed")
            return
        self._seen[seq] = line
        if seq != self._next_seq:
            self._problems.append(
                f"record {seq} arrived where record {self._next_seq} was expected: records "
                "were lost, reordered or replayed"
            )
        self._next_seq = max(self._next_seq, seq + 1)
        self._record(seq, body)

    def _record(self, seq: int, body: dict[str, Any]) -> None:
        kind = body.get("type")
        if self._completed:
            self._problems.append(f"record {seq} arrived after the completion record")
            return
        if kind == "start":
            if self._started or seq != 0:
                self._problems.append(f"record {seq} is a second start record")
            self._started = True
            return
        if not self._started:
            self._problems.append(f"record {seq} arrived before the start record")
        handler: Callable[[int, dict[str, Any]], None] | None = {
            "test": self._test,
            "end": self._end,
        }.get(str(kind))
        if handler is None:
            self._problems.append(f"record {seq} has an unknown type {kind!r}")
            return
        handler(seq, body)

    def _test(self, seq: int, body: dict[str, Any]) -> None:
        test_id, outcome = body.get("id"), body.get("outcome")
        if not isinstance(test_id, str) or outcome not in _OUTCOMES:
            self._problems.append(f"record {seq} is a test result without an id or outcome")
            return
        self._test_records += 1
        message = body.get("message")
        result = TestResult(test_id, _outcome(str(outcome)), str(message or ""))
        seen = self._results.get(test_id)
        if seen is not None and seen.outcome != result.outcome:
            self._problems.append(
                f"{test_id} was reported both {seen.outcome} and {result.outcome}: "
                "conflicting results for one test"
            )
        if seen is None or _SEVERITY[result.outcome] > _SEVERITY[seen.outcome]:
            self._results[test_id] = result

    def _end(self, seq: int, body: dict[str, Any]) -> None:
        status, counts = body.get("status"), body.get("counts")
        if not isinstance(status, int) or not isinstance(counts, dict):
            self._problems.append(f"record {seq} is a completion record without a status")
            return
        self._completed = True
        self._status = status
        self._counts = {k: int(v) for k, v in counts.items() if isinstance(v, int)}
        error = body.get("error")
        self._end_error = str(error) if error else ""


def _outcome(value: str) -> Outcome:
    if value == "passed":
        return "passed"
    if value == "failed":
        return "failed"
    if value == "error":
        return "error"
    return "skipped"


def _lines(count: int) -> str:
    return "1 line" if count == 1 else f"{count} lines"


def strip_records(text: str) -> str:
    """`text` without record lines, for the output people and the model read."""
    return _RECORD_TEXT.sub("", text)


class RecordFilter:
    """Passes streamed output through to `sink` with record lines taken out.

    Text from a record's first byte is held back until its newline shows whether it is one.
    """

    def __init__(self, sink: Callable[[str], None]) -> None:
        self._sink = sink
        self._held = ""

    def __call__(self, text: str) -> None:
        data = self._held + text
        self._held = ""
        out: list[str] = []
        while data:
            at = data.find("\x1e")
            if at < 0:
                out.append(data)
                break
            out.append(data[:at])
            data = data[at:]
            end = data.find("\n")
            if end < 0:
                partial = data[: len(_MAGIC_TEXT)]
                if len(data) > MAX_RECORD_BYTES or not _MAGIC_TEXT.startswith(partial):
                    out.append(data)
                else:
                    self._held = data
                break
            line, data = data[: end + 1], data[end + 1 :]
            if not line.startswith(_MAGIC_TEXT):
                out.append(line)
        shown = "".join(out)
        if shown:
            self._sink(shown)

    def flush(self) -> None:
        held, self._held = self._held, ""
        if held and not held.startswith(_MAGIC_TEXT):
            self._sink(held)
