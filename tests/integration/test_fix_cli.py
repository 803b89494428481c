"""`loopwright fix` end to end: the real CLI, a scripted model server over HTTP, a real sandbox."""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.conftest import RECORDINGS, git, step, tool
from tests.fakes.git_server import GitServer
from tests.scenarios import (
    CORRECT,
    EDIT,
    FINISH,
    FIX_NEW,
    FIX_OLD,
    PLAN,
    assert_one_deliver_then_done,
    model_env,
)


def test_correct_fix_is_verified_and_applied(
    example_repo, scripted, run_cli, sandbox_kind, tmp_path
):
    repo = example_repo("python-invoice")
    server = scripted(CORRECT)
    run = run_cli("fix", str(repo), "--sandbox", sandbox_kind, env=model_env(server))

    assert run.exit_code == 0, run.stderr
    assert run.result["status"] == "verified"
    assert FIX_NEW.strip() in run.result["patch"]
    assert run.result["applied"] is True
    assert FIX_NEW in (repo / "invoice/totals.py").read_text()
    assert git("status", "--porcelain", cwd=repo).strip() == "M invoice/totals.py"
    usage = run.result["usage"]["nano"]
    assert usage["calls"] == 5 and usage["prompt_tokens"] > 0
    rows = {r["id"]: r for r in run.result["verification"]["rows"]}
    assert rows["tests/test_totals.py::test_line_with_percentage_discount"]["status"] == "fixed"
    assert rows["tests/test_totals.py::test_line_without_discount"]["status"] == "ok"
    stages = [(e["stage"], e["status"]) for e in run.of_type("stage") if e["status"] != "detected"]
    assert [s for s, status in stages if status == "started"] == [
        "prepare",
        "plan",
        "loop",
        "verify",
        "deliver",
    ]
    assert run.of_type("done")[-1]["status"] == "verified"
    assert [e["seq"] for e in run.events] == list(range(1, len(run.events) + 1))
    assert run.result["exit_code"] == 0
    # the terminal ends with the mission id, the summary, a diffstat and the saved patch
    mission = run.result["mission"]
    saved = tmp_path / "data" / "missions" / mission / "patch.diff"
    assert saved.read_text() == run.result["patch"]
    tail = run.stderr[run.stderr.index("■ verified") :]
    assert f"  mission {mission}\n" in tail
    assert "  summary: discount_percent is a percentage; divide by 100\n" in tail
    assert "    invoice/totals.py | 2 +-\n" in tail
    assert "    1 file changed, 1 insertion(+), 1 deletion(-)\n" in tail
    assert f"  patch: {saved} (applied to {repo})\n" in tail
    assert "HTTP Request" not in run.stderr  # library logs appear only with -v
    assert_one_deliver_then_done(run.events, "applied")


def test_model_claiming_success_without_fixing_is_not_verified(
    example_repo, scripted, run_cli, sandbox_kind
):
    repo = example_repo("python-invoice")
    server = scripted([step(PLAN), step(FINISH)])
    run = run_cli("fix", str(repo), "--sandbox", sandbox_kind, env=model_env(server))

    assert run.exit_code == run.result["exit_code"] == 1
    assert run.result["status"] == "unverified"
    assert "no changes" in run.result["message"]
    assert "  no patch: the mission changed nothing" in run.stderr
    assert git("status", "--porcelain", cwd=repo) == ""


def test_stubborn_model_escalates_through_tiers(example_repo, scripted, run_cli):
    repo = example_repo("python-invoice")
    failing = step(tool("run_command", command="python -m pytest -q"))
    server = scripted([step(PLAN), failing, failing, failing, failing, step(EDIT), step(FINISH)])
    run = run_cli(
        "fix",
        str(repo),
        "--sandbox",
        "local",
        env=model_env(server, LOOPWRIGHT_ESCALATE_AFTER="2"),
    )

    assert run.exit_code == 0, run.stderr
    models = [r["model"] for r in server.requests]
    assert models == ["model-nano"] * 3 + ["model-super"] * 2 + ["model-ultra"] * 2
    escalations = run.of_type("escalation")
    assert [(e["from_tier"], e["to_tier"]) for e in escalations] == [
        ("nano", "super"),
        ("super", "ultra"),
    ]
    assert run.result["final_tier"] == "ultra"
    assert set(run.result["usage"]) == {"nano", "super", "ultra"}


