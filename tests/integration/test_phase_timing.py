"""Phase events: every timed step of a mission reports its wall time, in order, in its stage.

On Docker the patch export must stay quick: it once waited 10 s on a resolver that stops
answering when the setup network is cut (see `SANDBOX_GIT` in loopwright/sandbox/workspace.py).
"""

from __future__ import annotations

from tests.conftest import step, tool
from tests.scenarios import CORRECT, model_env

EXPECTED = [
    ("snapshot", "prepare"),
    ("sandbox_start", "prepare"),
    ("reproduce", "prepare"),
    ("patch_export", "loop"),
    ("verify_sandbox", "verify"),
    ("verify_tests", "verify"),
    ("deliver", "deliver"),
]
EXPORT_BOUND_S = 2.0
"""Generous: the export takes about 0.3 s on a loaded machine, the stall took 10 s."""


def test_phases_arrive_in_order_with_durations(example_repo, scripted, run_cli, sandbox_kind):
    repo = example_repo("python-invoice")
    server = scripted(CORRECT)
    run = run_cli("fix", str(repo), "--sandbox", sandbox_kind, env=model_env(server))

    assert run.exit_code == 0, run.stderr
    phases = run.of_type("phase")
    assert [(e["name"], e["stage"]) for e in phases] == EXPECTED
    for event in phases:
        assert isinstance(event["duration_s"], float)
        assert 0 <= event["duration_s"] < 300
        assert event["duration_s"] == round(event["duration_s"], 3)
    # Each phase is reported when it ends: after the event that opens its stage, and the
    # phases together fit inside the mission's own elapsed time.
    seqs = {e["name"]: e["seq"] for e in phases}
    started = {e["stage"]: e["seq"] for e in run.of_type("stage") if e["status"] == "started"}
    assert started["loop"] < seqs["patch_export"] < started["verify"] < seqs["verify_tests"]
    assert sum(e["duration_s"] for e in phases) <= run.result["elapsed_s"]

    export = next(e for e in phases if e["name"] == "patch_export")
    assert export["duration_s"] < EXPORT_BOUND_S, export
    loop_done = next(
        e for e in run.of_type("stage") if e["stage"] == "loop" and e["status"] != "started"
    )
    verify_start = next(e for e in run.events if e["seq"] == started["verify"])
    assert verify_start["ts"] - loop_done["ts"] < EXPORT_BOUND_S


def test_setup_and_new_tests_are_timed_phases_of_their_stages(example_repo, scripted, run_cli):
    repo = example_repo("python-invoice")
    new_test = tool(
        "write_file",
        path="tests/test_discount_percent.py",
        content="from invoice.totals import Line, line_total\n\n\n"
        "def test_half_off():\n"
        "    assert line_total(Line('x', 100, 1, 50)) == 50\n",
    )
    server = scripted([*CORRECT[:3], step(new_test), *CORRECT[3:]])
    run = run_cli(
        "fix", str(repo), "--sandbox", "local", "--setup-cmd", "true", env=model_env(server)
    )

    assert run.exit_code == 0, run.stderr
    assert [(e["name"], e["stage"]) for e in run.of_type("phase")] == [
        ("snapshot", "prepare"),
        ("sandbox_start", "prepare"),
        ("setup", "prepare"),
        ("reproduce", "prepare"),
        ("patch_export", "loop"),
        ("verify_sandbox", "verify"),
        ("verify_setup", "verify"),
        ("verify_tests", "verify"),
        ("new_tests", "verify"),
        ("deliver", "deliver"),
    ]
    assert run.result["verification"]["new_tests"]["passed"] is True
