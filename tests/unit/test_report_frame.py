"""The report printed back after the suite: the shell trailer, the frame found in raw output
in any chunking, and the filters that keep frames out of what people read."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from loopwright.verify.report_frame import (
    INLINE_MAX_BYTES,
    FrameFilter,
    ReportFrame,
    strip_frames,
    trailer,
)

FRAME = "0123456789abcdef"
JUNIT = '<?xml version="1.0"?><testsuites><testsuite name="t" tests="1"/></testsuites>\n'


def run_trailer(tmp_path: Path, report: bytes | None, *, symlink: bool = False) -> bytes:
    (tmp_path / ".loopwright").mkdir(exist_ok=True)
    path = tmp_path / ".loopwright" / "report"
    if symlink:
        (tmp_path / "elsewhere.xml").write_bytes(report or b"")
        path.symlink_to(tmp_path / "elsewhere.xml")
    elif report is not None:
        path.write_bytes(report)
    done = subprocess.run(
        ["bash", "-c", "echo test output; " + trailer(FRAME, ".loopwright/report")],
        cwd=tmp_path,
        capture_output=True,
        check=True,
    )
    return done.stdout


def parse(raw: bytes, chunk: int) -> tuple[str, str | None] | None:
    frame = ReportFrame(FRAME)
    for at in range(0, len(raw), chunk):
        frame.feed(raw[at : at + chunk])
    return frame.result()


@pytest.mark.parametrize("chunk", [1, 7, 4096])
def test_a_report_comes_back_inline_in_any_chunking(tmp_path: Path, chunk: int) -> None:
    raw = run_trailer(tmp_path, JUNIT.encode())
    assert parse(raw, chunk) == ("inline", JUNIT)
    assert strip_frames(raw.decode()) == "test output\n"


def test_no_report_says_none_and_a_large_or_linked_one_is_read_as_a_file(tmp_path: Path) -> None:
    assert parse(run_trailer(tmp_path, None), 64) == ("none", None)
    big = tmp_path / "big"
    big.mkdir()
    assert parse(run_trailer(big, b"x" * (INLINE_MAX_BYTES + 1)), 4096) == ("file", None)
    linked = tmp_path / "linked"
    linked.mkdir()
    assert parse(run_trailer(linked, JUNIT.encode(), symlink=True), 64) == ("file", None)


def test_the_last_frame_wins_and_other_ids_or_broken_frames_do_not_count(tmp_path: Path) -> None:
    ours = run_trailer(tmp_path, JUNIT.encode())
    forged = b"\n\x1dLOOPWRIGHT-REPORT " + FRAME.encode() + b" inline\nbm90IGl0\n"
    assert parse(forged + ours, 5) == ("inline", JUNIT)
    other = ours.replace(FRAME.encode(), b"fedcba9876543210")
    assert parse(other, 64) is None
    broken = b"\x1dLOOPWRIGHT-REPORT " + FRAME.encode() + b" inline\n***\n"
    assert parse(broken, 64) is None
    assert parse(b"no frame at all\n", 4) is None
    # a marker followed by more than any inline report: not a frame of ours
    assert parse(forged[:-9] + b"A" * (INLINE_MAX_BYTES * 3), 4096) is None


@pytest.mark.parametrize("chunk", [1, 3, 50, 10_000])
def test_the_filter_keeps_frames_out_of_streamed_output(tmp_path: Path, chunk: int) -> None:
    raw = run_trailer(tmp_path, JUNIT.encode()).decode()
    text = "before \x1d not a marker\n" + raw + "after\n"
    shown: list[str] = []
    filtered = FrameFilter(shown.append)
    for at in range(0, len(text), chunk):
        filtered(text[at : at + chunk])
    filtered.flush()
    assert "".join(shown) == "before \x1d not a marker\ntest output\n\nafter\n"