def test_refusals_and_unknown_tools_are_observations(example_repo, scripted, run_cli):
    repo = example_repo("python-invoice")
    server = scripted(
        [
            step(PLAN),
            step(tool("run_command", command="python -m http.server 8000")),
            step(tool("run_command", command="bash -c 'sleep 100 &'")),
            step(tool("delete_everything", path=".")),
            step({"name": "read_file", "arguments": "{not json"}),
            step(tool("read_file", path="../../etc/passwd")),
            step(tool("write_file", path=".github/workflows/ci.yml", content="on: push")),
            step(EDIT),
            step(FINISH),
        ]
    )
    run = run_cli("fix", str(repo), "--sandbox", "local", env=model_env(server))

    assert run.exit_code == 0, run.stderr
    statuses = [(e["tool"], e["status"]) for e in run.of_type("tool_result")]
    assert statuses[1:7] == [
        ("run_command", "refused"),
        ("run_command", "refused"),
        ("delete_everything", "error"),
        ("read_file", "error"),
        ("read_file", "refused"),
        ("write_file", "refused"),
    ]
    # the model saw each refusal as a tool message it can act on
    tool_messages = [m for m in server.requests[-1]["messages"] if m["role"] == "tool"]
    texts = " ".join(m["content"] for m in tool_messages)
    assert "verification boots the app" in texts
    assert "Unknown tool 'delete_everything'" in texts
    assert "not valid JSON" in texts
    assert not (repo / ".github").exists()


def test_model_that_never_finishes_hits_the_step_cap(example_repo, scripted, run_cli):
    repo = example_repo("python-invoice")
    server = scripted([step(tool("run_command", command="true"), repeat=True)])
    run = run_cli(
        "fix", str(repo), "--sandbox", "local", env=model_env(server, LOOPWRIGHT_MAX_STEPS="6")
    )

    assert run.exit_code == 1
    assert run.result["status"] == "budget_exceeded"
    assert "step limit" in run.result["message"]
    assert len(server.requests) == 6
    assert git("status", "--porcelain", cwd=repo) == ""


def test_model_answering_without_tools_is_nudged_then_capped(example_repo, scripted, run_cli):
    repo = example_repo("python-invoice")
    server = scripted([step(content="I think it is fine.", repeat=True)])
    run = run_cli(
        "fix", str(repo), "--sandbox", "local", env=model_env(server, LOOPWRIGHT_MAX_STEPS="3")
    )
    assert run.result["status"] == "budget_exceeded"
    nudges = [
        m
        for m in server.requests[-1]["messages"]
        if m["role"] == "user" and "without calling a tool" in m["content"]
    ]
    assert len(nudges) == 2
    calls = run.of_type("model_call")
    assert {(c["tool_call_source"], c["recovered_tool_calls"]) for c in calls} == {("native", 0)}


def written_as_json(call: dict, prose: str) -> dict:
    """A step whose model writes its call as a ```json block, as small local models do when
    the server's chat template does not turn them into `tool_calls`."""
    return step(content=f"{prose}\n\n```json\n{json.dumps(call, indent=2)}\n```")


def test_calls_written_as_json_blocks_are_recovered_and_verified(example_repo, scripted, run_cli):
    repo = example_repo("python-invoice")
    server = scripted(
        [
            written_as_json(PLAN, "I will plan first."),
            written_as_json(tool("read_file", path="invoice/totals.py"), "Reading the code."),
            written_as_json(EDIT, "The percentage is not divided by 100."),
            written_as_json(tool("run_command", command="python -m pytest -q"), "Testing."),
            written_as_json(FINISH, "The tests pass."),
        ]
    )
    run = run_cli("fix", str(repo), "--sandbox", "local", env=model_env(server))

    assert run.exit_code == 0, run.stderr
    assert run.result["status"] == "verified"
    assert FIX_NEW in (repo / "invoice/totals.py").read_text()
    calls = run.of_type("model_call")
    assert [c["tool_calls"] for c in calls] == [
        ["update_plan"],
        ["read_file"],
        ["edit_file"],
        ["run_command"],
        ["finish"],
    ]
    assert {(c["tool_call_source"], c["recovered_tool_calls"]) for c in calls} == {("content", 1)}
    assert calls[2]["content"] == "The percentage is not divided by 100."
    assert [e["status"] for e in run.of_type("tool_result")] == ["ok"] * 5
    assert "(written as text)" in run.stderr
    # the next request carries the recovered call as a real tool call, answered by its result
    assistant = next(m for m in server.requests[1]["messages"] if m["role"] == "assistant")
    assert assistant["content"] == "I will plan first."
    assert [c["function"]["name"] for c in assistant["tool_calls"]] == ["update_plan"]


