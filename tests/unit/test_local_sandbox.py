"""The local sandbox: command execution, timeouts, output capping, environment, file tools."""

from __future__ import annotations

import os
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from loopwright.config import SandboxLimits
from loopwright.sandbox.base import FileToolError, SandboxError
from loopwright.sandbox.local import LocalProvider, LocalSandbox


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    repo = tmp_path / "tree"
    (repo / "src").mkdir(parents=True)
    (repo / "src" / "app.py").write_text("print('hi')\n")
    (repo / "link_to_app").symlink_to("src/app.py")
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    return repo


@pytest.fixture
def provider(tmp_path: Path) -> Iterator[LocalProvider]:
    provider = LocalProvider(
        SandboxLimits(output_cap_bytes=10_000),
        base_dir=tmp_path / "sandboxes",
        extra_env={"LOOPWRIGHT_EXTRA": "yes"},
    )
    yield provider
    provider.close()


@pytest.fixture
def sandbox(provider: LocalProvider, tree: Path) -> LocalSandbox:
    return provider.create("mission-1", tree, network=False)


def test_create_copies_the_tree_with_git_and_symlinks(sandbox: LocalSandbox, tree: Path) -> None:
    assert sandbox.mission_id == "mission-1"
    assert (sandbox.workspace / ".git").is_dir()
    link = sandbox.workspace / "link_to_app"
    assert link.is_symlink() and os.readlink(link) == "src/app.py"
    assert (sandbox.workspace / "src" / "app.py").read_text() == "print('hi')\n"
    assert sandbox.workspace != tree


def test_exec_success(sandbox: LocalSandbox) -> None:
    result = sandbox.exec("pwd && echo out && echo err >&2", timeout_s=10)
    assert result.ok and result.exit_code == 0
    assert not result.timed_out and not result.truncated
    lines = result.output.splitlines()
    assert Path(lines[0]).resolve() == sandbox.workspace.resolve()
    assert "out" in lines and "err" in lines
    assert result.duration_s > 0


def test_exec_failing_exit_code_is_data(sandbox: LocalSandbox) -> None:
    result = sandbox.exec("echo failing; exit 3", timeout_s=10)
    assert result.exit_code == 3
    assert not result.ok and not result.timed_out
    assert "failing" in result.output


def test_exec_killed_by_signal_reports_128_plus_n(sandbox: LocalSandbox) -> None:
    result = sandbox.exec("kill -TERM $$", timeout_s=10)
    assert result.exit_code == 128 + 15


def test_stdin_is_empty(sandbox: LocalSandbox) -> None:
    result = sandbox.exec("cat; echo done", timeout_s=10)
    assert result.output.strip() == "done"


def test_output_streams_to_the_callback_as_it_arrives(sandbox: LocalSandbox) -> None:
    arrivals: list[tuple[float, str]] = []
    started = time.monotonic()
    result = sandbox.exec(
        "echo first; sleep 1; echo second",
        timeout_s=10,
        on_output=lambda text: arrivals.append((time.monotonic() - started, text)),
    )
    assert "".join(text for _, text in arrivals) == result.output
    first = next(t for t, text in arrivals if "first" in text)
    second = next(t for t, text in arrivals if "second" in text)
    assert second - first >= 0.5, "the first line arrived only when the command ended"
    assert len(arrivals) >= 2


def _survivors(marker: str) -> str:
    proc = subprocess.run(["pgrep", "-af", marker], capture_output=True, text=True, check=False)
    return proc.stdout.strip()


def test_timeout_kills_the_whole_process_tree(sandbox: LocalSandbox) -> None:
    marker = f"1{uuid.uuid4().int % 10**8:08d}"  # a unique sleep length to find with pgrep
    command = f"bash -c 'sleep {marker} & sleep {marker}; wait' & sleep {marker}; wait"
    started = time.monotonic()
    result = sandbox.exec(command, timeout_s=1)
    elapsed = time.monotonic() - started
    assert result.timed_out and result.exit_code == 124 and not result.ok
    assert elapsed < 1 + 2
    time.sleep(0.2)
    assert _survivors(f"sleep {marker}") == ""


def test_leftover_background_processes_are_killed_when_the_command_ends(
    sandbox: LocalSandbox,
) -> None:
    marker = f"2{uuid.uuid4().int % 10**8:08d}"
    started = time.monotonic()
    result = sandbox.exec(f"sleep {marker} & echo started", timeout_s=30)
    assert time.monotonic() - started < 5
    assert result.exit_code == 0 and "started" in result.output
    time.sleep(0.2)
    assert _survivors(f"sleep {marker}") == ""


def test_output_is_capped_with_head_and_tail(sandbox: LocalSandbox) -> None:
    result = sandbox.exec(
        "echo HEAD-LINE; head -c 200000 /dev/zero | tr '\\0' x; echo; echo TAIL-LINE",
        timeout_s=20,
    )
    assert result.truncated and result.exit_code == 0
    assert result.output.startswith("HEAD-LINE")
    assert result.output.rstrip().endswith("TAIL-LINE")
    assert "bytes elided ...]" in result.output
    assert len(result.output.encode()) < 10_000 + 100


def test_small_output_is_not_truncated(sandbox: LocalSandbox) -> None:
    result = sandbox.exec("printf 'abc'", timeout_s=10)
    assert result.output == "abc" and not result.truncated


