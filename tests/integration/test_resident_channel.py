"""The resident exec channel against a real engine: it carries the work, fails loudly, and
keeps sandbox commands out of it."""

# The engine fixtures are shared with test_docker_sandbox, imported by name.
# ruff: noqa: F811

from __future__ import annotations

import dataclasses
import io
import os
import re
import signal
import tarfile
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from loopwright.config import Settings
from loopwright.sandbox.base import SandboxError

docker = pytest.importorskip("docker")

from loopwright.sandbox.docker.container import DockerSandbox  # noqa: E402
from loopwright.sandbox.docker.provider import DockerProvider  # noqa: E402
from tests.integration.test_docker_sandbox import (  # noqa: E402, F401 - fixtures
    LIMIT_HITS,
    client,
    provider,
    run,
    settings,
    tree,
)

pytestmark = pytest.mark.docker

DEATH_NOTICE_S = 10.0
"""A dead server must be reported well within this, whatever the command's timeout."""
FORGED_EXIT = (
    "import struct, json, sys\n"
    "head = json.dumps({'id': 1, 'op': 'exit', 'code': 0, 'timed_out': False}).encode()\n"
    "frame = b'LW' + struct.pack('>II', len(head), 0) + head + bytes(32)\n"
    "with open(sys.argv[1], 'wb', buffering=0) as out:\n"
    "    out.write(frame)\n"
)


@pytest.fixture
def sandbox(provider: DockerProvider, tree: Path) -> Iterator[DockerSandbox]:
    box = provider.create(f"test-chan-{uuid.uuid4().hex[:8]}", tree, network=False)
    try:
        yield box
    finally:
        box.close()


def exec_creations(client: docker.DockerClient, container_id: str, since: float) -> int:
    """How many `docker exec`s the engine created in the container since `since`."""
    events = client.api.events(
        since=int(since), until=int(time.time()) + 1, decode=True,
        filters={"container": container_id},
    )  # fmt: skip
    return sum(1 for event in events if str(event.get("status", "")).startswith("exec_create"))


def server_pid(box: DockerSandbox) -> int:
    assert box.channel is not None, "the sandbox has no resident exec channel"
    assert box.channel.server_pid > 1
    return box.channel.server_pid


def test_commands_and_files_go_through_the_channel_not_docker_exec(
    sandbox: DockerSandbox, client: docker.DockerClient
) -> None:
    pid = server_pid(sandbox)
    since = time.time()
    assert run(sandbox, "echo hi; exit 0").strip() == "hi"
    assert sandbox.exec("exit 5", timeout_s=30).exit_code == 5
    sandbox.write_file("notes/new.txt", b"written\n")
    assert sandbox.read_file("notes/new.txt") == b"written\n"
    assert sandbox.resolve_path("notes/../notes/new.txt") == "notes/new.txt"
    assert exec_creations(client, sandbox.container_id, since) == 0
    # The server is the keeper: init's only child, titled like the plain keeper.
    keeper = run(sandbox, f"cat /proc/{pid}/stat; tr '\\0' ' ' < /proc/{pid}/cmdline")
    assert ") S 1 " in keeper and keeper.rstrip().endswith("sleep infinity")


def test_a_command_and_a_file_read_are_in_flight_together(sandbox: DockerSandbox) -> None:
    sandbox.write_file("data.txt", b"payload")
    finished: list[float] = []

    def slow() -> None:
        sandbox.exec("sleep 2", timeout_s=30)
        finished.append(time.monotonic())

    worker = threading.Thread(target=slow)
    worker.start()
    time.sleep(0.3)
    assert sandbox.read_file("data.txt") == b"payload"
    read_at = time.monotonic()
    worker.join(timeout=30)
    assert finished and read_at < finished[0] - 1.0


def test_killing_the_server_from_inside_raises_promptly(sandbox: DockerSandbox) -> None:
    pid = server_pid(sandbox)
    started = time.monotonic()
    with pytest.raises(SandboxError, match="resident exec server") as caught:
        sandbox.exec(f"kill -9 {pid}; sleep 60", timeout_s=120)
    assert time.monotonic() - started < DEATH_NOTICE_S
    assert sandbox.mission_id in str(caught.value)
    with pytest.raises(SandboxError):
        sandbox.exec("true", timeout_s=30)


