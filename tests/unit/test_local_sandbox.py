"""The local sandbox: command execution, timeouts, output capping, environment, file tools."""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
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


def test_close_from_another_thread_stops_a_running_command(sandbox: LocalSandbox) -> None:
    results = []
    runner = threading.Thread(
        target=lambda: results.append(sandbox.exec("sleep 60 & sleep 60; wait", timeout_s=120))
    )
    runner.start()
    deadline = time.monotonic() + 10
    while not sandbox._commands and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(0.2)
    sandbox.close()
    runner.join(15)  # a quarter of the command's own minute
    assert not runner.is_alive(), "the command outlived the sandbox"
    assert results[0].exit_code != 0 and not results[0].timed_out
    assert not sandbox.root.exists()
    gone = subprocess.run(["pgrep", "-f", "sleep 60 & sleep 60"], capture_output=True)
    assert gone.returncode == 1, gone.stdout


def test_a_command_started_while_another_thread_closes_never_outlives_the_close(
    provider: LocalProvider, tree: Path
) -> None:
    # A cancel closes from its own thread while the mission's thread may be starting a
    # command: one that registered too late used to run on, out of reach, in a removed
    # workspace. Closes land at random moments around the start; each command must end
    # with the close (refused, or stopped), never run its minute.
    marker = f"1{uuid.uuid4().int % 10**8:08d}"  # a unique sleep length to find with pgrep
    for _ in range(100):
        box = provider.create("racing", tree, network=False)
        outcome: list[object] = []

        def run(box: LocalSandbox = box, outcome: list[object] = outcome) -> None:
            try:
                outcome.append(box.exec(f"sleep {marker}", timeout_s=120))
            except SandboxError as exc:
                outcome.append(exc)

        runner = threading.Thread(target=run)
        runner.start()
        time.sleep(random.uniform(0, 0.004))
        box.close()
        runner.join(4)
        assert not runner.is_alive(), "a command started during close outlived it"
        (ended,) = outcome
        if isinstance(ended, SandboxError):
            assert "is closed" in str(ended)
        else:
            assert ended.exit_code != 0 and not ended.timed_out  # type: ignore[attr-defined]
    time.sleep(0.3)
    assert _survivors(f"sleep {marker}") == ""


def test_close_stops_a_running_service_from_another_thread(
    provider: LocalProvider, tree: Path
) -> None:
    box = provider.create("service-close", tree, network=False)
    marker = f"sleep 1{uuid.uuid4().int % 10**8:08d}"
    with box.run_service(marker, port=1, env={}, log="svc.log"):
        deadline = time.monotonic() + 10
        while _survivors(marker) == "" and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _survivors(marker) != ""
        closer = threading.Thread(target=box.close)
        closer.start()
        closer.join(10)
        # Stopped by the close itself, before the service's context ends.
        assert not closer.is_alive()
        assert _survivors(marker) == ""
    assert not box.root.exists()


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
    # The command goes on only once the callback has seen its first line: output held back
    # until the end would leave it waiting until its timeout.
    arrivals: list[str] = []

    def heard(text: str) -> None:
        arrivals.append(text)
        if "first" in text:
            (sandbox.workspace / "go-on").touch()

    result = sandbox.exec(
        "echo first; while [ ! -e go-on ]; do sleep 0.05; done; echo second",
        timeout_s=30,
        on_output=heard,
    )
    assert not result.timed_out, "the first line arrived only when the command ended"
    assert "".join(arrivals) == result.output
    assert "first" in result.output and "second" in result.output
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
    # The timeout really firing is the behaviour, so this stays a real bound, generous
    # enough for a loaded machine: without the kill the command would sleep for days.
    assert elapsed < 1 + 10
    time.sleep(0.2)
    assert _survivors(f"sleep {marker}") == ""


def test_leftover_background_processes_are_killed_when_the_command_ends(
    sandbox: LocalSandbox,
) -> None:
    marker = f"2{uuid.uuid4().int % 10**8:08d}"
    result = sandbox.exec(f"sleep {marker} & echo started", timeout_s=30)
    # It ended with the shell, not at its timeout waiting for the background sleep.
    assert not result.timed_out
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
    assert "bytes of output omitted ...]" in result.output
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