def test_environment_is_scrubbed(
    provider: LocalProvider, tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    canaries = {
        "LOOPWRIGHT_MODEL_API_KEY": "sk-CANARY0123456789abcdef",
        "GITHUB_TOKEN": "ghs_CANARY0123456789abcdef",
        "ACTIONS_RUNTIME_TOKEN": "CANARY-actions-runtime",
        "ACTIONS_ID_TOKEN_REQUEST_TOKEN": "CANARY-id-token",
    }
    for name, value in canaries.items():
        monkeypatch.setenv(name, value)
    sandbox = provider.create("mission-env", tree, network=False)
    result = sandbox.exec("env; cat /proc/self/environ | tr '\\0' '\\n'", timeout_s=10)
    assert "CANARY" not in result.output
    env = dict(line.split("=", 1) for line in result.output.splitlines() if "=" in line)
    assert env["CI"] == "true" and env["TERM"] == "dumb"
    assert env["LOOPWRIGHT_EXTRA"] == "yes"
    assert Path(env["HOME"]).parent == sandbox.root
    assert Path(env["TMPDIR"]).parent == sandbox.root
    assert set(env) <= {
        "PATH", "HOME", "TMPDIR", "LANG", "LC_ALL", "TERM", "CI", "PYTHONDONTWRITEBYTECODE",
        "LOOPWRIGHT_EXTRA", "PWD", "SHLVL", "_", "OLDPWD",
    }  # fmt: skip


def test_read_write_round_trip(sandbox: LocalSandbox) -> None:
    sandbox.write_file("src/new/module.py", b"VALUE = 42\n")
    assert sandbox.read_file("src/new/module.py") == b"VALUE = 42\n"
    assert (sandbox.workspace / "src" / "new" / "module.py").read_bytes() == b"VALUE = 42\n"
    sandbox.write_file("./src//app.py", b"print('changed')\n")
    assert sandbox.read_file("src/app.py") == b"print('changed')\n"
    result = sandbox.exec("python3 src/app.py", timeout_s=10)
    assert result.output.strip() == "changed"


def test_write_keeps_the_file_mode(sandbox: LocalSandbox) -> None:
    script = sandbox.workspace / "run.sh"
    script.write_text("#!/bin/sh\necho old\n")
    script.chmod(0o755)
    sandbox.write_file("run.sh", b"#!/bin/sh\necho new\n")
    assert script.stat().st_mode & 0o777 == 0o755
    assert sandbox.exec("./run.sh", timeout_s=10).output.strip() == "new"


def test_write_through_an_inside_symlink_updates_its_target(sandbox: LocalSandbox) -> None:
    sandbox.write_file("link_to_app", b"print('via link')\n")
    assert (sandbox.workspace / "link_to_app").is_symlink()
    assert sandbox.read_file("src/app.py") == b"print('via link')\n"


def test_missing_file_is_an_error_for_the_model(sandbox: LocalSandbox) -> None:
    with pytest.raises(FileToolError, match="does not exist"):
        sandbox.read_file("src/nope.py")


@pytest.mark.parametrize(
    "path",
    ["../../etc/passwd", "/etc/passwd", "/proc/self/environ", "~/.ssh/id_rsa", "a\x00b", "."],
)
def test_escapes_are_refused(sandbox: LocalSandbox, tmp_path: Path, path: str) -> None:
    with pytest.raises(FileToolError, match=r"^Refused"):
        sandbox.read_file(path)
    with pytest.raises(FileToolError, match=r"^Refused"):
        sandbox.write_file(path, b"pwned")


def test_symlink_escapes_are_refused(sandbox: LocalSandbox, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    sentinel = outside / "sentinel.txt"
    sentinel.write_text("untouched")
    (sandbox.workspace / "to_outside").symlink_to(outside)
    (sandbox.workspace / "dangling").symlink_to(outside / "created.txt")
    (sandbox.workspace / "to_root").symlink_to("/")
    for path in ("to_outside/sentinel.txt", "dangling", "to_root/etc/hostname"):
        with pytest.raises(FileToolError, match="must stay inside the repository"):
            sandbox.write_file(path, b"pwned")
    with pytest.raises(FileToolError, match="must stay inside the repository"):
        sandbox.read_file("to_outside/sentinel.txt")
    assert sentinel.read_text() == "untouched"
    assert sorted(p.name for p in outside.iterdir()) == ["sentinel.txt"]


def test_set_network_is_accepted(sandbox: LocalSandbox) -> None:
    sandbox.set_network(False)
    sandbox.set_network(True)


def test_close_removes_the_directory_and_is_idempotent(sandbox: LocalSandbox) -> None:
    # A read-only directory, like Go's module cache, must not stop the cleanup.
    sandbox.exec("mkdir -p cache/ro && touch cache/ro/f && chmod 555 cache/ro", timeout_s=10)
    root = sandbox.root
    assert root.is_dir()
    sandbox.close()
    assert not root.exists()
    sandbox.close()
    with pytest.raises(SandboxError):
        sandbox.exec("true", timeout_s=5)


def test_provider_close_removes_open_sandboxes(tmp_path: Path, tree: Path) -> None:
    provider = LocalProvider(SandboxLimits(), base_dir=tmp_path / "boxes")
    assert provider.kind == "local"
    first = provider.create("m-1", tree, network=True)
    second = provider.create("m/2 weird id", tree, network=True)
    assert first.root != second.root
    assert first.root.parent == tmp_path / "boxes"
    provider.close()
    assert not first.root.exists() and not second.root.exists()


def test_create_from_a_missing_tree_fails(provider: LocalProvider, tmp_path: Path) -> None:
    with pytest.raises(SandboxError, match="not a directory"):
        provider.create("m", tmp_path / "missing", network=False)