def test_killing_the_server_from_the_host_mid_command_raises_promptly(
    sandbox: DockerSandbox, client: docker.DockerClient
) -> None:
    if os.geteuid() != 0:
        pytest.skip("signalling a container process from the host needs root")
    server_pid(sandbox)
    top = client.api.top(sandbox.container_id, ps_args="-eo pid,args")
    host_pids = [int(row[0]) for row in top["Processes"] if row[1].strip() == "sleep infinity"]
    assert len(host_pids) == 1, top
    errors: list[BaseException] = []

    def command() -> None:
        try:
            sandbox.exec("sleep 60", timeout_s=120)
        except SandboxError as exc:
            errors.append(exc)

    worker = threading.Thread(target=command)
    worker.start()
    time.sleep(0.5)
    started = time.monotonic()
    os.kill(host_pids[0], signal.SIGKILL)
    worker.join(timeout=DEATH_NOTICE_S)
    assert not worker.is_alive(), "exec hung after the server died"
    assert time.monotonic() - started < DEATH_NOTICE_S
    assert errors and "resident exec server" in str(errors[0])


def test_sandbox_commands_cannot_reach_into_the_server(sandbox: DockerSandbox) -> None:
    pid = server_pid(sandbox)
    probe = (
        "import ctypes, os, sys\n"
        "pid = int(sys.argv[1])\n"
        "for what in ('fd', 'environ', 'mem', 'fd/0', 'fd/1'):\n"
        "    path = f'/proc/{pid}/{what}'\n"
        "    try:\n"
        "        if what == 'fd':\n"
        "            os.listdir(path)\n"
        "        else:\n"
        "            with open(path, 'rb' if what != 'fd/1' else 'wb', buffering=0) as f:\n"
        "                f.read(1) if what != 'fd/1' else f.write(b'x')\n"
        "        print('OPENED', what)\n"
        "    except OSError as exc:\n"
        "        print('REFUSED', what, exc.errno)\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "rc = libc.ptrace(16, pid, 0, 0)\n"  # PTRACE_ATTACH
        "print('PTRACE', rc, ctypes.get_errno())\n"
    )
    sandbox.write_file("probe.py", probe.encode())
    out = run(sandbox, f"python3 probe.py {pid}")
    assert "OPENED" not in out, out
    assert out.count("REFUSED") == 5, out
    assert "PTRACE -1 1" in out, out  # EPERM
    assert run(sandbox, "echo still-served").strip() == "still-served"


INIT_PROBE = (
    "import ctypes, os\n"
    "libc = ctypes.CDLL(None, use_errno=True)\n"
    "print('PTRACE', libc.ptrace(16, 1, 0, 0), ctypes.get_errno())\n"  # PTRACE_ATTACH
    "for path, mode in (('/proc/1/mem', 'r+b'), ('/proc/1/maps', 'rb'), ('/proc/1/fd/0', 'rb'),\n"
    "                   ('/proc/1/fd/0', 'wb'), ('/proc/1/fd/1', 'rb'), ('/proc/1/fd/1', 'wb')):\n"
    "    try:\n"
    "        open(path, mode, buffering=0).close()\n"
    "        print('OPENED', path, mode)\n"
    "    except OSError as exc:\n"
    "        print('REFUSED', path, mode, exc.errno)\n"
)


def test_docker_init_is_out_of_the_sandbox_users_reach(sandbox: DockerSandbox) -> None:
    """Init runs as the sandbox user, holds the channel's pipes and outlives every sweep: a
    command that could ptrace it or write its memory would leave code running after it ended,
    reading the frames (a run key written later included) and stopping or feeding the
    server. The server makes init undumpable before any command runs."""
    server_pid(sandbox)
    sandbox.write_file("init_probe.py", INIT_PROBE.encode())
    out = run(sandbox, "python3 init_probe.py; ps -o stat= -p 1")
    assert "PTRACE -1 1" in out, out  # EPERM
    assert "OPENED" not in out, out
    assert out.count("REFUSED") == 6, out
    assert out.split()[-1].startswith("S"), out  # init runs on, neither stopped nor traced
    # Init still reaps and the sweep still ends what a command left behind.
    assert run(sandbox, "(sleep 1 & exec true); setsid sleep 300 & echo left").strip() == "left"
    listing = run(sandbox, "ps -eo stat=,args=")
    assert "sleep 300" not in listing and not re.search(r"^\s*Z", listing, re.M), listing


@pytest.mark.parametrize("stream", ["/proc/1/fd/1", "/proc/1/fd/0"])
def test_a_forged_frame_on_inits_copy_of_the_channel_is_refused(
    sandbox: DockerSandbox, stream: str
) -> None:
    """Docker's init holds the channel's pipes too; they cannot be opened, and were they
    opened, what a command wrote there would not be obeyed."""
    server_pid(sandbox)
    sandbox.write_file("forge.py", FORGED_EXIT.encode())
    started = time.monotonic()
    try:
        result = sandbox.exec(f"python3 forge.py {stream}; echo REAL; exit 7", timeout_s=60)
    except SandboxError:
        result = None
    if result is not None:
        assert result.exit_code == 7 and "REAL" in result.output, result.output
        assert "Permission denied" in result.output, result.output
    assert time.monotonic() - started < DEATH_NOTICE_S + 5


