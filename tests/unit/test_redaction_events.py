import json

import pytest

from loopwright.events import Event, EventBus, EventList, NdjsonWriter
from loopwright.redaction import MASK, Redactor


@pytest.mark.parametrize(
    "token",
    [
        "ghs_CANARYabcdefghijklmnop",
        "ghp_abcdefghijklmnopqrstuvwxyz0123",
        "github_pat_11ABCDEFG_abcdefghijklmnop",
        "sk-CANARY-abcdefghijklmnop",
        "gho_abcdefghijklmnop",
    ],
)
def test_token_shaped_strings_are_masked(token):
    assert Redactor().text(f"token={token} end") == f"token={MASK} end"


def test_configured_secrets_are_masked_anywhere_in_nested_data():
    redactor = Redactor(["hunter2-secret"])
    data = {"a": ["x hunter2-secret y", {"b": "hunter2-secret"}], "n": 3}
    assert redactor.data(data) == {"a": [f"x {MASK} y", {"b": MASK}], "n": 3}


def test_ordinary_text_is_untouched():
    text = "skip this test; ghost_town; task-1"
    assert Redactor().text(text) == text


def test_bus_numbers_redacts_and_writes_ndjson(tmp_path):
    sink = EventList()
    path = tmp_path / "events.ndjson"
    writer = NdjsonWriter(path)
    bus = EventBus("m1", [sink, writer], Redactor(["s3cr3t-value"]), clock=lambda: 100.0)
    bus.enter("prepare")
    bus.emit("tool_result", output="leaked s3cr3t-value and ghs_abcdefghijklmnop", status="ok")
    writer.close()
    assert [e.seq for e in sink.events] == [1, 2]
    assert sink.events[0].stage == "prepare" and sink.events[1].stage == "prepare"
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert lines[1]["output"] == f"leaked {MASK} and {MASK}"
    assert set(lines[1]) >= {"seq", "ts", "mission", "type", "stage", "status"}
    assert Event.from_dict(lines[1]) == sink.events[1]
