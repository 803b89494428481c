"""Shared fixtures: example repositories, the scripted model server, the CLI runner."""

from __future__ import annotations

import base64
import contextlib
import fcntl
import io
import json
import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from loopwright.agent.scripted import ScriptedModelServer
from loopwright.agent.scripted_steps import load_script
from loopwright.cli.main import main
from tests.services import PostgresCluster, RedisServer, postgres_cluster, redis_server

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
RECORDINGS = EXAMPLES / "recordings"
VENV_BIN = str(Path(sys.executable).parent)


def _suite_python_bin() -> str:
    """The bin folder of a Python for the example repositories' own test suites: this
    environment's packages, but no pytest plugin loaded unless a project asks for it, as
    in a project's own environment. This environment's plugins (Faker's, which Litestar
    brings, among them) made each `python -m pytest` of an example 2.3 s of CPU instead of
    0.6 s, and the tests run that command hundreds of times. Made once, under a lock, since
    parallel test workers import this module at the same time."""
    prefix = Path(sys.prefix)
    venv = prefix / "suite-python"
    ready = venv / "ready"
    pth = (
        f"import site; site.addsitedir({sysconfig.get_paths()['purelib']!r})\n"
        "import os; os.environ.setdefault('PYTEST_DISABLE_PLUGIN_AUTOLOAD', '1')\n"
    )
    # `ready` holds what the one file says: a venv moved, or made by another version of
    # this function, is made again.
    if not _holds(ready, pth):
        with (prefix / "suite-python.lock").open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not _holds(ready, pth):
                shutil.rmtree(venv, ignore_errors=True)
                subprocess.run(
                    [sys.executable, "-m", "venv", "--without-pip", str(venv)],
                    check=True,
                    capture_output=True,
                )
                (site,) = venv.glob("lib/python*/site-packages")
                (site / "loopwright_suite.pth").write_text(pth, encoding="utf-8")
                ready.write_text(pth, encoding="utf-8")
    return str(venv / "bin")


def _holds(path: Path, text: str) -> bool:
    try:
        return path.read_text(encoding="utf-8") == text
    except OSError:
        return False