def test_switching_the_network_leaves_the_sandbox_usable(sandbox: LocalSandbox) -> None:
    # The local backend has nothing to switch; the call must not close or break it.
    sandbox.write_file("kept.txt", b"kept\n")
    sandbox.set_network(False)
    off = sandbox.exec("cat kept.txt", timeout_s=10)
    sandbox.set_network(True)
    on = sandbox.exec("cat kept.txt", timeout_s=10)
    assert (off.exit_code, off.output) == (0, "kept\n")
    assert (on.exit_code, on.output) == (0, "kept\n")


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


def test_close_removes_a_tree_deeper_than_pythons_recursion_limit(
    provider: LocalProvider, tree: Path
) -> None:
    # A hostile command can nest directories past what a recursive walk can follow: the
    # close must still remove them, not raise RecursionError out of the mission's cleanup.
    box = provider.create("deep", tree, network=False)
    deep = 'python3 -c \'import os\nfor _ in range(1500):\n    os.mkdir("d"); os.chdir("d")\''
    try:
        made = box.exec(deep, timeout_s=60)
        assert made.exit_code == 0, made.output
        box.close()
        assert not box.root.exists()
    finally:
        # Whatever failed above, no tree this deep is left for pytest's own (recursive)
        # clean-up of old temporary directories to trip over in a later run.
        subprocess.run(["rm", "-rf", "--", str(box.root)], check=False)


def test_provider_close_removes_open_sandboxes(tmp_path: Path, tree: Path) -> None:
    provider = LocalProvider(SandboxLimits(), base_dir=tmp_path / "boxes")
    assert provider.kind == "local"
    first = provider.create("m-1", tree, network=True)
    second = provider.create("m/2 weird id", tree, network=True)
    assert first.root != second.root
    assert first.root.parent == tmp_path / "boxes"
    provider.close()
    assert not first.root.exists() and not second.root.exists()


def test_provider_close_removes_every_sandbox_it_can_and_names_the_one_it_cannot(
    tmp_path: Path, tree: Path
) -> None:
    provider = LocalProvider(SandboxLimits(), base_dir=tmp_path / "boxes")
    stuck, other = (provider.create(f"m-{n}", tree, network=False) for n in (1, 2))
    # A tree that cannot be removed: its directory replaced by a link, which rmtree refuses.
    stuck.root.rename(tmp_path / "moved")
    stuck.root.symlink_to(tmp_path / "moved")
    with pytest.raises(SandboxError, match=f"could not remove the local sandbox {stuck.root}"):
        provider.close()
    assert not other.root.exists()


def test_create_from_a_missing_tree_fails(provider: LocalProvider, tmp_path: Path) -> None:
    with pytest.raises(SandboxError, match="not a directory"):
        provider.create("m", tmp_path / "missing", network=False)


# -- no survivors (SECURITY 42) ------------------------------------------------------------

SURVIVOR_DELAY_S = 1.5
"""How long a survivor waits before it writes its marker; the tests wait longer than that."""
_BODY = "sleep 1.5; echo survived > {dir}/{tag}"
SURVIVORS = {
    "setsid-env-i": f"setsid env -i /bin/sh -c '{_BODY}' {{tag}} & echo started",
    "double-fork": f"( ( /bin/sh -c '{_BODY}' {{tag}} & ) & ); echo started",
    "nohup": f"nohup /bin/sh -c '{_BODY}' {{tag}} > /dev/null 2>&1 & echo started",
    "disown": f"/bin/sh -c '{_BODY}' {{tag}} & disown; echo started",
    "python-daemon": (
        "python3 - {dir}/{tag} {tag} <<'PY'\n"
        "import os, sys, time\n"
        "if os.fork():\n    sys.exit(0)\n"
        "os.setsid()\n"
        "if os.fork():\n    os._exit(0)\n"
        "os.chdir('/')\n"
        "os.closerange(0, 3)\n"
        "time.sleep(1.5)\n"
        "open(sys.argv[1], 'w').write('survived')\n"
        "PY\n"
        "echo started"
    ),
    "renamed-as-keeper": (
        'setsid bash -c \'exec -a "sleep infinity" /bin/sh -c "' + _BODY + "\" {tag}' "
        "> /dev/null 2>&1 & echo started"
    ),
    "exit-trap": f"trap 'setsid /bin/sh -c \"{_BODY}\" {{tag}} &' EXIT; echo started",
    "fork-storm": (
        "setsid /bin/sh -c 'while :; do (" + _BODY + ") & sleep 0.05; done' {tag} "
        "> /dev/null 2>&1 & echo started"
    ),
    "kills-its-parent": f"setsid /bin/sh -c '{_BODY}' {{tag}} & kill -9 $PPID; echo started",
}
"""Ways a command's process could try to outlive it; each writes {dir}/{tag} 1.5 s later."""


