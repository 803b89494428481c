"""The fix-rate benchmark's own logic on one corpus task, with the scripted model server:
judging by the hidden tests, false-verified counting, the table, the time budget, Ctrl-C."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import fix_rate
from benchmarks.corpus.tasks import load_tasks
from benchmarks.fix_rate import (
    Limits,
    Run,
    fresh_copy,
    judge,
    render,
    run_benchmark,
    totals,
    tree_patch,
)
from loopwright.agent.scripted import ScriptedModelServer
from loopwright.agent.scripted_steps import parse_steps
from tests.conftest import step, tool

CODE, TEST = "pager/paginator.py", "tests/test_paginator.py"
TASK = next(t for t in load_tasks() if t.id == "py-paginate")
BUGGY = "        return self.count // self.per_page\n"
TRUE_FIX = "        return -(-self.count // self.per_page)\n"
OVERFIT = "        return 3 if self.count == 25 else self.count // self.per_page\n"
"""Passes the visible tests (20 items: 2 pages, 25 items: 3) and no hidden one."""


def mission(new_line: str) -> list[dict[str, object]]:
    return [
        step(tool("read_file", path="pager/paginator.py")),
        step(tool("edit_file", path="pager/paginator.py", old=BUGGY, new=new_line)),
        step(tool("run_command", command="python -m pytest -q")),
        step(tool("finish", summary="page_count rounds up")),
    ]


def serve(steps: list[dict[str, object]], models: list[str]) -> ScriptedModelServer:
    return ScriptedModelServer(parse_steps(steps), models=models).start()


def patch_of(tmp_path: Path, edits: dict[str, tuple[str, str]]) -> str:
    """The `git diff` an agent leaves after these (old, new) replacements in a task copy."""
    tree = fresh_copy(TASK.repo, tmp_path / f"edit-{len(list(tmp_path.glob('edit-*')))}")
    for rel, (old, new) in edits.items():
        text = (tree / rel).read_text()
        assert old in text
        (tree / rel).write_text(text.replace(old, new))
    return tree_patch(tree)


def test_judging_credits_only_fixes_the_hidden_tests_accept(tmp_path: Path) -> None:
    for name, patch, expected in [
        ("fix", patch_of(tmp_path, {CODE: (BUGGY, TRUE_FIX)}), (True, True)),
        ("overfit", patch_of(tmp_path, {CODE: (BUGGY, OVERFIT)}), (True, False)),
        (
            "tests-edited",
            patch_of(tmp_path, {TEST: ("page_count == 3", "page_count == 2")}),
            (False, False),
        ),
        ("garbage", "--- a/nope.py\n+++ b/nope.py\n@@ -1 +1 @@\n-x\n+y\n", (False, False)),
    ]:
        scratch = tmp_path / name
        scratch.mkdir()
        visible, hidden, output = judge(TASK, patch, scratch)
        assert (visible, hidden) == expected, (name, output)


def interrupt(run: Run) -> None:
    raise KeyboardInterrupt


def test_false_verified_is_counted_after_escalation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """0.5b→1.5b, each model its own server behind the benchmark's router: the small model
    stalls, the larger one overfits the visible tests; verified, but the hidden tests fail.
    Ctrl-C after that first run keeps it and skips the rest."""
    monkeypatch.setenv("LOOPWRIGHT_DATA_DIR", str(tmp_path / "data"))
    stall = step(tool("run_command", command="false"))
    small = serve([stall] * 3, [fix_rate.MODELS["0.5b"]])
    large = serve(mission(OVERFIT), [fix_rate.MODELS["1.5b"]])
    try:
        report = run_benchmark(
            [TASK, TASK],
            ["0.5b+1.5b"],
            limits=Limits(max_steps=10, run_timeout_s=240, sandbox="local"),
            peers=False,
            external={"0.5b": small.base_url, "1.5b": large.base_url},
            progress=interrupt,
        )
    finally:
        small.stop()
        large.stop()

    assert report.interrupted
    [run] = report.runs
    assert (run.status, run.claimed, run.visible_ok, run.hidden_ok) == (
        "verified",
        True,
        True,
        False,
    )
    assert run.false_verified and "FAILED" in run.note
    assert (run.tier, run.attempts, run.steps) == ("q15b", 2, 3 + 4)
    assert run.uncached_tokens > 0 and run.completion_tokens > 0
    assert OVERFIT.strip() in run.patch

    honest = Run(task="py-paginate", agent="mini-swe-agent/text", config="0.5b", status="Submitted")
    honest.claimed, honest.visible_ok, honest.hidden_ok, honest.steps = True, True, True, 5
    report.runs.append(honest)
    rows = {(t["agent"], t["config"]): t for t in totals(report.runs)}
    ours = rows["loopwright", "0.5b+1.5b"]
    assert {k: ours[k] for k in ("tasks", "verified", "fixed", "false_verified", "steps")} == {
        "tasks": 1,
        "verified": 1,
        "fixed": 0,
        "false_verified": 1,
        "steps": 7,
    }
    assert (ours["attempts"], ours["tiers"]) == (2, "q15b")
    assert rows["mini-swe-agent/text", "0.5b"]["fixed"] == 1
    assert rows["mini-swe-agent/text", "0.5b"]["false_verified"] == 0
    table = render(report)
    assert "interrupted: the tables hold the runs that finished" in table
    assert "| py-paginate | loopwright | 0.5b+1.5b | verified | yes | no | **YES** |" in table
    assert "| loopwright | 0.5b+1.5b | 1 | 1 | 0 | 1 |" in table
    assert "| mini-swe-agent/text | 0.5b | 1 | 1 | 1 | 0 |" in table
    data = json.loads(json.dumps(report.to_dict()))
    assert [r["false_verified"] for r in data["runs"]] == [True, False]
    assert data["totals"][0]["false_verified"] == 1


def test_a_task_starts_only_when_its_runs_fit_the_budget() -> None:
    quick = Limits(max_steps=2, run_timeout_s=120, sandbox="local")
    starved = run_benchmark(
        [TASK],
        ["0.5b", "1.5b"],
        limits=quick,
        external={"0.5b": "http://127.0.0.1:9/v1", "1.5b": "http://127.0.0.1:9/v1"},
        budget_s=6 * 120 - 1,
    )
    assert fix_rate.runs_per_task(["0.5b", "1.5b"], peers=True) == 6
    assert fix_rate.runs_per_task(["0.5b", "1.5b"], True, ("mini-swe-agent/text",)) == 2
    assert fix_rate.runs_per_task(["0.5b", "0.5b+1.5b"], True, ("loopwright",)) == 2
    assert starved.runs == [] and starved.not_run == ["py-paginate"]
    assert "not run (time budget): py-paginate" in render(starved)


def test_prefix_reuse_is_the_share_of_the_previous_request_served_from_cache() -> None:
    def call(tier: str, prompt: int, cached: int, estimated: bool = False) -> dict[str, object]:
        return {
            "type": "model_call",
            "tier": tier,
            "prompt_tokens": prompt,
            "cached_tokens": cached,
            "usage_estimated": estimated,
        }

    events = [
        call("q05b", 2000, 0),
        call("q05b", 2500, 2000),  # the whole previous request reused
        call("q05b", 2600, 1250),  # half of it
        call("q05b", 3000, 0, estimated=True),  # a server that reported no usage: no share
        {"type": "attempt", "status": "started"},
        call("q05b", 2000, 1900),  # a fresh conversation: nothing to compare with
        call("q15b", 2100, 2000),  # another model's server: likewise
        call("q15b", 2200, 3000),  # more cached than the previous prompt counts as all of it
    ]
    assert fix_rate.prefix_reuse(events) == [1.0, 1250 / 2500, 1.0]
    assert fix_rate._prefix([1.0, 0.5, 1.0]) == "83.3% (min 50%), 2/3 >= 95%"
    assert fix_rate._prefix([]) == "-"


def test_pass_at_1_and_pass_at_k_per_tier_come_from_the_missions_attempts() -> None:
    def run(task: str, *passed: tuple[str, bool]) -> fix_rate.Run:
        log = [
            {"tier": tier, "attempt": i + 1, "passed": ok} for i, (tier, ok) in enumerate(passed)
        ]
        return fix_rate.Run(task, "loopwright", "0.5b", "verified", attempt_log=log)

    runs = [
        run("a", ("q05b", True)),  # first attempt passed
        run("b", ("q05b", False), ("q05b", False), ("q05b", True)),  # the third did
        run("c", ("q05b", False), ("q05b", False), ("q05b", False)),  # none did
        fix_rate.Run("d", "loopwright", "0.5b", "unverified"),  # no attempts configured
    ]
    [row] = fix_rate.pass_at_k(runs)
    assert (row["tier"], row["runs"], row["k"], row["pass_at_1"], row["pass_at_k"]) == (
        "q05b",
        3,
        3,
        1,
        2,
    )
    table = render(fix_rate.Report(runs=runs, wall_s=1.0))
    assert "| loopwright | 0.5b | q05b | 3 | 1 | 2 (K=3) |" in table
    assert "pass@1" not in render(fix_rate.Report(runs=runs[3:], wall_s=1.0))
