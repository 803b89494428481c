"""The claim a warm-pool container carries: what the reaper accepts from the claim file."""

from __future__ import annotations

import datetime
import json

import pytest

from loopwright.sandbox.claims import SandboxClaim

AT = datetime.datetime(2026, 12, 3, 6, 0, tzinfo=datetime.UTC)
CLAIM = SandboxClaim("c" * 64, "m1", "host:42:1234", AT)


def test_a_claim_round_trips_through_its_file_text() -> None:
    text = CLAIM.to_json()
    assert json.loads(text) == {
        "container": "c" * 64,
        "mission": "m1",
        "owner": "host:42:1234",
        "claimed_at": "2026-12-03T06:00:00+00:00",
    }
    assert SandboxClaim.from_json(text) == CLAIM
    assert SandboxClaim.from_json(text.encode() + b"\n") == CLAIM


@pytest.mark.parametrize(
    "text",
    [
        "",
        "not json",
        "[]",
        "null",
        '{"container": "c", "mission": "m1", "owner": "o"}',
        '{"container": "c", "mission": "", "owner": "o", "claimed_at": "2026-12-03T06:00Z"}',
        '{"container": "c", "mission": 7, "owner": "o", "claimed_at": "2026-12-03T06:00Z"}',
        '{"container": "c", "mission": "m", "owner": "o", "claimed_at": "yesterday"}',
        '{"container": "c", "mission": "m", "owner": "o", "claimed_at": "2026-12-03T06:00:00"}',
        '{"container": "c", "mission": "m", "owner": "o", "claimed_at": 5}',
    ],
    ids=[
        "empty",
        "not-json",
        "list",
        "null",
        "no-time",
        "empty-mission",
        "number-mission",
        "bad-time",
        "naive-time",
        "number-time",
    ],
)
def test_anything_but_a_whole_claim_is_no_claim(text: str) -> None:
    assert SandboxClaim.from_json(text) is None
