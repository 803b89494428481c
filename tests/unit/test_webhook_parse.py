"""A delivery's body is parsed by msgspec first and by `json.loads` when msgspec refuses it:
whatever the body, the payload and the reason for a refusal are the ones `json.loads`
alone gave."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from loopwright.app.params import json_problem
from loopwright.app.webhooks import _parse, _parse_with_json

FIXTURES = Path(__file__).parents[1] / "fixtures" / "webhooks"


def _json_loads_alone(body: bytes) -> tuple[Any, str | None]:
    """The reference: the body read by `json.loads` alone (`_parse_with_json`, the parse
    the webhook had before msgspec), then checked as `_parse` checks a payload."""
    payload, refused = _parse_with_json(body)
    if refused is not None:
        return None, refused
    problem = json_problem(payload, body)
    return payload, (f"the body is not a payload GitHub sends: {problem}" if problem else None)


def _nested(depth: int) -> bytes:
    return b'{"action": "completed", "x": ' + b"[" * depth + b"]" * depth + b"}"


DOCUMENTS: dict[str, bytes] = {
    **{f.name: f.read_bytes() for f in sorted(FIXTURES.glob("*.json"))},
    "ping": b'{"zen": "Keep it logically awesome.", "hook_id": 7}',
    "empty": b"",
    "blank": b" \t\r\n",
    "scalars": b'[null, true, false, 0, -0, -0.0, 1.0, 1E5, 1e-7, 1.5e-400, 1e32, "x"]',
    "a-string": b'"just text"',
    "duplicate-keys": b'{"action": "created", "action": "completed"}',
    "escapes": b'{"a": "\\/\\b\\f\\n\\r\\t\\"\\\\ \\u00e9 \\ud83d\\ude00"}',
    "raw-utf8": '{"a": "é ✓ 😀 \u2028"}'.encode(),
    "largest-float": b'{"a": 1.7976931348623157e308}',
    "past-the-largest-float": b'{"a": 1e400}',
    "nan": b'{"a": NaN}',
    "infinity": b'{"a": Infinity, "b": -Infinity}',
    "lone-high-surrogate": b'{"action": "\\ud800"}',
    "lone-low-surrogate": b'{"action": "\\udfff"}',
    "reversed-pair": b'{"action": "\\udd1e\\ud834"}',
    "surrogate-in-a-key": b'{"\\udbff": 1}',
    "nul-escape": b'{"action": "comp\\u0000leted"}',
    "2-to-the-64": b'{"id": 18446744073709551616}',
    "below-int64": b'{"id": -9223372036854775809}',
    "int64-max": b'{"id": 9223372036854775807}',
    # Integers past 64 bits that msgspec before 0.19 read as other integers below 2**64.
    "2-to-the-64-plus-10-to-the-18-plus-1": b'{"id": %d}' % (2**64 + 10**18 + 1),
    "twenty-nines": b'{"installation": {"id": 19999999999999999999}}',
    "5000-digits": b'{"action": 1' + b"0" * 5000 + b"}",
    "invalid-utf8": b'{"action": "\xff\xfe completed"}',
    "utf8-encoded-surrogate": b'{"action": "\xed\xa0\x80"}',
    "overlong-utf8": b'{"action": "\xc0\x80"}',
    "past-unicode": b'{"action": "\xf4\x90\x80\x80"}',
    "utf16": '{"action": "completed"}'.encode("utf-16"),
    "bom": b'\xef\xbb\xbf{"action": "completed"}',
    "raw-control-character": b'{"action": "comp\x01leted"}',
    "raw-tab": b'{"action": "comp\tleted"}',
    "raw-nul": b'{"action": "comp\x00leted"}',
    "trailing-comma": b'{"a": [1, 2,]}',
    "trailing-data": b'{"a": 1} {"b": 2}',
    "leading-zero": b'{"a": 01}',
    "single-quotes": b"{'a': 1}",
    "bare-key": b"{a: 1}",
    "half-a-number": b'{"a": 1e}',
    "truncated": b'{"action": "compl',
    "64-levels": _nested(63),
    "65-levels": _nested(64),
    "998-levels": b"[" * 998 + b"]" * 998,
    "1000-levels": b"[" * 1000 + b"]" * 1000,
    "100k-brackets": b"[" * 100_000,
    "100k-deep-in-an-object": _nested(100_000),
}


@pytest.mark.parametrize("name", list(DOCUMENTS))
def test_a_body_is_read_as_json_loads_alone_read_it(name: str) -> None:
    body = DOCUMENTS[name]
    payload, problem = _parse(body)
    expected_payload, expected_problem = _json_loads_alone(body)
    assert problem == expected_problem
    # repr tells 1 from 1.0 and True, -0.0 from 0.0, and compares NaN with NaN.
    assert repr(payload) == repr(expected_payload)


def test_the_cases_cover_both_parsers_and_both_outcomes() -> None:
    """The corpus has bodies that are taken and bodies that are refused, among them ones
    only `json.loads` takes (read again after msgspec refused them) and a red check."""
    outcomes = {name: _json_loads_alone(body)[1] is None for name, body in DOCUMENTS.items()}
    assert outcomes["check_run.completed.timed_out.json"] and outcomes["nan"]
    assert outcomes["infinity"] and outcomes["past-the-largest-float"]
    assert not outcomes["lone-high-surrogate"] and not outcomes["5000-digits"]
    assert sum(outcomes.values()) >= 15 and len(outcomes) - sum(outcomes.values()) >= 20
