"""Independent attempts (LOOPWRIGHT_ATTEMPTS): the cheapest tier samples K short attempts,
the first whose patch passes the tests in the loop's sandbox goes to verification, and the
workspace starts from the base tree each time."""

from __future__ import annotations

from tests.conftest import step, tool
from tests.scenarios import EDIT, FINISH, FIX_OLD, PLAN, model_env

WRONG = tool(
    "edit_file",
    path="invoice/totals.py",
    old=FIX_OLD,
    new="    discounted = gross  # discounts ignored\n",
)
NOTE = tool("write_file", path="invoice/NOTES.md", content="first attempt was here\n")
TESTS = tool("run_command", command="python -m pytest -q")


def test_a_failed_attempt_is_undone_and_the_next_one_is_verified(example_repo, scripted, run_cli):
    repo = example_repo("python-invoice")
    server = scripted(
        [
            # attempt 1 on nano: a wrong edit and a stray file, then finish
            step(PLAN),
            step(WRONG),
            step(NOTE),
            step(FINISH),
            # attempt 2 on nano, from the base tree again: the right edit
            step(EDIT),
            step(TESTS),
            step(FINISH),
        ]
    )
    env = model_env(server, LOOPWRIGHT_ATTEMPTS="nano=3", LOOPWRIGHT_ATTEMPT_STEPS="6")
    run = run_cli("fix", str(repo), "--sandbox", "local", env=env)

    assert run.exit_code == 0, run.stderr
    assert run.result["status"] == "verified"
    assert "NOTES.md" not in run.result["patch"]
    assert "discounts ignored" not in run.result["patch"]
    assert run.result["final_tier"] == "nano"
    attempts = [(e["attempt"], e["status"]) for e in run.of_type("attempt")]
    assert attempts == [(1, "started"), (1, "failed"), (2, "started"), (2, "passed")]
    failed = run.of_type("attempt")[1]
    assert "tests still fail" in failed["reason"] and failed["steps"] == 4
    assert [(a["attempt"], a["passed"]) for a in run.result["attempts"]] == [(1, False), (2, True)]
    # Each attempt samples with its own seed and a temperature, on nano only.
    assert [(r["seed"], r["temperature"]) for r in server.requests] == [(1, 0.7)] * 4 + [
        (2, 0.7)
    ] * 3
    assert {r["model"] for r in server.requests} == {"model-nano"}
    # The second attempt's first request is a fresh conversation, not the first's history.
    assert len(server.requests[4]["messages"]) == len(server.requests[0]["messages"])
    # One plan stage and one loop stage for the whole mission, as without attempts.
    stages = [(e["stage"], e["status"]) for e in run.of_type("stage")]
    assert [s for s in stages if s[0] in ("plan", "loop")] == [
        ("plan", "started"),
        ("plan", "done"),
        ("loop", "started"),
        ("loop", "finished"),
    ]
    assert "attempt 1/3 on nano" in run.stderr and "attempt 2/3 on nano" in run.stderr


def test_when_every_attempt_fails_the_mission_escalates_with_a_fresh_loop(
    example_repo, scripted, run_cli
):
    repo = example_repo("python-invoice")
    server = scripted(
        [
            step(WRONG),
            step(FINISH),  # attempt 1 fails its tests
            step(PLAN),
            step(PLAN),  # attempt 2 runs out of its two steps
            step(EDIT),  # the ordinary loop on super
            step(TESTS),
            step(FINISH),
        ]
    )
    env = model_env(server, LOOPWRIGHT_ATTEMPTS="nano=2", LOOPWRIGHT_ATTEMPT_STEPS="2")
    run = run_cli("fix", str(repo), "--sandbox", "local", env=env)

    assert run.exit_code == 0, run.stderr
    assert run.result["status"] == "verified"
    assert [r["model"] for r in server.requests] == ["model-nano"] * 4 + ["model-super"] * 3
    assert "seed" not in server.requests[4] and "temperature" not in server.requests[4]
    statuses = [(e["attempt"], e["status"]) for e in run.of_type("attempt")]
    assert statuses == [(1, "started"), (1, "failed"), (2, "started"), (2, "failed")]
    assert "step limit" in run.of_type("attempt")[3]["reason"]
    assert run.result["final_tier"] == "super"
    assert "discounts ignored" not in run.result["patch"]


def test_an_unknown_tier_in_the_attempts_setting_is_a_usage_error(example_repo, scripted, run_cli):
    repo = example_repo("python-invoice")
    server = scripted([])
    run = run_cli(
        "fix", str(repo), "--sandbox", "local", env=model_env(server, LOOPWRIGHT_ATTEMPTS="mini=3")
    )
    assert run.exit_code == 2
    assert "LOOPWRIGHT_ATTEMPTS names tier 'mini'" in run.stderr
    assert server.requests == []