def survivor_tag() -> str:
    return f"lwsurvivor{uuid.uuid4().hex[:10]}"


@pytest.fixture
def user_provider() -> Iterator[LocalProvider]:
    """A provider whose sandboxes the unprivileged sandbox user can reach (when run as root):
    a base directory under /tmp and the system toolchain only."""
    base = Path(tempfile.mkdtemp(prefix="lw-local-test-"))
    base.chmod(0o755)
    provider = LocalProvider(SandboxLimits(), base_dir=base / "boxes", path="/usr/bin:/bin")
    yield provider
    provider.close()
    shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(params=["default", "unprivileged"])
def any_provider(
    request: pytest.FixtureRequest, provider: LocalProvider, user_provider: LocalProvider
) -> LocalProvider:
    return provider if request.param == "default" else user_provider


def test_a_survivor_marker_is_written_when_the_command_waits_for_it(
    any_provider: LocalProvider, tree: Path
) -> None:
    box = any_provider.create("control", tree, network=False)
    tag = survivor_tag()
    where = box.root / "tmp"
    command = SURVIVORS["setsid-env-i"].format(dir=where, tag=tag) + "; sleep 2.5"
    result = box.exec(command, timeout_s=30)
    assert result.exit_code == 0, result.output
    assert (where / tag).read_text().strip() == "survived"  # the probe itself works


@pytest.mark.parametrize("way", sorted(SURVIVORS))
def test_no_process_outlives_its_command(any_provider: LocalProvider, tree: Path, way: str) -> None:
    """SECURITY 42: nothing a command started runs after it returned, however it detached."""
    if way == "kills-its-parent" and any_provider.isolation.run_as == "same":
        pytest.skip("a launcher of the same user can be killed by its command (see local.py)")
    box = any_provider.create(f"survivor-{way}", tree, network=False)
    tag = survivor_tag()
    where = box.root / "tmp"
    result = box.exec(SURVIVORS[way].format(dir=where, tag=tag), timeout_s=30)
    assert "started" in result.output, result.output
    assert not result.timed_out
    assert _survivors(tag) == ""
    time.sleep(SURVIVOR_DELAY_S + 1.5)
    assert not (where / tag).exists(), f"{way}: a process outlived its command"
    assert _survivors(tag) == ""


def test_a_timed_out_command_leaves_no_detached_process(
    any_provider: LocalProvider, tree: Path
) -> None:
    box = any_provider.create("survivor-timeout", tree, network=False)
    tag = survivor_tag()
    where = box.root / "tmp"
    command = SURVIVORS["setsid-env-i"].format(dir=where, tag=tag) + "; sleep 60"
    result = box.exec(command, timeout_s=0.5)
    assert result.timed_out and result.exit_code == 124
    time.sleep(SURVIVOR_DELAY_S + 1.5)
    assert not (where / tag).exists()
    assert _survivors(tag) == ""


def test_a_service_keeps_running_while_open_and_nothing_of_it_survives_close(
    any_provider: LocalProvider, tree: Path
) -> None:
    box = any_provider.create("service", tree, network=False)
    tag = survivor_tag()
    where = box.root / "tmp"
    service = f"setsid env -i /bin/sh -c 'sleep 1; echo alive > {where}/{tag}; sleep 60' {tag}"
    with box.run_service(service, port=1, env={}, log="svc.log"):
        result = box.exec("sleep 1.5; echo waited", timeout_s=30)
        assert "waited" in result.output
        assert (where / tag).read_text().strip() == "alive"
    time.sleep(0.3)
    assert _survivors(tag) == ""


# -- who runs the commands, and what they can see of Loopwright (SECURITY 44) --------------


