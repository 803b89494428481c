"""CLI conventions through the real `loopwright` entry point: exit codes, `--json` on early
errors, -q/-v, colour, --version/--help and the block that ends a mission."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from loopwright.cli.main import main
from tests.conftest import init_repo, step
from tests.scenarios import FINISH, model_env

ANSI = "\033["


def plain_dir(tmp_path, name="plain"):
    path = tmp_path / name
    path.mkdir()
    (path / "test_x.py").write_text("def test_x():\n    assert False\n")
    return path


def assert_one_error_object(run, code):
    assert run.exit_code == code, run.stderr
    assert run.result is not None, "--json printed nothing"
    assert run.result["status"] == "error"
    assert run.result["exit_code"] == code
    assert run.result["message"]
    assert "Traceback" not in run.stderr


@pytest.mark.parametrize(
    ("setup", "args", "message"),
    [
        ("missing", [], "is not a directory"),
        ("plain", [], "is not a git repository"),
        ("bad-config", [], ".loopwright.yml: unknown key(s) test_command"),
        ("repo", ["--max-steps", "0"], "--max-steps must be at least 1"),
        ("repo", ["--no-such-flag"], "unrecognized arguments: --no-such-flag"),
        ("repo", ["--sandbox", "vm"], "invalid choice: 'vm'"),
        ("bad-setting", [], "LOOPWRIGHT_MAX_STEPS='many' is not a whole number"),
    ],
    ids=["not-a-dir", "not-a-repo", "bad-config", "bad-steps", "bad-flag", "bad-choice", "env"],
)
def test_exit_2_usage_and_configuration_errors_answer_in_json(
    setup, args, message, tmp_path, scripted, run_cli
):
    server = scripted([step(FINISH)])
    env = model_env(server)
    target = tmp_path / "missing"
    if setup == "plain":
        target = plain_dir(tmp_path)
    elif setup in ("repo", "bad-config", "bad-setting"):
        target = plain_dir(tmp_path, "repo")
        if setup == "bad-config":
            (target / ".loopwright.yml").write_text("test_command: pytest\n")
        if setup == "bad-setting":
            env["LOOPWRIGHT_MAX_STEPS"] = "many"
        init_repo(target)
    run = run_cli("fix", str(target), "--sandbox", "local", *args, env=env)

    assert_one_error_object(run, 2)
    assert message in run.result["message"]
    assert message in run.stderr
    assert server.requests == []


def test_messages_name_the_users_path_not_the_internal_copy(tmp_path, scripted, run_cli):
    repo = tmp_path / "no-tests"
    repo.mkdir()
    (repo / "README.md").write_text("nothing to test here\n")
    init_repo(repo)
    server = scripted([step(FINISH)])
    run = run_cli("fix", str(repo), "--sandbox", "local", env=model_env(server))

    assert_one_error_object(run, 2)
    assert f"could not find how to run the tests in {repo} " in run.result["message"]
    assert f"in {repo} " in run.stderr
    assert "/trees/" not in run.stderr and "/trees/" not in run.result["message"]
    error = run.of_type("error")[-1]
    assert f"could not find how to run the tests in {repo} " in error["message"]
    assert not [e for e in run.events if "/trees/" in str(e)]


def test_exit_5_docker_unreachable_answers_in_json(tmp_path, example_repo, run_cli):
    repo = example_repo("python-invoice")
    run = run_cli(
        "fix",
        str(repo),
        "--sandbox",
        "docker",
        env={
            "DOCKER_HOST": f"unix://{tmp_path}/no-docker.sock",
            "LOOPWRIGHT_MODEL_BASE_URL": "http://127.0.0.1:9/v1",
        },
    )
    assert_one_error_object(run, 5)
    assert "Docker" in run.result["message"]
    assert run.result["mission"]


@pytest.mark.docker
def test_exit_5_sandbox_image_missing(example_repo, scripted, run_cli, docker_ready):
    repo = example_repo("python-invoice")
    server = scripted([step(FINISH)])
    image = "loopwright-sandbox:no-such-tag"
    run = run_cli(
        "fix",
        str(repo),
        "--sandbox",
        "docker",
        env=model_env(server, LOOPWRIGHT_SANDBOX_IMAGE=image),
    )
    assert run.exit_code == run.result["exit_code"] == 5, run.stderr
    assert run.result["status"] == "error"
    assert f"the sandbox image {image} is missing" in run.result["message"]
    assert "loopwright sandbox build" in run.stderr
    assert server.requests == []


def test_quiet_prints_the_verdict_line_only(tmp_path, scripted, run_cli):
    server = scripted([step(FINISH)])
    run = run_cli(
        "fix", str(plain_dir(tmp_path)), "--sandbox", "local", "-q", env=model_env(server)
    )

    assert_one_error_object(run, 2)
    lines = run.stderr.splitlines()
    assert lines[0].startswith("■ error  (0 steps, $0.0000, ")
    assert lines[1] == f"  {run.result['message']}"
    assert len(lines) == 2, run.stderr


@pytest.mark.parametrize(
    ("env", "coloured"),
    [
        ({"FORCE_COLOR": "1"}, True),
        ({"FORCE_COLOR": "1", "NO_COLOR": "1"}, False),
        ({}, False),
    ],
    ids=["force", "no-color-wins", "not-a-terminal"],
)
def test_colour_follows_no_color_and_force_color(env, coloured, tmp_path, scripted, run_cli):
    server = scripted([step(FINISH)])
    run = run_cli(
        "fix", str(plain_dir(tmp_path)), "--sandbox", "local", env={**model_env(server), **env}
    )
    assert run.exit_code == 2
    assert ("\033[1;36m● prepare" in run.stderr) is coloured
    assert (ANSI in run.stderr) is coloured


@pytest.mark.parametrize("verbose", [False, True], ids=["default", "verbose"])
def test_serve_shows_alembic_lines_only_with_verbose_in_one_format(
    verbose, tmp_path, scripted, run_cli
):
    server = scripted([step(FINISH)])
    flags = ["-v"] if verbose else []
    run = run_cli(
        "fix",
        str(plain_dir(tmp_path)),
        "--sandbox",
        "local",
        "--serve",
        *flags,
        env=model_env(server),
    )
    assert run.exit_code == 2
    assert "watch this mission at http://127.0.0.1:" in run.stderr
    upgrade = re.search(r"^\S+Z \[info\s*\] Running upgrade .*\[alembic\.\S+\]$", run.stderr, re.M)
    assert (upgrade is not None) is verbose, run.stderr
    if not verbose:
        assert "Running upgrade" not in run.stderr and "Context impl" not in run.stderr


def test_version_and_help_name_the_exit_codes(capsys):
    with pytest.raises(SystemExit) as version:
        main(["--version"])
    assert version.value.code == 0
    assert re.fullmatch(r"loopwright \d+\.\d+\.\d+\S*\n", capsys.readouterr().out)
    for argv in (["--help"], ["fix", "--help"], ["build", "--help"]):
        with pytest.raises(SystemExit) as shown:
            main(argv)
        assert shown.value.code == 0
        out = capsys.readouterr().out
        assert "exit codes:" in out
        for line in ("0  verified", "1  not verified", "2  usage or configuration error",
                     "3  nothing to fix", "4  flaky", "5  environment problem"):  # fmt: skip
            assert line in out, argv


ENTRY_THEN_COUNT = """
import gc, json, sys
from loopwright.cli.main import entry
sys.argv = ["loopwright", "missions", "--json"]
code = entry()
print(json.dumps({"code": code, "frozen": gc.get_freeze_count(), "walked": len(gc.get_objects())}))
"""


def test_the_command_leaves_what_it_made_out_of_the_closing_collections(tmp_path):
    # The interpreter's collections at exit walk every object the command left behind;
    # `entry` freezes them, so those walks cost little however much the command loaded.
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "LOOPWRIGHT_DATA_DIR": str(tmp_path)}
    ran = subprocess.run(
        [sys.executable, "-c", ENTRY_THEN_COUNT], env=env, capture_output=True, text=True,
        timeout=120, check=True,
    )  # fmt: skip
    *missions, last = ran.stdout.splitlines()
    assert json.loads("\n".join(missions)) == {"missions": []}
    counts = json.loads(last)
    assert counts["code"] == 0
    assert counts["frozen"] > 10_000
    assert counts["walked"] < counts["frozen"] / 10


def test_unknown_command_answers_in_json(run_cli):
    run = run_cli("frobnicate")
    assert_one_error_object(run, 2)
    assert "invalid choice: 'frobnicate'" in run.result["message"]


@pytest.mark.parametrize("flag", ["--events", "--record"])
@pytest.mark.parametrize("where", ["directory", "unwritable"])
def test_an_unusable_events_or_record_path_is_a_usage_error_before_any_model_call(
    flag, where, tmp_path, scripted, capsys, monkeypatch
):
    server = scripted([step(FINISH)])
    for key, value in model_env(server).items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("LOOPWRIGHT_DATA_DIR", str(tmp_path / "data"))
    repo = plain_dir(tmp_path, "repo")
    init_repo(repo)
    target = tmp_path / "out" if where == "directory" else tmp_path / "file" / "x.json"
    if where == "directory":
        target.mkdir()
    else:
        (tmp_path / "file").write_text("a file, so nothing can be created under it\n")
    capsys.readouterr()
    code = main(["fix", str(repo), "--sandbox", "local", "--json", flag, str(target)])
    out, err = capsys.readouterr()

    assert code == 2, err
    (failure,) = [json.loads(out)]
    assert failure["exit_code"] == 2 and failure["status"] == "error"
    assert f"{flag} {target}" in failure["message"]
    assert "Traceback" not in err
    assert server.requests == []
