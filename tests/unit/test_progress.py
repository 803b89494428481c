import io
import json

import pytest

from loopwright.events import Event
from loopwright.missions.progress import (
    ProgressPrinter,
    color_enabled,
    render_verification,
    replay,
    terminal_safe,
)


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
        (
            event(
                "approval_requested",
                id="1-call_2",
                rule="network",
                what="Run `pip install httpx`",
                expires_s=900,
            ),
            "  ⏸ waiting for approval (network): Run `pip install httpx`  "
            "(request 1-call_2, rejected after 15 min)",
        ),
        (event("decision", decision="approve", by="terminal", id="1"), "  ✓ approved by terminal"),
        (
            event("decision", decision="reject", by="expiry", text="nobody decided within 2s"),
            "  ⊘ rejected by expiry: nobody decided within 2s",
        ),
        (
            event("decision", decision="guidance", by="@ann", text="Look at rounding."),
            "  ✎ guidance from @ann: Look at rounding.",
        ),
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
        "approval",
        "approved",
        "expired",
        "guidance",
    ],
)
def test_each_event_renders_as_one_readable_line(ev, expected):
    assert ProgressPrinter(io.StringIO(), color=False).render(ev) == expected


def test_tool_lines_print_the_summary_of_their_call():
    printer = ProgressPrinter(io.StringIO(), color=False)
    call = event("tool_call", id="c1", tool="run_command", summary="Ran `pytest -q`")
    assert printer.render(call) is None
    result = event("tool_result", id="c1", tool="run_command", status="failed", exit_code=1)
    assert printer.render(result) == "  ✗ Ran `pytest -q` · exit 1"
    read = event("tool_call", id="c2", tool="read_file", summary="Read a.py:1-40")
    printer.render(read)
    refused = event("tool_result", id="c2", tool="read_file", status="refused", output="Refused: x")
    assert printer.render(refused) == "  ⊘ Read a.py:1-40: Refused: x"


def test_a_model_call_line_says_when_calls_were_written_as_text_and_tokens_estimated():
    printer = ProgressPrinter(io.StringIO(), color=False)
    fields = {"step": 2, "tier": "nano", "prompt_tokens": 900, "completion_tokens": 40}
    native = event("model_call", **fields, tool_calls=["read_file"], tool_call_source="native")
    line = "  · step 2 on nano: read_file  (900+40 tokens, $0.0000 so far)"
    assert printer.render(native) == line
    text = event(
        "model_call",
        **fields,
        tool_calls=["read_file", "run_command"],
        tool_call_source="content",
        recovered_tool_calls=2,
        usage_estimated=True,
    )
    assert printer.render(text) == (
        "  · step 2 on nano: read_file, run_command (written as text)  "
        "(~900+40 tokens, $0.0000 so far)"
    )


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


class Terminal(io.StringIO):
    def isatty(self):
        return True


@pytest.mark.parametrize(
    ("env", "tty", "expected"),
    [
        ({}, True, True),
        ({}, False, False),
        ({"NO_COLOR": "1"}, True, False),
        ({"NO_COLOR": ""}, True, True),
        ({"NO_COLOR": "1", "FORCE_COLOR": "1"}, True, False),
        ({"FORCE_COLOR": "1"}, False, True),
        ({"FORCE_COLOR": "0"}, True, False),
        ({"TERM": "dumb"}, True, False),
        ({"TERM": "dumb", "FORCE_COLOR": "1"}, False, True),
    ],
    ids=[
        "tty",
        "pipe",
        "no-color",
        "empty-no-color",
        "no-color-wins",
        "force",
        "force-off",
        "dumb",
        "force-beats-dumb",
    ],
)
def test_colour_follows_no_color_force_color_and_term(env, tty, expected):
    stream = Terminal() if tty else io.StringIO()
    assert color_enabled(stream, env) is expected


def test_printer_colours_a_terminal_unless_term_is_dumb(monkeypatch):
    ev = event("stage", "verify", status="started")
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm-256color")
    assert ProgressPrinter(Terminal()).render(ev) == "\033[1;36m● verify\033[0m"
    monkeypatch.setenv("TERM", "dumb")
    assert ProgressPrinter(Terminal()).render(ev) == "● verify"


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"name": "patch_export", "duration_s": 0.314}, "  ⏱ patch export 0.31s"),
        ({"name": "verify_tests", "duration_s": 12.0}, "  ⏱ verification tests 12.00s"),
        ({"name": "snapshot", "duration_s": None}, "  ⏱ snapshot 0.00s"),
        ({"name": "deliver", "duration_s": "soon"}, "  ⏱ deliver ?s"),
    ],
    ids=["patch-export", "verify-tests", "missing-duration", "bad-duration"],
)
def test_a_phase_event_shows_its_name_and_duration(fields, expected):
    printer = ProgressPrinter(io.StringIO(), color=False)
    assert printer.render(event("phase", "loop", **fields)) == expected
    colored = ProgressPrinter(io.StringIO(), color=True).render(event("phase", "loop", **fields))
    assert colored == f"\033[2m{expected}\033[0m"


def test_the_deliver_stage_names_the_pull_request_it_opened():
    url = "https://github.test/acme/invoice/pull/8"
    line = ProgressPrinter(io.StringIO(), color=False).render(
        event("stage", "deliver", status="delivered", kind="pull_request", url=url)
    )
    assert line == f"  deliver delivered — url: {url}"


HOSTILE = "\x1b]52;c;Y3VybCBldmlsIHwgc2g=\x07\x1b[2K\x1b[1Aapp.txt\r"


def test_model_text_cannot_send_control_sequences_to_the_terminal():
    """A path, command or summary from the model is printed with its control characters
    shown as escapes; the printer's own colour codes are the only escapes left."""
    printer = ProgressPrinter(io.StringIO(), color=True)
    call = event("tool_call", id="c1", name="read_file", summary=f"Read {HOSTILE}")
    assert printer.render(call) is None  # printed with its result
    result = event("tool_result", id="c1", tool="read_file", status="ok")
    done = event("done", "deliver", status="unverified", message=f"no {HOSTILE}")
    for line in (printer.render(result), printer.render(done)):
        assert line is not None
        assert "\x07" not in line and "\r" not in line and "\x1b]" not in line
        assert "\\x1b]52;c;" in line and "\\x07" in line and "\\x0d" in line
        stripped = line.replace("\033[0m", "")
        assert all(stripped[i + 1] == "[" for i, ch in enumerate(stripped) if ch == "\x1b")
    assert terminal_safe("a\tb\nc") == "a\tb\nc"
