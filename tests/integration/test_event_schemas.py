"""A real scripted mission's events (`LEGIBLE_MISSION` in tests/conftest.py), as `--events`
writes them, against the published schemas."""

from __future__ import annotations

import jsonschema
import pytest

from loopwright.events import event_schemas

# One worker runs every test that shares the `legible_mission` run (see scripts/test.sh).
pytestmark = pytest.mark.xdist_group("legible_mission")


def test_every_event_of_a_real_mission_matches_its_schema(legible_mission):
    run = legible_mission
    assert run.exit_code == 0, run.stderr

    schemas = event_schemas()
    validators = {name: jsonschema.Draft202012Validator(s) for name, s in schemas.items()}
    for event in run.events:
        errors = [e.message for e in validators[event["type"]].iter_errors(event)]
        assert errors == [], (event["type"], errors)
    assert {"stage", "plan", "model_call", "tool_call", "tool_result", "verification", "done"} <= {
        e["type"] for e in run.events
    }

    calls = run.of_type("tool_call")
    assert [c["summary"] for c in calls] == [
        "Updated the plan (3 items)",
        "Read tests/test_totals.py:1-40",
        "Read invoice/totals.py",
        "Edited invoice/totals.py (+1 \u22121)",
        "Ran `python -m pytest -q`",
        "Called read_file with arguments that are not JSON",
        "Finished",
    ]
    assert calls[1]["args"] == {"path": "tests/test_totals.py", "start_line": 1, "end_line": 40}
    assert calls[1]["arguments"].startswith("{")  # the raw text stays for older readers
    assert calls[5]["args"] == {} and "position" in calls[5]["args_error"]

    # The terminal prints the same summaries, with each call's outcome.
    assert "  ✓ Read tests/test_totals.py:1-40\n" in run.stderr
    assert "  ✓ Edited invoice/totals.py (+1 \u22121)\n" in run.stderr
    assert "  ✓ Ran `python -m pytest -q` · exit 0\n" in run.stderr
    assert "  ! Called read_file with arguments that are not JSON: " in run.stderr
