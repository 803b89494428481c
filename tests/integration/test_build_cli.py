"""`loopwright build` end to end: the real CLI, a scripted model, real Docker and Chromium."""

from __future__ import annotations

import json

import pytest

from tests.conftest import RECORDINGS, git, step, tool
from tests.integration.test_web_verification import (
    assert_no_container_left,
    assert_real_screenshot,
    chromium_ready,  # noqa: F401 - a fixture
    model_env,
)

SPEC = (
    "A reading list page: a heading 'My reading list' and an ordered list of three books "
    "with their authors."
)
RECORDING = RECORDINGS / "build-node-reading-list.json"


@pytest.mark.docker
@pytest.mark.browser
@pytest.mark.usefixtures("docker_ready", "chromium_ready")
def test_build_writes_a_verified_node_app_with_history_and_screenshot(tmp_path, run_cli):
    out = tmp_path / "reading-list"
    run = run_cli("build", SPEC, "--out", str(out), "--replay", str(RECORDING))

    assert run.exit_code == 0, (run.stderr, run.result)
    result = run.result
    assert result["status"] == "verified"
    assert result["out"] == str(out.resolve())
    # the app, as a one-commit repository whose tree is exactly the app
    assert sorted(result["files"]) == [
        "package.json",
        "server.js",
        "src/app.js",
        "test/app.test.js",
    ]
    log = git("log", "--format=%s", cwd=out).splitlines()
    assert log == ["Build: A reading list page: a heading 'My reading list' and an ordered list…"]
    assert git("rev-parse", "HEAD", cwd=out).strip() == result["commit"]
    assert git("status", "--porcelain", cwd=out) == ""
    # the tests ran and passed in the fresh verification sandbox
    # The verdict names what was checked: the app's tests, and the page the app served.
    assert result["message"] == (
        f"verified: the app's own tests pass; the app boots and renders; the app is in "
        f"{out.resolve()}"
    )
    verification = result["verification"]
    assert verification["verified"] is True and verification["reasons"] == []
    assert [c["phase"] for c in verification["commands"]] == ["after"]
    assert verification["commands"][0]["exit_code"] == 0
    outcomes = {r["id"]: r["after"] for r in verification["rows"]}
    assert len(outcomes) == 3 and set(outcomes.values()) == {"passed"}
    # the page booted and was captured
    web = verification["web"]
    assert web["ok"] is True and web["http_status"] == 200
    assert web["command"] == "npm start" and web["console_errors"] == []
    shot = out / "loopwright-report" / "screenshot.png"
    assert result["screenshot"] == str(shot) == web["screenshot"]
    assert_real_screenshot(shot)
    report = json.loads((out / "loopwright-report" / "verification.json").read_text())
    assert report["status"] == "verified" and report["commit"] == result["commit"]
    assert report["spec"] == SPEC
    stages = [e["stage"] for e in run.of_type("stage") if e["status"] == "started"]
    assert stages == ["prepare", "plan", "loop", "verify", "deliver"]
    assert run.of_type("screenshot")[0]["http_status"] == 200
    assert_no_container_left(result["mission"])


@pytest.mark.docker
@pytest.mark.browser
@pytest.mark.usefixtures("docker_ready", "chromium_ready")
def test_build_whose_tests_fail_is_unverified_but_written(tmp_path, scripted, run_cli):
    package = {"name": "broken", "scripts": {"start": "node server.js", "test": "node --test"}}
    server = scripted(
        [
            step(tool("write_file", path="package.json", content=json.dumps(package))),
            step(
                tool(
                    "write_file",
                    path="test/sum.test.js",
                    content="const test = require('node:test');\n"
                    "const assert = require('node:assert');\n"
                    "test('sums', () => assert.equal(1 + 1, 3));\n",
                )
            ),
            step(tool("finish", summary="done")),
        ]
    )
    out = tmp_path / "broken"
    run = run_cli("build", "A calculator", "--out", str(out), env=model_env(server))

    assert run.exit_code == 1
    assert run.result["status"] == "unverified"
    assert "`npm test` fails in a fresh sandbox" in run.result["message"]
    assert "did not open port 3000" in run.result["message"]  # server.js was never written
    assert (out / "test" / "sum.test.js").is_file()
    assert git("log", "--format=%s", cwd=out).strip() == "Build: A calculator"
    report = json.loads((out / "loopwright-report" / "verification.json").read_text())
    assert report["status"] == "unverified"
    assert report["verification"]["web"]["screenshot"] is None
    assert_no_container_left(run.result["mission"])


def test_a_node_app_for_lang_python_is_not_verified(tmp_path, scripted, run_cli):
    package = {"name": "app", "scripts": {"start": "node server.js", "test": "node --test"}}
    server = scripted(
        [
            step(tool("write_file", path="package.json", content=json.dumps(package))),
            step(tool("write_file", path="test/app.test.js", content="// a test\n")),
            step(tool("finish", summary="done")),
        ]
    )
    out = tmp_path / "app"
    run = run_cli(
        "build", SPEC, "--out", str(out), "--lang", "python", "--sandbox", "local",
        env=model_env(server),
    )  # fmt: skip

    assert run.exit_code == 1
    assert run.result["status"] == "unverified"
    assert run.result["message"].startswith(
        "--lang python asked for a Python app, and the model wrote neither pyproject.toml "
        "nor requirements.txt (it looks like a Node app)"
    )
    # Nothing of the app ran: no test command, no boot.
    assert run.result["verification"]["commands"] == []
    assert (out / "package.json").is_file()


