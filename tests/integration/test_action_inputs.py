"""The Action's inputs and outputs as a workflow sees them: every output the entrypoint
writes is declared in action.yml, the `guidance`, `max-steps`, `dry-run`, `trigger-phrase`
and `allowed-users` inputs change what a real run does, and the job log is folded by stage
with the verdict as an annotation. Runs use the world of tests/integration/test_action.py
(fake GitHub, git http-backend, scripted model)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from loopwright.action import run as entrypoint
from loopwright.action.plan import ActionEnv, UsageError, plan_event
from loopwright.action.report import (
    Outcome,
    escape_data,
    escape_property,
    report,
    workflow_command,
)
from loopwright.events import STAGES
from loopwright.github.triggers import Ignore, NeedsPermission
from loopwright.missions.result import MissionResult
from loopwright.redaction import Redactor
from tests.conftest import ROOT, step
from tests.integration.test_action import (
    REPO,
    World,
    example,
    parse_outputs,
    world,  # noqa: F401 - the fixture
)
from tests.scenarios import PLAN

ACTION = yaml.safe_load((ROOT / "action" / "action.yml").read_text())
GROUP = re.compile(r"^::group::Loopwright: (\w+)$", re.M)


def loopwright_pulls(scene: World) -> list[dict[str, Any]]:
    return [p for p in scene.github.pulls(REPO) if p["head"]["ref"].startswith("loopwright/")]


def test_dry_run_verifies_delivers_nothing_and_writes_every_declared_output(
    world: World,  # noqa: F811 - the Action's world fixture, imported above
) -> None:
    run = world.run(
        "workflow_run",
        world.workflow_run(),
        inputs={
            "INPUT_DRY_RUN": "true",
            "INPUT_GUIDANCE": "keep the rounding function untouched",
            "INPUT_MAX_STEPS": "12",
        },
    )

    assert run.exit_code == 0, run.stderr
    assert run.outputs["status"] == "verified"
    # Nothing delivered: no pull request, no comment, no push.
    assert loopwright_pulls(world) == []
    assert not world.github.requests_for("issues/create-comment")
    assert not [r for r in world.git.requests if "receive-pack" in r["path"] + r["query"]]
    assert run.outputs["pull-request-url"] == run.outputs["delivery-url"] == ""
    patch = Path(run.outputs["patch-path"])
    assert patch == run.artifacts / "patch.diff" and "discount_percent / 100" in patch.read_text()
    assert run.outputs["mission-url"] == "https://github.test/acme/invoice/actions/runs/9001"
    # Every output written is declared, and every declared output is written.
    assert set(run.outputs) == set(ACTION["outputs"])
    # The guidance input reached the model.
    assert "keep the rounding function untouched" in json.dumps(world.model.requests[0])
    # The log is folded by stage, each group closed before the next opens.
    groups = GROUP.findall(run.stderr)
    assert groups == [s for s in STAGES if s in groups] and len(groups) == len(set(groups))
    assert {"prepare", "verify", "deliver"} <= set(groups)
    assert run.stderr.count("::group::") == run.stderr.count("::endgroup::")
    notice = [line for line in run.stderr.splitlines() if line.startswith("::notice ")]
    assert len(notice) == 1
    assert notice[0].startswith("::notice title=Loopwright%3A verified::verified: ")
    assert "dry-run: nothing delivered" in notice[0]


@pytest.mark.parametrize("world", [[step(PLAN)] * 5], indirect=True, ids=["never-finishes"])
def test_max_steps_caps_the_model_calls(
    world: World,  # noqa: F811 - the Action's world fixture, imported above
) -> None:
    # A one-line failing suite keeps the prepare stage short; the cap is what is tested.
    run = world.run(
        "workflow_run",
        world.workflow_run(),
        inputs={"INPUT_MAX_STEPS": "1", "INPUT_TEST_COMMAND": "false"},
    )

    assert run.exit_code == 1
    assert run.outputs["status"] == "budget_exceeded"
    assert len(world.model.requests) == 1
    assert loopwright_pulls(world) == []
    errors = [line for line in run.stderr.splitlines() if line.startswith("::error ")]
    assert len(errors) == 1
    assert errors[0].startswith("::error title=Loopwright%3A budget exceeded::")
    assert "step limit reached (1," in errors[0]
    # The annotation's message is one line whatever the result said.
    assert "\n" not in errors[0]


def run_in_process(scene: World, payload: dict[str, Any], inputs: dict[str, str]) -> int:
    """The entrypoint's `main` in this process, for runs that end before any mission."""
    runner = scene.tmp / "inline"
    runner.mkdir(exist_ok=True)
    (runner / "event.json").write_text(json.dumps(payload))
    env = {
        "GITHUB_EVENT_NAME": "issue_comment",
        "GITHUB_EVENT_PATH": str(runner / "event.json"),
        "GITHUB_REPOSITORY": REPO,
        "GITHUB_API_URL": scene.github.url,
        "GITHUB_OUTPUT": str(runner / "output"),
        "RUNNER_TEMP": str(runner),
        "INPUT_GITHUB_TOKEN": scene.token,
        "INPUT_MODEL_BASE_URL": scene.model.base_url,
        "INPUT_MODEL_API_KEY": "sk-test-action-key-1234",
        "INPUT_SANDBOX": "local",
        **inputs,
    }
    return entrypoint.main(env)


