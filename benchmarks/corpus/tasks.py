"""Load the corpus tasks and judge a patched tree against a task's visible and hidden tests.

Each task lives in `benchmarks/corpus/<task-id>/`: `task.toml`, `repo/` (the buggy
repository as the agent gets it), `fix.patch` (the known fix) and `hidden/` (extra tests
copied over the tree only when judging). Tests run on the host with Python's and node's own
runners, each in a throwaway copy and under a timeout.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

CORPUS = Path(__file__).resolve().parent
LANGUAGES = ("python", "node")
BUG_CLASSES = (
    "off-by-one",
    "wrong-operator",
    "missing-edge-case",
    "shared-state",
    "wrong-api-use",
    "async-ordering",
    "parsing",
    "dates",
    "unicode",
    "floating-point",
)
REQUIRED_KEYS = ("id", "language", "bug_class", "summary", "test_cmd", "hidden_test_cmd")
TEST_DIRS = ("tests", "test")
"""Where a task keeps its tests; judging restores these directories from the task."""
TEST_CONFIG = ("pytest.ini", "conftest.py", "setup.cfg", "tox.ini", ".loopwright.yml")
"""Root files that change how tests run; judging restores them (or drops added ones)."""
DEFAULT_TIMEOUT = 60.0
UNUSED_PYTEST_PLUGINS = (
    "cacheprovider",
    "doctest",
    "pastebin",
    "legacypath",
    "junitxml",
    "stepwise",
    "setuponly",
    "setupplan",
    "debugging",
    "faulthandler",
)


class TaskError(Exception):
    """A task directory is malformed; the message names the file and what to fix."""


@dataclass(frozen=True)
class RunResult:
    """One test command's outcome in a throwaway tree."""

    command: str
    exit_code: int
    timed_out: bool
    output: str

    @property
    def passed(self) -> bool:
        return self.exit_code == 0 and not self.timed_out


TestRunner = Callable[[str, Path, float], RunResult]
"""Runs one test command in a tree with a timeout: `run_tests` or a sandboxed equivalent."""


@dataclass(frozen=True)
class Judgement:
    """Whether a patched tree passes the task's visible and hidden tests."""

    visible_ok: bool
    hidden_ok: bool
    output: str
    """Both runs' commands and output, for a human reading why a verdict was given."""

    @property
    def ok(self) -> bool:
        return self.visible_ok and self.hidden_ok


@dataclass(frozen=True)
class Task:
    """One corpus task, read from its `task.toml`."""

    id: str
    language: str
    bug_class: str
    summary: str
    """One line for humans; never given to the agent."""
    test_cmd: str
    hidden_test_cmd: str
    root: Path

    @property
    def repo(self) -> Path:
        return self.root / "repo"

    @property
    def fix_patch(self) -> Path:
        return self.root / "fix.patch"

    @property
    def hidden(self) -> Path:
        return self.root / "hidden"

    def hidden_files(self) -> list[Path]:
        """The hidden test files, relative to the repository root."""
        return sorted(p.relative_to(self.hidden) for p in self.hidden.rglob("*") if p.is_file())

    def fixed_files(self) -> list[str]:
        """The files the known fix changes, relative to the repository root."""
        return [
            line.removeprefix("+++ b/")
            for line in self.fix_patch.read_text(encoding="utf-8").splitlines()
            if line.startswith("+++ b/")
        ]

    def judge(
        self,
        patched_tree: Path,
        timeout: float = DEFAULT_TIMEOUT,
        runner: TestRunner | None = None,
    ) -> Judgement:
        """Run the visible, then the hidden tests on a copy of `patched_tree`.

        The task's own tests and test configuration replace whatever the patch did to them,
        so a verdict only credits changes to the product code. `patched_tree` is not changed.
        `runner` runs one command in the copy (default: `run_tests`, on this host); pass one
        that runs it in a sandbox when the patch comes from a model you do not trust.
        """
        run = runner or run_tests
        with tempfile.TemporaryDirectory(prefix=f"corpus-{self.id}-") as tmp:
            tree = Path(tmp) / "repo"
            copy_tree(patched_tree, tree)
            self.restore_tests(tree)
            visible = run(self.test_cmd, tree, timeout)
            self.add_hidden(tree)
            hidden = run(self.hidden_test_cmd, tree, timeout)
        return Judgement(visible.passed, hidden.passed, describe(visible) + describe(hidden))

    def restore_tests(self, tree: Path) -> None:
        """Put the task's test directories and test configuration back as the task has them."""
        for name in TEST_DIRS:
            if (tree / name).exists() or (tree / name).is_symlink():
                remove(tree / name)
            if (self.repo / name).is_dir():
                copy_tree(self.repo / name, tree / name)
        for name in TEST_CONFIG:
            if (tree / name).exists() or (tree / name).is_symlink():
                remove(tree / name)
            if (self.repo / name).is_file():
                shutil.copy2(self.repo / name, tree / name)

    def add_hidden(self, tree: Path) -> None:
        for rel in self.hidden_files():
            target = tree / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(self.hidden / rel, target)


