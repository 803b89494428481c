"""The capped-output buffer both sandbox backends keep command output in."""

from __future__ import annotations

from loopwright.sandbox.output import CappedOutput


def test_output_under_the_cap_is_kept_whole() -> None:
    out = CappedOutput(10)
    assert out.add(b"abc") == b"abc"
    assert out.add(b"defg") == b"de"
    assert out.text() == "abcdefg" and not out.truncated


def test_the_head_and_tail_survive_around_one_marker() -> None:
    out = CappedOutput(10)
    for chunk in (b"HEAD-", b"middle" * 10, b"-TAIL"):
        out.add(chunk)
    assert out.truncated and out.dropped == 5 + 60 + 5 - 10
    assert out.text() == "HEAD-\n[... 60 bytes of output omitted ...]\n-TAIL"


def test_only_the_head_is_returned_for_streaming() -> None:
    out = CappedOutput(4)
    assert out.add(b"abcdef") == b"ab"
    assert out.add(b"gh") == b""
    assert out.text() == "ab\n[... 4 bytes of output omitted ...]\ngh"


def test_a_character_split_between_head_and_tail_decodes_when_nothing_is_dropped() -> None:
    out = CappedOutput(4)
    out.add("aé".encode())  # the two bytes of "é" straddle the head's end
    out.add(b"b")
    assert out.text() == "aéb" and not out.truncated


def test_a_zero_cap_keeps_nothing_but_the_count() -> None:
    out = CappedOutput(0)
    assert out.add(b"abc") == b""
    assert out.text() == "\n[... 3 bytes of output omitted ...]\n" and out.truncated