def test_allowed_users_refuses_a_writer_who_is_not_listed(
    world: World,  # noqa: F811 - the Action's world fixture, imported above
) -> None:
    code = run_in_process(world, world.comment("maintainer"), {"INPUT_ALLOWED_USERS": "alice, bob"})

    assert code == 1
    assert world.model.requests == []
    # Refused before anything is read or written: no permission check, no pull request, no
    # clone, and no comment (one per unlisted commenter would let anyone make it write).
    assert [r.operation_id for r in world.github.requests] == []
    assert not [
        c for c in world.github.comments(REPO, world.pr_number) if c["user"]["type"] == "Bot"
    ]
    outputs = parse_outputs((world.tmp / "inline" / "output").read_text())
    assert outputs["status"] == "refused"
    assert set(outputs) == set(ACTION["outputs"])
    world.github.assert_no_rejections()


def test_a_custom_trigger_phrase_reaches_the_permission_check(
    world: World,  # noqa: F811 - the Action's world fixture, imported above
) -> None:
    code = run_in_process(
        world,
        world.comment("reader", "@acme-bot fix please\nthe discount is a percentage"),
        {"INPUT_TRIGGER_PHRASE": "@acme-bot fix"},
    )

    # The phrase asked for a fix: the reader's permission was checked and refused.
    assert code == 1
    ops = [r.operation_id for r in world.github.requests]
    assert ops == ["repos/get-collaborator-permission-level", "issues/create-comment"]
    assert world.model.requests == []


# -- the pure parts ------------------------------------------------------------------------


def comment_env(tmp_path: Path, body: str, **inputs: str) -> ActionEnv:
    payload = example("issue_comment", "created")
    payload["comment"]["body"] = body
    payload["issue"]["pull_request"] = {"url": "https://api.github.test/pulls/1"}
    for who in (payload["comment"]["user"], payload["sender"]):
        who.update(login="maintainer", type="User")
    path = tmp_path / "event.json"
    path.write_text(json.dumps(payload))
    return ActionEnv.from_environ(
        {"GITHUB_EVENT_NAME": "issue_comment", "GITHUB_EVENT_PATH": str(path),
         "GITHUB_REPOSITORY": REPO, "INPUT_GITHUB_TOKEN": "t", **inputs}
    )  # fmt: skip


@pytest.mark.parametrize(
    ("body", "asks", "guidance"),
    [
        ("@acme-bot fix", True, ""),
        ("  @ACME-BOT fix the rounding\nand the VAT", True, "the rounding\nand the VAT"),
        ("> @acme-bot fix", False, None),
        ("```\n@acme-bot fix\n```", False, None),
        ("<!--\n@acme-bot fix\n-->", False, None),
        ("@acme-bot fixes", False, None),
        ("/loopwright fix", False, None),
        ("please @acme-bot fix", False, None),
        ("@acme-bot fix\r\nuse the cache", True, "use the cache"),
    ],
    ids=[
        "plain",
        "guidance",
        "quoted",
        "fenced",
        "html-comment",
        "longer-word",
        "default-no-longer",
        "mid-line",
        "crlf",
    ],
)
def test_trigger_phrase_replaces_the_command(
    tmp_path: Path, body: str, asks: bool, guidance: str | None
) -> None:
    plan = plan_event(comment_env(tmp_path, body, INPUT_TRIGGER_PHRASE="@acme-bot fix"))
    assert isinstance(plan, NeedsPermission) is asks, plan
    if asks:
        assert isinstance(plan, NeedsPermission) and plan.request.guidance == guidance
    else:
        assert isinstance(plan, Ignore)