def load_task(root: Path) -> Task:
    """The task in directory `root`; raises TaskError naming what is missing or wrong."""
    path = root / "task.toml"
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise TaskError(f"{path} is missing; every task directory needs a task.toml") from None
    except tomllib.TOMLDecodeError as exc:
        raise TaskError(f"{path} is not valid TOML: {exc}") from None
    missing = [k for k in REQUIRED_KEYS if not isinstance(data.get(k), str) or not data[k]]
    if missing:
        raise TaskError(f"{path}: set {', '.join(missing)} (non-empty strings)")
    unknown = sorted(set(data) - set(REQUIRED_KEYS))
    if unknown:
        raise TaskError(f"{path}: unknown key(s) {', '.join(unknown)}")
    if data["id"] != root.name:
        raise TaskError(f"{path}: id is {data['id']!r} but the directory is {root.name!r}")
    if data["language"] not in LANGUAGES:
        raise TaskError(f"{path}: language must be one of {', '.join(LANGUAGES)}")
    if data["bug_class"] not in BUG_CLASSES:
        raise TaskError(f"{path}: bug_class must be one of {', '.join(BUG_CLASSES)}")
    if "\n" in data["summary"].strip():
        raise TaskError(f"{path}: summary must be one line")
    return Task(
        id=data["id"],
        language=data["language"],
        bug_class=data["bug_class"],
        summary=data["summary"].strip(),
        test_cmd=data["test_cmd"],
        hidden_test_cmd=data["hidden_test_cmd"],
        root=root,
    )


def load_tasks(corpus: Path = CORPUS) -> list[Task]:
    """Every task in the corpus, sorted by id."""
    return [load_task(p) for p in sorted(corpus.iterdir()) if (p / "task.toml").is_file()]


def copy_tree(source: Path, dest: Path) -> None:
    """Copy a repository, without caches and without following symlinks out of it."""
    shutil.copytree(
        source,
        dest,
        symlinks=True,
        ignore=shutil.ignore_patterns(".git", "__pycache__", ".pytest_cache", "node_modules"),
    )


def remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink()


def host_argv(command: str) -> list[str]:
    """`command` as argv for the host: `python` means this interpreter, which has pytest."""
    argv = shlex.split(command)
    if argv and argv[0] in ("python", "python3"):
        argv[0] = sys.executable
    return argv


def test_env(tree: Path) -> dict[str, str]:
    """A small environment: no project settings, no plugins from this interpreter's site."""
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tree.parent),
        "LANG": "C.UTF-8",
        "TZ": "UTC",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
        # Plugins these small suites never use cost a third of each run's start-up.
        "PYTEST_ADDOPTS": " ".join(f"-p no:{name}" for name in UNUSED_PYTEST_PLUGINS),
        "NO_COLOR": "1",
    }


def run_tests(command: str, tree: Path, timeout: float = DEFAULT_TIMEOUT) -> RunResult:
    """Run one test command in `tree`; a timeout ends the whole process group."""
    with subprocess.Popen(
        host_argv(command),
        cwd=tree,
        env=test_env(tree),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        errors="replace",
        start_new_session=True,
    ) as proc:
        try:
            output, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            output, _ = proc.communicate()
            return RunResult(command, -9, True, output + f"\n[timed out after {timeout:g}s]")
    return RunResult(command, proc.returncode, False, output)


def describe(result: RunResult) -> str:
    status = "timed out" if result.timed_out else f"exit {result.exit_code}"
    return f"$ {result.command}  ({status})\n{result.output.rstrip()}\n"


class WarmPytest:
    """A `TestRunner` that sends pytest runs to warm `warm_pytest` servers, one per thread.

    Commands other than `python -m pytest …` go to `run_tests`. Use it as a context manager:
    leaving it ends the servers.
    """

    def __init__(self) -> None:
        self._local = threading.local()
        self._servers: list[subprocess.Popen[str]] = []
        self._lock = threading.Lock()

    def __enter__(self) -> WarmPytest:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _server(self) -> subprocess.Popen[str]:
        server: subprocess.Popen[str] | None = getattr(self._local, "server", None)
        if server is None or server.poll() is not None:
            server = subprocess.Popen(
                [sys.executable, "-m", "benchmarks.corpus.warm_pytest"],
                cwd=CORPUS.parents[1],
                env={**test_env(CORPUS), "PYTHONPATH": str(CORPUS.parents[1])},
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
            self._local.server = server
            with self._lock:
                self._servers.append(server)
        return server

    def __call__(self, command: str, tree: Path, timeout: float = DEFAULT_TIMEOUT) -> RunResult:
        argv = host_argv(command)
        if argv[:3] != [sys.executable, "-m", "pytest"]:
            return run_tests(command, tree, timeout)
        server = self._server()
        assert server.stdin is not None and server.stdout is not None
        request = {"args": argv[3:], "cwd": str(tree), "env": test_env(tree), "timeout": timeout}
        server.stdin.write(json.dumps(request) + "\n")
        server.stdin.flush()
        line = server.stdout.readline()
        if not line:
            code = server.wait()
            raise RuntimeError(f"the pytest server stopped (exit {code}) running {command}")
        reply = json.loads(line)
        output = reply["output"]
        if reply["timed_out"]:
            output += f"\n[timed out after {timeout:g}s]"
        return RunResult(command, reply["exit_code"], reply["timed_out"], output)

    def close(self) -> None:
        with self._lock:
            servers, self._servers = self._servers, []
        for server in servers:
            if server.stdin is not None:
                server.stdin.close()
            try:
                server.wait(timeout=10)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
