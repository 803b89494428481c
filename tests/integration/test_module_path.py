"""A repository's files never run as Loopwright's own code on the host.

`python -m` puts the working directory first on the module path, and Loopwright's commands
can run in a repository's checkout (the Action's workspace holds one when the workflow
checks out first; the CLI does when a person runs it there). Each time Loopwright starts
Python on one of its own modules (the secrets hand-off's re-execution, the Action's entry,
the local model server, pip), it goes through `own_python`, which passes -P, so a
`loopwright/` or `pip/` directory in that checkout is never what runs."""

from __future__ import annotations

import ast
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

from loopwright.hostpython import own_python
from tests.conftest import ROOT, VENV_BIN

HOSTILE = """\
import pathlib
pathlib.Path({marker!r}).write_text(__name__)
raise SystemExit(66)
"""


def hostile_checkout(tmp_path: Path, packages: tuple[str, ...]) -> tuple[Path, Path]:
    """A working directory whose `loopwright` package (and its submodules) records that it
    ran and exits, as a repository's file written to hijack the command would."""
    checkout, marker = tmp_path / "checkout", tmp_path / "hijacked"
    for package in packages:
        directory = checkout.joinpath(*package.split("."))
        directory.mkdir(parents=True, exist_ok=True)
        for name in ("__init__.py", "__main__.py"):
            (directory / name).write_text(HOSTILE.format(marker=str(marker)))
    return checkout, marker


def clean_env(**extra: str) -> dict[str, str]:
    keep = ("PATH", "HOME", "LANG", "TMPDIR")
    return {**{k: os.environ[k] for k in keep if k in os.environ}, **extra}