def test_the_default_phrase_is_the_command(tmp_path: Path) -> None:
    assert isinstance(plan_event(comment_env(tmp_path, "/loopwright fix")), NeedsPermission)
    assert isinstance(plan_event(comment_env(tmp_path, "@acme-bot fix")), Ignore)


@pytest.mark.parametrize(
    ("inputs", "message"),
    [
        ({"INPUT_MAX_STEPS": "0"}, "max-steps: '0' is not a whole number of at least 1"),
        ({"INPUT_MAX_STEPS": "ten"}, "max-steps: 'ten'"),
        ({"INPUT_DRY_RUN": "yes"}, "dry-run: 'yes' is not true or false"),
        ({"INPUT_ALLOWED_USERS": "alice, @bob"}, "allowed-users: '@bob' is not a GitHub login"),
        ({"INPUT_TRIGGER_PHRASE": "> fix"}, "trigger-phrase: '> fix' cannot start"),
    ],
    ids=["steps-zero", "steps-word", "dry-run", "login", "phrase"],
)
def test_bad_inputs_are_usage_errors_naming_the_input(
    tmp_path: Path, inputs: dict[str, str], message: str
) -> None:
    with pytest.raises(UsageError, match=re.escape(message)):
        comment_env(tmp_path, "/loopwright fix", **inputs)


def test_workflow_commands_are_escaped_as_the_runner_unescapes_them() -> None:
    assert escape_data("50% done\r\nnext") == "50%25 done%0D%0Anext"
    assert escape_property("a: b, c%") == "a%3A b%2C c%25"
    line = workflow_command("error", "tests: 1 failed\n::warning::x", title="Loopwright: x, y")
    assert line == "::error title=Loopwright%3A x%2C y::tests: 1 failed%0A::warning::x"
    # One line: a message cannot start a second workflow command.
    assert "\n" not in line


START_THEN_COUNT = """
import gc, json
from loopwright.action.run import start
code = start()
print(json.dumps({"code": code, "frozen": gc.get_freeze_count(), "walked": len(gc.get_objects())}))
"""


def test_the_run_leaves_what_it_made_out_of_the_closing_collections(tmp_path: Path) -> None:
    # As for `loopwright`: the interpreter's collections at exit skip what the run made.
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path)}  # no inputs: a usage error
    ran = subprocess.run(
        [sys.executable, "-c", START_THEN_COUNT], env=env, capture_output=True, text=True,
        timeout=120, check=True,
    )  # fmt: skip
    counts = json.loads(ran.stdout.splitlines()[-1])
    assert counts["code"] == 2, ran.stderr
    assert "GITHUB_EVENT_NAME is not set" in ran.stderr
    assert counts["frozen"] > 10_000
    assert counts["walked"] < counts["frozen"] / 10


def test_the_step_summary_is_written_when_the_result_quotes_bytes_that_are_not_utf8(
    tmp_path: Path,
) -> None:
    """A message or a test output read from a Latin-1 name holds lone surrogates; the
    summary file and `$GITHUB_STEP_SUMMARY` are UTF-8, so they get U+FFFD instead of the
    step ending in a traceback after the delivery."""
    summary = tmp_path / "step-summary.md"
    action = replace(
        comment_env(tmp_path, "@acme-bot fix", GITHUB_STEP_SUMMARY=str(summary)),
        artifact_dir=tmp_path / "artifacts",
    )
    action.artifact_dir.mkdir()
    message = "verification failed: tests/test_caf\udce9.py::test_menu failed"
    result = MissionResult("a1b2c3d4e5f6", "unverified", message=message, patch="+caf\udce9\n")
    report(action, Outcome("unverified", message, result=result), Redactor())
    written = summary.read_text(encoding="utf-8")
    assert "caf\ufffd.py" in written
    assert (action.artifact_dir / "summary.md").read_text(encoding="utf-8") == written.rstrip("\n")
