"""Every event type has a typed model and a JSON Schema; the bus refuses what does not fit."""

from __future__ import annotations

import json
import time

import jsonschema
import pytest

from loopwright.agent.call_summary import describe_call
from loopwright.agent.tools import TOOLS
from loopwright.events import (
    EVENT_MODELS,
    EVENT_TYPES,
    EventBus,
    EventFieldsError,
    EventList,
    event_schemas,
)
from loopwright.redaction import Redactor


def test_every_event_type_has_a_model_and_a_valid_schema():
    schemas = event_schemas()
    assert set(EVENT_TYPES) == set(EVENT_MODELS) == set(schemas)
    for name, schema in schemas.items():
        jsonschema.Draft202012Validator.check_schema(schema)
        assert schema["properties"]["type"]["const"] == name
        assert {"seq", "ts", "mission", "type", "stage"} <= set(schema["required"])
        assert schema["additionalProperties"] is False


def test_phase_events_carry_a_known_name_and_a_duration():
    sink = EventList()
    bus = EventBus("m", [sink], Redactor())
    bus.emit("phase", "verify", name="patch_export", duration_s=0.042)
    schema = event_schemas()["phase"]
    jsonschema.validate(sink.events[0].to_dict(), schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**sink.events[0].to_dict(), "name": "coffee"}, schema)


@pytest.mark.parametrize(
    ("type_", "fields", "message"),
    [
        ("tool_call", {"id": "c1", "tool": "read_file"}, "arguments: Field required"),
        ("done", {"status": "verified", "colour": "green"}, "colour: Extra inputs"),
        ("phase", {"name": "coffee_break", "duration_s": 1.0}, "name: Input should be"),
        ("tool_result", {"id": "c1", "tool": "x", "status": "maybe"}, "status: Input should be"),
        ("mystery", {}, "unknown event type 'mystery'"),
    ],
    ids=["missing", "unknown-field", "bad-phase", "bad-status", "unknown-type"],
)
def test_the_bus_refuses_fields_that_do_not_match_the_model(type_, fields, message):
    sink = EventList()
    bus = EventBus("m", [sink], Redactor())
    with pytest.raises(EventFieldsError, match=message):
        bus.emit(type_, "loop", **fields)
    assert sink.events == []
    bus.emit("error", message="after a refused event the numbering has no gap")
    assert [e.seq for e in sink.events] == [1]


@pytest.mark.parametrize(
    ("tool", "arguments", "summary"),
    [
        (
            "read_file",
            {"path": "tests/test_totals.py", "start_line": 1, "end_line": 40},
            "Read tests/test_totals.py:1-40",
        ),
        ("read_file", {"path": "src/app.py"}, "Read src/app.py"),
        ("read_file", {"path": "src/app.py", "start_line": 30}, "Read src/app.py:30-end"),
        (
            "edit_file",
            {"path": "invoice/totals.py", "old": "a = 1\n", "new": "a = 2\n"},
            "Edited invoice/totals.py (+1 \u22121)",
        ),
        (
            "edit_file",
            {"path": "x.py", "old": "a\nb\n", "new": "a\nb\nc\nd\n"},
            "Edited x.py (+2 \u22120)",
        ),
        (
            "edit_file",
            {"path": "x.py", "old": "a\nb\n", "new": "b\na\n"},
            "Edited x.py (+1 \u22121)",
        ),
        (
            "write_file",
            {"path": "src/x.py", "content": "x = 1\n" * 12},
            "Wrote src/x.py (12 lines)",
        ),
        ("write_file", {"path": "one.txt", "content": "hi"}, "Wrote one.txt (1 line)"),
        ("run_command", {"command": "pytest -q"}, "Ran `pytest -q`"),
        ("run_command", {"command": "echo `date`\nls"}, "Ran `echo 'date' ls`"),
        (
            "update_plan",
            {"items": [{"step": s, "status": "pending"} for s in "abc"]},
            "Updated the plan (3 items)",
        ),
        ("update_plan", {"items": "nope"}, "Updated the plan (no items)"),
        ("finish", {"summary": "divide by 100"}, "Finished"),
        ("read_file", {}, "Read (no path)"),
        ("delete_everything", {"path": "."}, "Called the unknown tool `delete_everything`"),
    ],
    ids=lambda v: v if isinstance(v, str) and " " not in v else None,
)
def test_each_tool_call_is_summarised_in_words(tool, arguments, summary):
    described = describe_call(tool, json.dumps(arguments))
    assert described.summary == summary
    assert described.args == arguments
    assert described.args_error is None


def test_every_tool_has_a_summary_of_its_own():
    for name in TOOLS:
        assert not describe_call(name, "{}").summary.startswith("Called"), name


def test_arguments_that_do_not_parse_say_so():
    described = describe_call("read_file", '{"path": "a.py"')
    assert described.args == {}
    assert described.summary == "Called read_file with arguments that are not JSON"
    assert described.args_error and "position" in described.args_error
    listed = describe_call("run_command", "[1, 2]")
    assert (listed.args, listed.args_error) == ({}, "not an object")


def test_a_long_command_is_summarised_on_one_short_line():
    summary = describe_call("run_command", json.dumps({"command": "x" * 500})).summary
    assert len(summary) < 130 and summary.endswith("…`")


def _lines(make, count):
    return "".join(make(i) for i in range(count))


@pytest.mark.parametrize(
    ("old", "new", "counts"),
    [
        (  # half of 2,000 similar lines changed: difflib.ndiff never finished this
            _lines(lambda i: f"value_{i} = compute({i}, 'alpha')\n", 2000),
            _lines(
                lambda i: f"value_{i} = compute({i}, '{'beta' if i >= 1000 else 'alpha'}')\n", 2000
            ),
            "+1000 \u22121000",
        ),
        (  # every other line blank: costly to match in order, so matched regardless of it
            _lines(lambda i: f"total_{i} = {i}\n\n", 1000),
            _lines(lambda i: f"total_{i} = {i} * 2\n\n", 1000),
            "+1000 \u22121000",
        ),
        (  # a small change in a long file: the common start and end are set aside
            _lines(lambda i: f"row {i}\n", 100_000),
            _lines(lambda i: f"row {i}\n" if i != 50_000 else "row fifty thousand\n", 100_000),
            "+1 \u22121",
        ),
        (
            _lines(lambda i: f"a{i}\n", 20_000),
            _lines(lambda i: f"b{i}\n", 30_000),
            "+30000 \u221220000",
        ),
    ],
    ids=["similar-lines", "blank-lines", "long-file", "all-new"],
)
def test_a_large_edit_is_summarised_quickly_with_the_right_counts(old, new, counts):
    arguments = json.dumps({"path": "big.py", "old": old, "new": new})
    started = time.thread_time()  # this thread's CPU time: a busy machine cannot fail it
    summary = describe_call("edit_file", arguments).summary
    assert time.thread_time() - started < 1
    assert summary == f"Edited big.py ({counts})"