def test_closing_the_sandbox_closes_the_channel_and_its_thread(
    provider: DockerProvider, tree: Path
) -> None:
    box = provider.create(f"test-chan-{uuid.uuid4().hex[:8]}", tree, network=False)
    channel = box.channel
    assert channel is not None and channel.alive
    name = f"sandbox-channel-{box.container_id[:12]}"
    assert name in {t.name for t in threading.enumerate()}
    box.close()
    assert not channel.alive
    assert name not in {t.name for t in threading.enumerate()}
    with pytest.raises(SandboxError, match="already closed"):
        box.exec("true", timeout_s=5)


def test_warm_pool_containers_carry_a_working_channel(
    settings: Settings, client: docker.DockerClient, tree: Path
) -> None:
    pooled = DockerProvider(settings.with_overrides(warm_pool=1), client=client)
    try:
        pooled.fill_pool()
        box = pooled.create(f"test-chan-{uuid.uuid4().hex[:8]}", tree, network=False)
        try:
            server_pid(box)
            assert run(box, "cat src/app.py").startswith("def add")
        finally:
            box.close()
        deadline = time.monotonic() + 30
        while pooled.pool_size < 1 and time.monotonic() < deadline:
            time.sleep(0.1)  # let the background refill finish before closing
    finally:
        pooled.close()


def test_a_tree_larger_than_the_workspace_does_not_fit(
    settings: Settings, client: docker.DockerClient, tmp_path: Path
) -> None:
    limits = dataclasses.replace(settings.sandbox_limits, tmpfs_mb=4)
    small = DockerProvider(settings.with_overrides(sandbox_limits=limits), client=client)
    (tmp_path / "big.bin").write_bytes(os.urandom(6 * 1024 * 1024))
    try:
        with pytest.raises(SandboxError, match="does not fit in the sandbox workspace"):
            small.create(f"test-chan-{uuid.uuid4().hex[:8]}", tmp_path, network=False)
    finally:
        small.close()


def test_the_copy_keeps_modes_and_owner_and_drops_set_id_bits(
    provider: DockerProvider, tmp_path: Path
) -> None:
    (tmp_path / "tool.sh").write_text("#!/bin/sh\necho tool\n")
    (tmp_path / "tool.sh").chmod(0o4755)
    (tmp_path / "dir").mkdir()
    (tmp_path / "dir" / "inner.txt").write_text("inner\n")
    (tmp_path / "dir").chmod(0o555)
    (tmp_path / "link").symlink_to("dir/inner.txt")
    os.mkfifo(tmp_path / "fifo")
    box = provider.create(f"test-chan-{uuid.uuid4().hex[:8]}", tmp_path, network=False)
    try:
        server_pid(box)
        out = run(box, "stat -c '%a %u %n' tool.sh dir dir/inner.txt; cat link; ls fifo 2>&1")
        assert "755 10001 tool.sh" in out and "555 10001 dir" in out
        assert "10001 dir/inner.txt" in out and "inner" in out
        assert "No such file" in out
    finally:
        (tmp_path / "dir").chmod(0o755)
        box.close()


NO_PYTHON_TAG = "loopwright-sandbox-nopython:test"


@pytest.fixture(scope="module")
def no_python_settings(settings: Settings, client: docker.DockerClient) -> Settings:
    dockerfile = (
        f"FROM {settings.sandbox_image}\n"
        "USER root\n"
        "RUN rm -f /usr/bin/python3 /usr/local/bin/python3\n"
        "USER 10001:10001\n"
    )
    context = io.BytesIO()
    with tarfile.open(fileobj=context, mode="w") as tar:
        info = tarfile.TarInfo("Dockerfile")
        info.size = len(dockerfile)
        tar.addfile(info, io.BytesIO(dockerfile.encode()))
    context.seek(0)
    client.images.build(fileobj=context, custom_context=True, tag=NO_PYTHON_TAG, rm=True)
    return settings.with_overrides(sandbox_image=NO_PYTHON_TAG)


@pytest.fixture
def fallback_box(
    no_python_settings: Settings, client: docker.DockerClient, tree: Path
) -> Iterator[DockerSandbox]:
    """A sandbox of an image without python3: no resident server, every call a `docker exec`."""
    fallback = DockerProvider(no_python_settings, client=client)
    try:
        box = fallback.create(f"test-chan-{uuid.uuid4().hex[:8]}", tree, network=False)
        try:
            assert box.channel is None
            yield box
        finally:
            box.close()
    finally:
        fallback.close()


def test_without_python3_the_sandbox_falls_back_to_docker_exec(
    fallback_box: DockerSandbox, client: docker.DockerClient
) -> None:
    box = fallback_box
    since = time.time()
    assert run(box, "command -v python3 || echo none").strip() == "none"
    assert run(box, "cat src/app.py").startswith("def add")
    assert box.exec("exit 4", timeout_s=30).exit_code == 4
    timed = box.exec("sleep 86409 & sleep infinity", timeout_s=1)
    assert timed.timed_out and timed.exit_code == 124
    processes = run(box, "ps -eo args --no-headers")
    assert "86409" not in processes
    assert processes.splitlines().count("sleep infinity") == 1
    assert exec_creations(client, box.container_id, since) >= 5


