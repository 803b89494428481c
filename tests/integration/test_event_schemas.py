"""A real scripted mission's events, as `--events` writes them, against the published schemas."""

from __future__ import annotations

import jsonschema

from loopwright.events import event_schemas
from tests.conftest import step, tool
from tests.integration.test_fix_cli import EDIT, FINISH, model_env

PLAN_ITEMS = [
    {"step": "reproduce the failing discount tests", "status": "done"},
    {"step": "fix line_total's percentage discount", "status": "in_progress"},
    {"step": "run the whole suite", "status": "pending"},
]
LEGIBLE_MISSION = [
    step(tool("update_plan", items=PLAN_ITEMS)),
    step(tool("read_file", path="tests/test_totals.py", start_line=1, end_line=40)),
    step(tool("read_file", path="invoice/totals.py")),
    step(EDIT),
    step(tool("run_command", command="python -m pytest -q")),
    step({"name": "read_file", "arguments": '{"path": "invoice/'}),
    step(FINISH),
]
"""Every tool the model has, a read with a line range and a call whose JSON does not parse."""


def test_every_event_of_a_real_mission_matches_its_schema(example_repo, scripted, run_cli):
    repo = example_repo("python-invoice")
    run = run_cli("fix", str(repo), "--sandbox", "local", env=model_env(scripted(LEGIBLE_MISSION)))
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