def test_loopwright_is_not_dumpable_once_a_local_provider_exists(provider: LocalProvider) -> None:
    import ctypes

    assert provider.undumpable
    assert ctypes.CDLL(None).prctl(3, 0, 0, 0, 0) == 0  # PR_GET_DUMPABLE


@pytest.mark.skipif(os.geteuid() != 0, reason="the privilege drop applies when run as root")
def test_as_root_commands_run_as_the_sandbox_user_owning_the_workspace(
    user_provider: LocalProvider, tree: Path
) -> None:
    assert user_provider.isolation.run_as == "user"
    box = user_provider.create("as-user", tree, network=False)
    result = box.exec(
        "id -u; id -g; stat -c %u src/app.py; touch src/new && echo wrote", timeout_s=10
    )
    assert result.output.split() == ["10001", "10001", "10001", "wrote"]
    box.write_file("src/tool_written.py", b"x = 1\n")
    assert box.exec("stat -c %u src/tool_written.py src", timeout_s=10).output.split() == [
        "10001",
        "10001",
    ]


@pytest.mark.skipif(os.geteuid() != 0, reason="the fallback applies when run as root")
def test_as_root_without_a_reachable_toolchain_commands_have_no_capabilities(
    tmp_path: Path, tree: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    hidden = tmp_path / "private-toolchain"  # under pytest's 0700 directory
    hidden.mkdir()
    (hidden / "python3").symlink_to(sys.executable)
    provider = LocalProvider(SandboxLimits(), base_dir=tmp_path / "b", path=f"{hidden}:/usr/bin")
    try:
        assert provider.isolation.run_as == "nocaps"
        first = provider.create("one", tree, network=False)
        provider.create("two", tree, network=False)
        err = capsys.readouterr().err
        assert err.count("run as root without capabilities") == 1  # said once
        assert str(hidden / "python3") in err
        out = first.exec(
            "id -u; grep -E '^Cap(Eff|Prm|Bnd)' /proc/self/status", timeout_s=10
        ).output
        assert out.split() == ["0", "CapPrm:", "0" * 16, "CapEff:", "0" * 16, "CapBnd:", "0" * 16]
        # The launcher is out of the command's reach: it cannot be signalled.
        refused = first.exec("kill -9 $PPID; echo rc=$?", timeout_s=10)
        assert "Operation not permitted" in refused.output and "rc=1" in refused.output
    finally:
        provider.close()


READ_LOOPWRIGHT = (
    "for f in environ cmdline; do tr '\\0' '\\n' < /proc/{pid}/$f; done 2>&1; "
    "ls -l /proc/{pid}/fd 2>&1; cat /proc/{pid}/fd/* 2>&1 | head -c 100000; "
    "python3 - {pid} <<'PY' 2>&1\n"
    "import re, sys\n"
    "pid = sys.argv[1]\n"
    "try:\n"
    "    maps = open(f'/proc/{{pid}}/maps').read().splitlines()\n"
    "    mem = open(f'/proc/{{pid}}/mem', 'rb')\n"
    "    for line in maps:\n"
    "        lo, hi = (int(x, 16) for x in line.split()[0].split('-'))\n"
    "        if 'rw' in line.split()[1] and hi - lo < 1 << 28:\n"
    "            try:\n"
    "                mem.seek(lo); sys.stdout.write(mem.read(hi - lo).decode('latin-1'))\n"
    "            except OSError:\n"
    "                pass\n"
    "except OSError as exc:\n"
    "    print('mem:', exc)\n"
    "PY\n"
    "echo probed"
)


def test_commands_cannot_read_loopwrights_environment_memory_or_files(
    any_provider: LocalProvider,
    tree: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """SECURITY 44: the canary is in this process's environment, memory and an open file."""
    canary = "sk-CANARYlocalprocess0123456789"
    monkeypatch.setenv("LOOPWRIGHT_MODEL_API_KEY", canary)
    held = (tmp_path / "held-open").open("w+")
    held.write(f"key={canary}\n")
    held.flush()
    try:
        box = any_provider.create("probe-parent", tree, network=False)
        result = box.exec(READ_LOOPWRIGHT.format(pid=os.getpid()), timeout_s=60)
    finally:
        held.close()
    assert "probed" in result.output
    assert "CANARY" not in result.output
    assert "Permission denied" in result.output or "Operation not permitted" in result.output