def test_the_cli_with_a_secret_never_runs_a_loopwright_package_of_the_working_directory(
    tmp_path: Path,
) -> None:
    checkout, marker = hostile_checkout(tmp_path, ("loopwright", "loopwright.cli"))
    # A secret in the environment makes `loopwright` hand it over and run itself again.
    run = subprocess.run(
        [f"{VENV_BIN}/loopwright", "--help"],
        cwd=checkout,
        env=clean_env(LOOPWRIGHT_MODEL_API_KEY="sk-test-handoff-0123456789"),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert not marker.exists(), marker.read_text()
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("usage: loopwright"), run.stdout


def action_command() -> list[str]:
    """The Action's run step, as action.yml has it, with this environment's Python."""
    text = (ROOT / "action" / "action.yml").read_text()
    (line,) = re.findall(r'run: exec "\$RUNNER_TEMP/loopwright-venv/bin/python" (.*)', text)
    return [sys.executable, *shlex.split(line)]


def test_the_actions_entry_never_runs_a_loopwright_package_of_the_checkout(
    tmp_path: Path,
) -> None:
    checkout, marker = hostile_checkout(tmp_path, ("loopwright", "loopwright.action"))
    run = subprocess.run(
        action_command(),
        cwd=checkout,
        # The secrets a runner hands the step, and no event: the run stops at its inputs.
        env=clean_env(
            INPUT_GITHUB_TOKEN="ghs_test0123456789abcdef", GITHUB_WORKSPACE=str(checkout)
        ),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert not marker.exists(), marker.read_text()
    assert run.returncode not in (0, 66), (run.stdout[-2000:], run.stderr[-2000:])
    assert "Traceback" not in run.stderr, run.stderr[-2000:]


def test_without_p_the_same_checkout_would_have_run(tmp_path: Path) -> None:
    """What the two tests above guard against is real here: plain `-m` runs the checkout's."""
    checkout, marker = hostile_checkout(tmp_path, ("loopwright", "loopwright.cli"))
    run = subprocess.run(
        [sys.executable, "-m", "loopwright.cli", "--help"],
        cwd=checkout,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert run.returncode == 66
    assert marker.read_text() == "loopwright"


def interpreter_uses(tree: ast.AST) -> list[tuple[int, str]]:
    """Each place that names this interpreter (`sys.executable`, or `executable` imported
    from `sys`), with what follows it when it starts a list: the flags it launches with."""
    found: list[tuple[int, str]] = []
    starts: dict[int, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "sys":
            if any(alias.name in ("executable", "*") for alias in node.names):
                found.append((node.lineno, "from sys import executable"))
        elif isinstance(node, ast.List | ast.Tuple) and node.elts:
            following = node.elts[1] if len(node.elts) > 1 else None
            if isinstance(following, ast.Constant):
                starts[id(node.elts[0])] = str(following.value)
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and node.attr == "executable"
            and isinstance(node.value, ast.Name)
            and node.value.id == "sys"
        ):
            found.append((node.lineno, starts.get(id(node), "")))
    return sorted(found)


def test_every_python_loopwright_starts_goes_through_own_python() -> None:
    """`own_python` passes -P; the local sandbox's launcher runs isolated (-I, which implies
    -P and ignores the PYTHON* variables). Nothing else may name the interpreter."""
    assert own_python("-m", "x") == [sys.executable, "-P", "-m", "x"]
    elsewhere = []
    for path in sorted((ROOT / "loopwright").rglob("*.py")):
        if path == ROOT / "loopwright" / "hostpython.py":
            continue
        tree = ast.parse(path.read_text(), str(path))
        for line, following in interpreter_uses(tree):
            if following != "-I":
                elsewhere.append(f"{path.relative_to(ROOT)}:{line} ({following or 'bare'})")
    assert not elsewhere, f"start Python with own_python(), not sys.executable: {elsewhere}"


def test_the_interpreter_rule_sees_every_spelling_it_checks() -> None:
    tree = ast.parse(
        "import sys\n"
        'A = [sys.executable, "-m", "x"]\n'
        'B = (sys.executable, "-I", "-c", "y")\n'
        "C = sys.executable\n"
        "from sys import executable\n"
    )
    assert interpreter_uses(tree) == [
        (2, "-m"),
        (3, "-I"),
        (4, ""),
        (5, "from sys import executable"),
    ]


def test_the_actions_install_step_never_runs_the_checkouts_venv_or_pip(tmp_path: Path) -> None:
    checkout, marker = hostile_checkout(tmp_path, ("venv", "ensurepip", "pip"))
    shims = tmp_path / "bin"
    shims.mkdir()
    (shims / "python3.13").symlink_to(sys.executable)  # the first candidate install.sh tries
    runner_temp = tmp_path / "runner-temp"
    runner_temp.mkdir()
    run = subprocess.run(
        ["bash", str(ROOT / "action" / "install.sh")],
        cwd=checkout,
        env=clean_env(
            PATH=f"{shims}:{os.environ['PATH']}",
            GITHUB_ACTION_PATH=str(ROOT / "action"),
            RUNNER_TEMP=str(runner_temp),
            RUNNER_TOOL_CACHE=str(tmp_path / "no-tool-cache"),
            # No package index: the install stops at its first download, after venv,
            # ensurepip and pip have all started.
            PIP_NO_INDEX="1",
            PIP_FIND_LINKS="",
        ),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert not marker.exists(), marker.read_text()
    assert (runner_temp / "loopwright-venv" / "bin" / "pip").exists(), run.stderr[-2000:]
    assert run.returncode != 66, run.stderr[-2000:]


HOST = "127.0.0.2"


def test_serve_workers_never_import_the_working_directorys_modules(tmp_path: Path) -> None:
    """No secret, so no restart with -P: uvicorn's spawned workers (`python -c`) would put
    the working directory first and import its `multiprocessing/` before the standard
    library's. On 127.0.0.2: the other tests' servers listen on 127.0.0.1, so no request of
    theirs can reach this dashboard-only server even if it is handed the same port."""
    checkout, marker = hostile_checkout(tmp_path, ("multiprocessing",))
    log = tmp_path / "serve.log"
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        port = probe.getsockname()[1]
    with log.open("wb") as out:
        server = subprocess.Popen(
            [
                f"{VENV_BIN}/loopwright",
                "serve",
                "--workers",
                "2",
                "--host",
                HOST,
                "--port",
                str(port),
            ],
            cwd=checkout,
            env=clean_env(LOOPWRIGHT_DATA_DIR=str(tmp_path / "data")),
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 120
        started: list[str] = []
        while len(started) < 2 and time.monotonic() < deadline and not marker.exists():
            time.sleep(0.2)
            started = re.findall(r"Application startup complete", log.read_text())
        assert not marker.exists(), marker.read_text()
        assert len(started) == 2, log.read_text()[-3000:]  # both workers are serving
        assert server.poll() is None, log.read_text()[-3000:]
        assert httpx.get(f"http://{HOST}:{port}/healthz", timeout=10).status_code == 200
    finally:
        os.killpg(server.pid, signal.SIGINT)
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()