def test_passing_repository_is_nothing_to_fix_without_a_model_call(example_repo, scripted, run_cli):
    fixed = (RECORDINGS.parent / "python-invoice/invoice/totals.py").read_text()
    repo = example_repo("python-invoice", {"invoice/totals.py": fixed.replace(FIX_OLD, FIX_NEW)})
    server = scripted([step(FINISH)])
    run = run_cli("fix", str(repo), "--sandbox", "local", env=model_env(server))

    assert run.exit_code == run.result["exit_code"] == 3
    assert run.result["status"] == "nothing_to_fix"
    assert server.requests == []


def test_flaky_test_ends_flaky_without_a_model_call(example_repo, scripted, run_cli):
    flaky = (
        "from pathlib import Path\n\n\n"
        "def test_flaky():\n"
        "    marker = Path('.loopwright/flaky-marker')\n"
        "    first = not marker.exists()\n"
        "    marker.parent.mkdir(exist_ok=True)\n"
        "    marker.write_text('ran')\n"
        "    assert not first\n"
    )
    fixed = (RECORDINGS.parent / "python-invoice/invoice/totals.py").read_text()
    repo = example_repo(
        "python-invoice",
        {"tests/test_flaky.py": flaky, "invoice/totals.py": fixed.replace(FIX_OLD, FIX_NEW)},
    )
    server = scripted([step(FINISH)])
    run = run_cli("fix", str(repo), "--sandbox", "local", env=model_env(server))

    assert run.exit_code == run.result["exit_code"] == 4
    assert run.result["status"] == "flaky"
    assert run.result["flaky"]["tests"] == ["tests/test_flaky.py::test_flaky"]
    assert run.result["flaky"]["pattern"]["tests/test_flaky.py::test_flaky"][:2] == [
        "failed",
        "passed",
    ]
    assert server.requests == []


def test_missing_test_command_is_an_environment_problem(example_repo, scripted, run_cli):
    repo = example_repo("python-invoice")
    server = scripted([step(FINISH)])
    run = run_cli(
        "fix",
        str(repo),
        "--sandbox",
        "local",
        "--test-cmd",
        "no-such-test-runner",
        env=model_env(server),
    )
    assert run.exit_code == run.result["exit_code"] == 5
    assert run.result["status"] == "error"
    assert "environment problem" in run.result["message"]
    assert server.requests == []


def test_not_a_git_repository_is_a_clear_error(tmp_path, scripted, run_cli):
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "test_x.py").write_text("def test_x():\n    assert False\n")
    server = scripted([step(FINISH)])
    run = run_cli("fix", str(plain), "--sandbox", "local", env=model_env(server))
    assert run.exit_code == run.result["exit_code"] == 2
    assert run.result["status"] == "error"
    assert "is not a git repository" in run.result["message"]
    assert "Traceback" not in run.stderr


def test_unreachable_model_endpoint_is_a_clear_error(example_repo, run_cli):
    repo = example_repo("python-invoice")
    run = run_cli(
        "fix",
        str(repo),
        "--sandbox",
        "local",
        env={
            "LOOPWRIGHT_MODEL_BASE_URL": "http://127.0.0.1:9/v1",
            "LOOPWRIGHT_MODEL_API_KEY": "sk-test",
            "LOOPWRIGHT_MODEL_RETRIES": "1",
        },
    )
    assert run.exit_code == run.result["exit_code"] == 5
    assert run.result["status"] == "error"
    assert "LOOPWRIGHT_MODEL_BASE_URL" in run.result["message"]
    assert git("status", "--porcelain", cwd=repo) == ""


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["fix", "."], "LOOPWRIGHT_MODEL_API_KEY is not set"),
        (["fix", ".", "--max-steps", "0"], "--max-steps must be at least 1"),
        (["fix", ".", "--replay", "/nonexistent.json"], "no such file"),
    ],
    ids=["no-key", "bad-steps", "missing-recording"],
)
def test_usage_errors_exit_2_with_one_line(args, message, run_cli):
    run = run_cli(*args)
    assert run.exit_code == 2
    assert run.stderr.startswith("loopwright: ") and message in run.stderr
    # --json still answers, with the one object
    assert run.result["status"] == "error"
    assert run.result["exit_code"] == 2
    assert message in run.result["message"]