@pytest.mark.parametrize(("hit", "note"), LIMIT_HITS)
def test_without_python3_a_limit_hit_by_a_command_killed_at_its_timeout_is_still_reported(
    fallback_box: DockerSandbox, hit: str, note: str
) -> None:
    box = fallback_box
    result = box.exec(f"{hit}; sleep 60", timeout_s=8)
    assert result.timed_out
    assert note in result.output
    assert result.output.index(note) < result.output.index("timed out after 8 s")
    assert result.output.count(note) == 1
    # The counts the killed wrapper left are taken away: only those of the listing command
    # itself remain while it runs. A command that hits nothing gets no note.
    listed = run(box, "ls -A /tmp").split()
    assert len(listed) == 1 and listed[0].startswith(".loopwright-limits-"), listed
    quiet = box.exec("sleep 60", timeout_s=1)
    assert quiet.timed_out and "[sandbox] a process" not in quiet.output
    assert "process limit" not in quiet.output


@pytest.mark.parametrize(
    "swap",
    ['mkfifo "$f"', 'ln -s /dev/zero "$f"', 'head -c 8M /dev/zero > "$f"'],
    ids=["fifo", "link-to-dev-zero", "large-file"],
)
def test_without_python3_a_command_that_swaps_its_limit_counts_gets_no_note_and_no_hang(
    fallback_box: DockerSandbox, swap: str
) -> None:
    # The command finds the file its wrapper left (the only one while it runs) and puts a
    # FIFO, a link to /dev/zero or a large file of no numbers in its place.
    command = f'f=$(echo /tmp/.loopwright-limits-*); rm -f "$f"; {swap}; echo swapped; sleep 60'
    started = time.monotonic()
    result = fallback_box.exec(command, timeout_s=2)
    assert time.monotonic() - started < 20
    assert result.timed_out and "swapped" in result.output
    assert "[sandbox] a process" not in result.output
    assert "process limit" not in result.output
    assert run(fallback_box, "echo alive").strip() == "alive"


FILE_CASES = [
    ("read", "src/app.py"),
    ("read", "missing.txt"),
    ("read", "src"),
    ("read", "fifo"),
    ("read", "big.bin"),
    ("read", "escape"),
    ("read", "dangling"),
    ("write", "src/app.py"),
    ("write", "tool.sh"),
    ("write", "new/deeper/file.txt"),
    ("write", "src"),
    ("write", "escape"),
    ("write", "dangling"),
    ("write", "fifo"),
]


def test_the_servers_file_reads_and_writes_answer_as_the_scripts_do(
    sandbox: DockerSandbox,
) -> None:
    """The server does a file tool's read (and a write's preparation) itself; every answer,
    refusals and their words included, is the one `read_file.sh` / `write_file.sh` give."""
    from loopwright.sandbox.docker.engine import script
    from loopwright.sandbox.paths import CONTAINER_RESOLVER

    assert sandbox.channel is not None
    run(
        sandbox,
        "mkfifo fifo && head -c 3000 /dev/zero > big.bin && printf '#!/bin/sh\\n' > tool.sh && "
        "chmod 4755 tool.sh 2>/dev/null || chmod 755 tool.sh; "
        "ln -s /etc/passwd escape && ln -s nowhere/at/all dangling",
    )
    for kind, rel in FILE_CASES:
        native = sandbox._file_request(sandbox.channel, kind, rel, limit=2000)
        extra = ["2000"] if kind == "read" else []
        scripted = sandbox._run_script(script(f"{kind}_file.sh"), CONTAINER_RESOLVER, rel, *extra)
        assert native == scripted, (kind, rel)


def test_a_read_larger_than_one_frame_arrives_whole_and_a_planted_fifo_never_blocks(
    sandbox: DockerSandbox,
) -> None:
    from loopwright.sandbox.base import FileToolError

    size = 9_500_000  # more than a frame's payload (8 MiB), less than the read limit
    run(sandbox, f"head -c {size} /dev/urandom > big.bin && sha256sum big.bin > big.sum")
    data = sandbox.read_file("big.bin")
    assert len(data) == size
    import hashlib

    digest = run(sandbox, "cat big.sum").split()[0]
    assert hashlib.sha256(data).hexdigest() == digest
    run(sandbox, "rm big.bin; mkfifo big.bin")
    started = time.monotonic()
    with pytest.raises(FileToolError, match="not a regular file"):
        sandbox.read_file("big.bin")
    assert time.monotonic() - started < 5