@pytest.mark.parametrize(
    ("files", "lang", "reason"),
    [
        (["package.json", "src/app.js"], "node", None),
        (["pyproject.toml", "app/main.py", "tests/test_app.py"], "python", None),
        (["requirements.txt", "app.py", "app_test.py"], "python", None),
        (["pyproject.toml", "app.py"], "python", "wrote no tests in .py files"),
        (["requirements.txt", "app.py", "test/app.test.js"], "python", "no tests in .py files"),
        (["app.py", "tests/test_app.py"], "python", "neither pyproject.toml nor requirements"),
        (["pyproject.toml", "tests/test_x.py"], "node", "no package.json (it looks like a Py"),
        (["web/package.json", "web/app.js"], "node", "wrote no package.json"),
    ],
)
def test_the_stack_must_match_the_language(files, lang, reason):
    from loopwright.missions.build import stack_mismatch

    found = stack_mismatch(files, lang)
    assert (found is None) if reason is None else (reason in (found or "")), found


def test_verdict_names_only_what_was_checked(tmp_path):
    from loopwright.missions.build import verified_message

    booted = verified_message({"web": {"ok": True}}, tmp_path)
    assert booted == (
        f"verified: the app's own tests pass; the app boots and renders; the app is in {tmp_path}"
    )
    for web in (None, {"ok": False}):
        text = verified_message({"web": web}, tmp_path)
        assert text == f"verified: the app's own tests pass; the app is in {tmp_path}"


def test_a_recording_for_another_spec_or_language_is_refused_before_anything_runs(
    tmp_path, run_cli
):
    out = tmp_path / "app"
    for args, why in [
        (["A JSON time API"], "it was recorded for another specification"),
        ([SPEC, "--lang", "python"], "it was recorded for --lang node, not --lang python"),
    ]:
        run = run_cli(
            "build", *args, "--out", str(out), "--sandbox", "local", "--replay", str(RECORDING)
        )
        assert run.exit_code == 2, run.stderr
        assert f"--replay {RECORDING} belongs to another mission: {why}" in run.stderr
        assert run.events == [] and run.result is not None
        assert (run.result["status"], run.result["exit_code"]) == ("error", 2)
        assert not out.exists()


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        pytest.param("", "the specification is empty", id="empty"),
        pytest.param("  \n\t ", "the specification is empty", id="whitespace"),
        pytest.param("@{tmp}/blank.txt", "blank.txt is empty", id="empty-file"),
        pytest.param("@{tmp}/missing.txt", "cannot read the specification", id="missing-file"),
    ],
)
def test_unusable_spec_is_refused_before_any_model_call(tmp_path, scripted, run_cli, spec, message):
    (tmp_path / "blank.txt").write_text("\n  \n")
    server = scripted([step(tool("finish", summary="never"))])
    out = tmp_path / "out"
    run = run_cli(
        "build", spec.format(tmp=tmp_path), "--out", str(out), "--sandbox", "local",
        env=model_env(server),
    )  # fmt: skip

    assert run.exit_code == 2
    assert message in run.stderr
    assert run.result["status"] == "error" and message in run.result["message"]
    assert server.requests == []
    assert not out.exists()


def test_spec_is_read_from_a_file(tmp_path):
    from loopwright.missions.build import read_spec

    path = tmp_path / "spec.txt"
    path.write_text("\n  A page with a clock.\nIt shows the time.\n")
    assert read_spec(f"@{path}") == "A page with a clock.\nIt shows the time."


def test_output_directory_that_is_not_empty_is_refused(tmp_path, scripted, run_cli):
    out = tmp_path / "existing"
    out.mkdir()
    (out / "notes.txt").write_text("keep me")
    server = scripted([step(tool("finish", summary="never"))])
    run = run_cli("build", SPEC, "--out", str(out), "--sandbox", "local", env=model_env(server))

    assert run.exit_code == 2
    assert f"--out {out} is not empty" in run.stderr
    assert server.requests == []
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]


def test_output_path_that_is_a_file_is_refused(tmp_path, run_cli):
    out = tmp_path / "file"
    out.write_text("x")
    run = run_cli("build", SPEC, "--out", str(out), "--replay", str(RECORDING))
    assert run.exit_code == 2
    assert "is a file" in run.stderr


def test_build_is_documented_in_the_help(capsys):
    from loopwright.cli.main import main

    with pytest.raises(SystemExit) as exit_info:
        main(["build", "--help"])
    assert exit_info.value.code == 0
    text = capsys.readouterr().out
    for flag in ("--out", "--lang", "--sandbox", "--json", "--events", "--replay", "--record"):
        assert flag in text