def test_git_url_is_cloned_from_a_git_server(tmp_path, example_repo, scripted, run_cli):
    source = example_repo("python-invoice")
    (tmp_path / "srv").mkdir()
    with GitServer(tmp_path / "srv") as server_git:
        server_git.create_repo("shop/invoice", source)
        server = scripted(CORRECT)
        run = run_cli(
            "fix",
            server_git.repo_url("shop/invoice"),
            "--sandbox",
            "local",
            "--show-diff",
            env=model_env(server),
        )
    assert run.exit_code == 0, run.stderr
    assert run.result["status"] == "verified"
    assert run.result["applied"] is False
    assert FIX_NEW.strip() in run.result["patch"]
    saved = tmp_path / "data" / "missions" / run.result["mission"] / "patch.diff"
    deliver = [e for e in run.of_type("stage") if e["stage"] == "deliver" and e.get("reason")]
    assert deliver[-1]["reason"] == f"the source is a URL: the patch is saved as {saved}"
    assert "the patch is in the result" not in run.stderr
    assert f"  patch: {saved} (not applied)\n" in run.stderr
    # --show-diff with --json: the full diff on stderr, stdout holds only the object
    assert run.result["patch"] in run.stderr[run.stderr.index("■ verified") :]
    assert any(
        "git-upload-pack" in r["path"] or "upload-pack" in r["query"] for r in server_git.requests
    )


def test_recorded_session_replays_through_the_console_script(example_repo, tmp_path):
    repo = example_repo("python-invoice")
    env = {
        "PATH": f"{subprocess.os.path.dirname(__import__('sys').executable)}:/usr/bin:/bin",
        "LOOPWRIGHT_DATA_DIR": str(tmp_path / "data"),
        "HOME": str(tmp_path),
    }
    proc = subprocess.run(
        [
            "loopwright",
            "fix",
            str(repo),
            "--sandbox",
            "local",
            "--json",
            "--replay",
            str(RECORDINGS / "python-invoice.json"),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["status"] == "verified"
    assert "● verify" in proc.stderr and "verified" in proc.stderr


def test_a_recording_of_another_repository_is_refused_before_any_tool_runs(
    example_repo, run_cli, tmp_path
):
    node = example_repo("node-slugify")
    recording = RECORDINGS / "python-invoice.json"
    run = run_cli("fix", str(node), "--sandbox", "local", "--replay", str(recording))

    assert run.exit_code == 2, run.stderr
    assert f"--replay {recording} belongs to another mission" in run.stderr
    assert "recorded against another repository" in run.stderr
    assert run.events == [] and run.result is not None
    assert (run.result["status"], run.result["exit_code"]) == ("error", 2)
    assert git("status", "--porcelain", cwd=node) == ""
    # A build recording is not a fix's either.
    build = RECORDINGS / "build-node-reading-list.json"
    run = run_cli("fix", str(node), "--sandbox", "local", "--replay", str(build))
    assert run.exit_code == 2
    assert "it was recorded for `loopwright build`, and this is `loopwright fix`" in run.stderr


@pytest.mark.parametrize("name", ["python-invoice", "node-slugify"])
def test_the_bundled_recordings_carry_their_examples_fingerprint(example_repo, name):
    from loopwright.sandbox.workspace import tree_fingerprint

    repo = example_repo(name)
    bundled = json.loads((RECORDINGS / f"{name}.json").read_text())["mission"]
    # The recording was made against this very example, so the demo replays it...
    assert bundled == {"mode": "fix", "tree": tree_fingerprint(repo)}
    # ...and one changed byte, even uncommitted, makes it another repository.
    readme = repo / "README.md"
    readme.write_text(readme.read_text() + " ")
    assert tree_fingerprint(repo) != bundled["tree"]
