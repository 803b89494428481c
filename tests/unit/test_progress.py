import io
import json

import pytest

from loopwright.events import Event
from loopwright.progress import ProgressPrinter, render_verification, replay


def event(type_, stage="loop", **fields):
    return Event(seq=1, ts=0.0, mission="m", type=type_, stage=stage, fields=fields)


@pytest.mark.parametrize(
    ("ev", "expected"),
    [
        (event("stage", "verify", status="started"), "● verify"),
        (
            event("stage", "prepare", status="detected", test_command="npm test", reason="found"),
            "  test command: npm test  (found)",
        ),
        (
            event("tool_result", tool="run_command", status="failed", exit_code=1),
            "  ✗ run_command exit 1",
        ),
        (
            event("tool_result", tool="run_command", status="refused", output="Refused (kill): no"),
            "  ⊘ run_command: Refused (kill): no",
        ),
        (
            event("escalation", from_tier="nano", to_tier="super", reason="3 failures"),
            "  ⇧ escalated nano → super: 3 failures",
        ),
        (
            event("screenshot", path="/x/s.png", http_status=200),
            "  screenshot: /x/s.png (HTTP 200)",
        ),
        (
            event("screenshot", path=None, reason="the app did not open port 3000"),
            "  no screenshot: the app did not open port 3000",
        ),
        (event("plan", items=[{"step": "read", "status": "done"}]), "  [x] read"),
        (event("tool_call", tool="read_file"), None),
    ],
    ids=[
        "stage",
        "detected",
        "failed",
        "refused",
        "escalation",
        "shot",
        "no-shot",
        "plan",
        "quiet",
    ],
)
def test_each_event_renders_as_one_readable_line(ev, expected):
    assert ProgressPrinter(io.StringIO(), color=False).render(ev) == expected


def test_verification_table_lists_rows_reasons_and_tamper():
    text = render_verification(
        {
            "rows": [{"id": "t::a", "before": "failed", "after": "passed", "status": "fixed"}],
            "commands": [{"phase": "after", "command": "pytest", "exit_code": 0}],
            "tamper": [{"path": "tests/t.py", "detail": "added skip"}],
            "reasons": ["tests/t.py: added skip"],
        }
    )
    assert "t::a" in text and "fixed" in text
    assert "after: `pytest` exited 0" in text
    assert "tamper: tests/t.py: added skip" in text
    assert "why not verified: tests/t.py: added skip" in text


def test_replay_renders_a_saved_log_and_names_a_bad_line():
    good = json.dumps(
        {"seq": 1, "ts": 1.0, "mission": "m", "type": "stage", "stage": "plan", "status": "started"}
    )
    out = io.StringIO()
    assert replay([good, ""], ProgressPrinter(out, color=False)) == 1
    assert "● plan" in out.getvalue()
    with pytest.raises(ValueError, match="line 2"):
        replay([good, "{not json"], ProgressPrinter(io.StringIO(), color=False))


def test_the_deliver_stage_names_the_pull_request_it_opened():
    url = "https://github.test/acme/invoice/pull/8"
    line = ProgressPrinter(io.StringIO(), color=False).render(
        event("stage", "deliver", status="delivered", kind="pull_request", url=url)
    )
    assert line == f"  deliver delivered — url: {url}"