SUITE_PATH = f"{_suite_python_bin()}:{VENV_BIN}"
"""What goes first on PATH where an example's suite runs: `python` is the suite Python,
and every other tool (the `loopwright` CLI, `pytest`) is this environment's."""
# The same for every process a test starts with this process's PATH, and for the local
# sandboxes of the missions tests run in this process (their PATH is the host's).
os.environ["PATH"] = f"{SUITE_PATH}:{os.environ.get('PATH', os.defpath)}"
KEPT_SETTINGS = ("LOOPWRIGHT_SANDBOX_IMAGE",)
"""Settings a test run takes from its own environment (an image built under another tag)."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests marked `slow` run first: a parallel run's workers then spend those minutes
    beside the rest of the suite instead of after it."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


def git(*args: str, cwd: Path) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=test", "-c", "user.email=test@example.com", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
        text=True,
    ).stdout


def init_repo(path: Path) -> Path:
    git("init", "-q", "-b", "main", cwd=path)
    git("add", "-A", cwd=path)
    git("commit", "-qm", "initial", cwd=path)
    return path


def copy_example(name: str, root: Path, files: dict[str, str] | None = None) -> Path:
    dest = root / "repos" / name
    shutil.copytree(EXAMPLES / name, dest)
    for rel, text in (files or {}).items():
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    return init_repo(dest)


@pytest.fixture
def example_repo(tmp_path: Path) -> Callable[..., Path]:
    """Copy a bundled example (optionally with file overrides) into a fresh git repository."""

    def make(name: str, files: dict[str, str] | None = None) -> Path:
        return copy_example(name, tmp_path, files)

    return make


def tool(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def smuggled_write(path: str, content: str) -> dict[str, Any]:
    """A `run_command` call whose program writes `path` itself, where the tools cannot see
    the path: how a model gets a test edit past the tool-side guard. Verification must
    still withhold it, which is what the scenarios using this check."""
    script = (
        f"import base64, pathlib; p = pathlib.Path({path!r}); p.parent.mkdir(parents=True, "
        f"exist_ok=True); p.write_bytes(base64.b64decode({_b64(content)!r}))"
    )
    return tool("run_command", command=f"python3 -c {shlex.quote(script)}")


def smuggled_edit(path: str, old: str, new: str) -> dict[str, Any]:
    """Like `smuggled_write`, replacing the one occurrence of `old` in `path` by `new`."""
    script = (
        f"import base64, pathlib; p = pathlib.Path({path!r}); d = base64.b64decode; "
        f"t = p.read_text(); o = d({_b64(old)!r}).decode(); "
        "assert t.count(o) == 1, 'old text not found once'; "
        f"p.write_text(t.replace(o, d({_b64(new)!r}).decode()))"
    )
    return tool("run_command", command=f"python3 -c {shlex.quote(script)}")


def smuggled_remove(path: str) -> dict[str, Any]:
    """Like `smuggled_write`, deleting `path`."""
    return tool(
        "run_command", command=f"python3 -c {shlex.quote(f'import os; os.remove({path!r})')}"
    )


def step(*calls: dict[str, Any], content: str = "", **extra: Any) -> dict[str, Any]:
    return {"content": content, "tool_calls": list(calls), **extra}


@pytest.fixture
def scripted(tmp_path: Path) -> Iterator[Callable[[list[dict[str, Any]]], ScriptedModelServer]]:
    servers: list[ScriptedModelServer] = []

    def start(steps: list[dict[str, Any]]) -> ScriptedModelServer:
        path = tmp_path / f"script-{len(servers)}.json"
        path.write_text(json.dumps(steps))
        server = ScriptedModelServer(load_script(path)).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


@dataclass
class CliRun:
    exit_code: int
    result: dict[str, Any] | None
    events: list[dict[str, Any]]
    stderr: str

    def of_type(self, type_: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e["type"] == type_]


def clean_cli_env(monkeypatch: pytest.MonkeyPatch, root: Path, env: dict[str, str]) -> None:
    for key in list(os.environ):
        if key.startswith("LOOPWRIGHT_") and key not in KEPT_SETTINGS:
            monkeypatch.delenv(key)
    monkeypatch.setenv("LOOPWRIGHT_DATA_DIR", str(root / "data"))
    monkeypatch.setenv("PATH", f"{SUITE_PATH}:{os.environ['PATH']}")
    for key, value in env.items():
        monkeypatch.setenv(key, value)


def read_events(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture
def run_cli(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> Callable[..., CliRun]:
    """Run `loopwright fix ... --json --events FILE` in-process with a clean environment."""

    def run(*args: str, env: dict[str, str] | None = None) -> CliRun:
        clean_cli_env(monkeypatch, tmp_path, env or {})
        events_path = tmp_path / f"events-{len(list(tmp_path.glob('events-*')))}.ndjson"
        capsys.readouterr()
        code = main([*args, "--json", "--events", str(events_path)])
        out, err = capsys.readouterr()
        result = json.loads(out) if out.strip() else None
        return CliRun(code, result, read_events(events_path), err)

    return run


PLAN_ITEMS = [
    {"step": "reproduce the failing discount tests", "status": "done"},
    {"step": "fix line_total's percentage discount", "status": "in_progress"},
    {"step": "run the whole suite", "status": "pending"},
]
LEGIBLE_MISSION = [
    step(tool("update_plan", items=PLAN_ITEMS)),
    step(tool("read_file", path="tests/test_totals.py", start_line=1, end_line=40)),
    step(tool("read_file", path="invoice/totals.py")),
    step(
        tool(
            "edit_file",
            path="invoice/totals.py",
            old="    discounted = gross - gross * line.discount_percent\n",
            new="    discounted = gross - gross * line.discount_percent / 100\n",
        )
    ),
    step(tool("run_command", command="python -m pytest -q")),
    step({"name": "read_file", "arguments": '{"path": "invoice/'}),
    step(tool("finish", summary="discount_percent is a percentage; divide by 100")),
]
"""Every tool the model has, a read with a line range and a call whose JSON does not parse."""


@pytest.fixture(scope="session")
def legible_mission(tmp_path_factory: pytest.TempPathFactory) -> CliRun:
    """One real `loopwright fix` of python-invoice (scripted model, local sandbox) running
    `LEGIBLE_MISSION`, shared by the tests that read its events, result and progress."""
    root = tmp_path_factory.mktemp("legible")
    repo = copy_example("python-invoice", root)
    script = root / "script.json"
    script.write_text(json.dumps(LEGIBLE_MISSION))
    events_path = root / "events.ndjson"
    out, err = io.StringIO(), io.StringIO()
    with (
        ScriptedModelServer(load_script(script)) as server,
        pytest.MonkeyPatch.context() as monkeypatch,
    ):
        clean_cli_env(
            monkeypatch,
            root,
            {
                "LOOPWRIGHT_MODEL_BASE_URL": server.base_url,
                "LOOPWRIGHT_MODEL_API_KEY": "sk-test-not-a-real-key",
                "LOOPWRIGHT_MODEL_TIERS": "nano=model-nano,super=model-super,ultra=model-ultra",
            },
        )
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(["fix", str(repo), "--sandbox", "local", "--json", "--events",
                         str(events_path)])  # fmt: skip
    result = json.loads(out.getvalue()) if out.getvalue().strip() else None
    return CliRun(code, result, read_events(events_path), err.getvalue())


def docker_engine_available() -> bool:
    try:
        import docker

        client = docker.from_env(version="auto")
        client.ping()
        client.close()
    except Exception:
        return False
    return True


@pytest.fixture(scope="session")
def docker_ready() -> None:
    """The engine and the sandbox image; mandatory in CI, skipped on a laptop without them."""
    if not docker_engine_available():
        if os.environ.get("CI"):
            pytest.fail(
                "CI=true but the Docker engine is unreachable; scripts/bootstrap.sh starts it"
            )
        pytest.skip("no Docker engine (run scripts/bootstrap.sh)")
    import docker

    from loopwright.config import Settings
    from loopwright.sandbox.image import ensure_image

    client = docker.from_env(version="auto")
    try:
        kept = {k: os.environ[k] for k in KEPT_SETTINGS if k in os.environ}
        ensure_image(client, Settings.from_env(kept), lambda line: None)
    finally:
        client.close()


@pytest.fixture(scope="session", autouse=True)
def no_sandbox_left_behind() -> Iterator[None]:
    """After the whole run, no sandbox container is left by this run: none owned by this
    process, none whose owning process (a CLI or server the tests started) has exited.
    Containers of other live processes on the same engine are theirs to clean up."""
    if not docker_engine_available():
        yield
        return
    import docker

    from loopwright.sandbox.base import MISSION_LABEL
    from loopwright.sandbox.docker.engine import OWNER_LABEL
    from loopwright.sandbox.docker.reaper import owner_alive, owner_id

    client = docker.from_env(version="auto")
    before = {c["Id"] for c in client.api.containers(all=True, filters={"label": MISSION_LABEL})}
    yield
    me = owner_id()

    def left_behind() -> list[str]:
        return [
            c["Id"][:12]
            for c in client.api.containers(all=True, filters={"label": MISSION_LABEL})
            if c["Id"] not in before
            and (
                (c.get("Labels") or {}).get(OWNER_LABEL) == me
                or not owner_alive((c.get("Labels") or {}).get(OWNER_LABEL, ""))
            )
        ]

    # A test on another worker may have just killed a server whose containers it is about to
    # see reaped by the restarted one: a dead owner's container counts only once that had
    # time to happen.
    deadline = time.monotonic() + 60
    left = left_behind()
    while left and time.monotonic() < deadline:
        time.sleep(1)
        left = left_behind()
    client.close()
    assert not left, f"sandbox containers left behind: {left}"


@pytest.fixture(params=["local", pytest.param("docker", marks=pytest.mark.docker)])
def sandbox_kind(request: pytest.FixtureRequest) -> str:
    if request.param == "docker":
        request.getfixturevalue("docker_ready")
    return str(request.param)


@pytest.fixture
def redis_service() -> Iterator[RedisServer]:
    """A private `redis-server` for this test, on a free loopback port (see tests/services.py)."""
    with redis_server() as server:
        yield server


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresCluster]:
    """A PostgreSQL cluster for this pytest worker (see tests/services.py)."""
    with postgres_cluster() as cluster:
        yield cluster


@pytest.fixture
def postgres_url(postgres: PostgresCluster) -> str:
    """The SQLAlchemy URL of a fresh, empty database for this test."""
    return postgres.new_database()


FAR_FROM_UTC = "Pacific/Kiritimati"
"""UTC+14: a PostgreSQL session in this zone shows any timestamp handled in local time."""


@pytest.fixture(params=["sqlite", "postgres"])
def empty_database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """An empty database on each dialect the store runs on: a SQLite file, and a fresh
    PostgreSQL database whose sessions run far from UTC (so nothing may rely on the
    server's time zone)."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'loopwright.db'}"
    cluster: PostgresCluster = request.getfixturevalue("postgres")
    url: str = request.getfixturevalue("postgres_url")
    name = url.rsplit("/", 1)[1]
    cluster.sql(f"ALTER DATABASE \"{name}\" SET timezone TO '{FAR_FROM_UTC}'")
    return url


@pytest.fixture
def store_url(empty_database_url: str) -> str:
    """A database of each dialect, migrated to the newest schema."""
    from loopwright.store import migrate

    migrate(empty_database_url)
    return empty_database_url
