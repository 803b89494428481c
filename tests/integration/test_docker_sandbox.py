"""The Docker sandbox against a real engine: hardening, limits, egress, secrets, file confinement.

These run in CI (which starts the engine); on a machine without Docker they skip, but never
when CI is set.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import os
import select
import socket
import subprocess
import sys
import tarfile
import threading
import time
import urllib.parse
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from loopwright.config import SandboxLimits, Settings
from loopwright.request import MissionRequest
from loopwright.sandbox.base import MISSION_LABEL, FileToolError, SandboxError
from loopwright.sandbox.claims import CLAIM_DIR, CLAIM_FILE, SandboxClaim
from loopwright.store import Store, migrate

docker = pytest.importorskip("docker")

from loopwright.sandbox.docker.claim_file import abandoned, read_claim  # noqa: E402
from loopwright.sandbox.docker.container import DockerSandbox  # noqa: E402
from loopwright.sandbox.docker.engine import OWNER_LABEL, POOL_LABEL  # noqa: E402
from loopwright.sandbox.docker.provider import DockerProvider  # noqa: E402
from loopwright.sandbox.docker.reaper import owner_id, reap_abandoned, reap_volumes  # noqa: E402
from loopwright.sandbox.image import doctor, ensure_image  # noqa: E402
from tests.unit.test_local_sandbox import SURVIVOR_DELAY_S, SURVIVORS, survivor_tag  # noqa: E402

pytestmark = pytest.mark.docker

LIMITS = SandboxLimits(memory_mb=256, pids=128, cpus=1.0, tmpfs_mb=64, output_cap_bytes=65536)
CANARIES = {
    "LOOPWRIGHT_MODEL_API_KEY": "sk-CANARY0123456789abcdef",
    "GITHUB_TOKEN": "ghs_CANARY0123456789abcdef",
}
# Name lookups must fail fast rather than wait out the resolver's default retries.
FAST_DNS = "RES_OPTIONS='timeout:1 attempts:1'"
PROBE = r"""
import socket, sys
target = sys.argv[1]
try:
    if ":" in target:
        host, port = target.rsplit(":", 1)
        socket.create_connection((host, int(port)), timeout=3).close()
    else:
        socket.getaddrinfo(target, 443)
    print("REACHED", target)
except OSError as exc:
    print("FAILED", target, type(exc).__name__, exc)
"""


def _labelled(client: docker.DockerClient) -> set[str]:
    return {c["Id"] for c in client.api.containers(all=True, filters={"label": MISSION_LABEL})}


@pytest.fixture(scope="session")
def client() -> Iterator[docker.DockerClient]:
    try:
        engine = docker.from_env(version="auto")
        engine.ping()
    except docker.errors.DockerException as exc:
        message = f"the Docker engine is unreachable ({exc}); start it with `dockerd &`"
        if os.environ.get("CI"):
            pytest.fail(f"CI=true but {message}: Docker tests must run in CI", pytrace=False)
        pytest.skip(message)
    yield engine
    engine.close()


@pytest.fixture(scope="session")
def settings(client: docker.DockerClient) -> Settings:
    # An image built under another tag (tests/conftest.py's KEPT_SETTINGS) is honoured here too.
    image = os.environ.get("LOOPWRIGHT_SANDBOX_IMAGE") or Settings().sandbox_image
    base = Settings(sandbox_limits=LIMITS, network="none", sandbox_image=image)
    ensure_image(client, base, lambda line: None)
    return base


@pytest.fixture(scope="module")
def provider(settings: Settings, client: docker.DockerClient) -> Iterator[DockerProvider]:
    p = DockerProvider(settings, client=client)
    yield p
    p.close()


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("repo")
    (root / "src").mkdir()
    (root / "src" / "app.py").write_text("def add(a, b):\n    return a + b\n")
    (root / "run.sh").write_text("#!/bin/sh\necho ran\n")
    (root / "run.sh").chmod(0o755)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return root


@pytest.fixture
def sandbox(provider: DockerProvider, tree: Path) -> Iterator[DockerSandbox]:
    box = provider.create(f"test-{uuid.uuid4().hex[:8]}", tree, network=False)
    try:
        yield box
    finally:
        box.close()


def run(box: DockerSandbox, command: str, timeout_s: float = 30) -> str:
    result = box.exec(command, timeout_s=timeout_s)
    assert not result.timed_out, result.output
    return result.output


# -- hardening ------------------------------------------------------------------------------


def test_docker_inspect_shows_the_hardening(
    sandbox: DockerSandbox, client: docker.DockerClient
) -> None:
    info = client.api.inspect_container(sandbox.container_id)
    host = info["HostConfig"]
    assert host["CapDrop"] == ["ALL"]
    assert not host["CapAdd"]
    assert "no-new-privileges" in host["SecurityOpt"]
    assert not any("seccomp" in opt for opt in host["SecurityOpt"])  # the default profile
    assert host["ReadonlyRootfs"] is True
    assert host["Privileged"] is False
    assert host["Init"] is True
    assert host["PidsLimit"] == LIMITS.pids
    assert host["Memory"] == LIMITS.memory_mb * 1024 * 1024
    assert host["MemorySwap"] == host["Memory"]
    assert host["NanoCpus"] == int(LIMITS.cpus * 1e9)
    assert host["NetworkMode"] == "none"
    assert "size=64m" in host["Tmpfs"]["/tmp"] and "noexec" not in host["Tmpfs"]["/tmp"]
    assert "size=64m" in host["Tmpfs"]["/home/sandbox"]
    assert not host["Binds"]
    assert info["Config"]["User"] == "10001:10001"
    assert info["Config"]["Labels"][MISSION_LABEL] == sandbox.mission_id
    assert [m["Type"] for m in info["Mounts"]] == ["volume"]
    assert info["Mounts"][0]["Destination"] == "/workspace"
    assert "docker.sock" not in json.dumps(info)
    volume = client.api.inspect_volume(info["Mounts"][0]["Name"])
    assert volume["Options"]["type"] == "tmpfs" and "size=64m" in volume["Options"]["o"]
    assert run(sandbox, "id -u; id -g; pwd").split() == ["10001", "10001", "/workspace"]


def test_root_filesystem_is_read_only_and_tmp_is_executable(sandbox: DockerSandbox) -> None:
    out = run(sandbox, "touch /etc/x 2>&1; touch /usr/x 2>&1; printf '#!/bin/sh\\necho exec-ok\\n'"
              " > /tmp/t.sh && chmod +x /tmp/t.sh && /tmp/t.sh")  # fmt: skip
    assert out.count("Read-only file system") == 2
    assert "exec-ok" in out


# -- commands ---------------------------------------------------------------------------


def test_exec_streams_output_and_reports_the_exit_code(sandbox: DockerSandbox) -> None:
    chunks: list[str] = []
    result = sandbox.exec(
        "cat src/app.py; echo to-stderr >&2; exit 3", timeout_s=30, on_output=chunks.append
    )
    assert result.exit_code == 3 and not result.ok and not result.timed_out
    assert "return a + b" in result.output and "to-stderr" in result.output
    assert "".join(chunks) == result.output


def test_output_is_capped_keeping_head_and_tail(sandbox: DockerSandbox) -> None:
    result = sandbox.exec("seq 1 200000", timeout_s=30)
    assert result.truncated and result.exit_code == 0
    assert result.output.startswith("1\n2\n3\n")
    assert result.output.rstrip().endswith("199999\n200000")
    assert "bytes of output omitted" in result.output
    assert len(result.output.encode()) < LIMITS.output_cap_bytes + 200


def test_sleep_forever_is_ended_by_the_timeout_with_no_process_left(
    sandbox: DockerSandbox,
) -> None:
    result = sandbox.exec(
        "sleep 86401 & (sleep 86402 &) ; setsid sleep 86403 & sleep infinity", timeout_s=2
    )
    assert result.timed_out and result.exit_code == 124
    assert "timed out" in result.output
    processes = run(sandbox, "ps -eo args --no-headers")
    assert "8640" not in processes
    assert processes.splitlines().count("sleep infinity") == 1  # the container's keep-alive


def test_background_jobs_do_not_outlive_their_command(sandbox: DockerSandbox) -> None:
    result = sandbox.exec("sleep 86404 & echo started", timeout_s=30)
    assert result.exit_code == 0 and "started" in result.output
    assert "86404" not in run(sandbox, "ps -eo args --no-headers")


def test_fork_bomb_hits_the_pids_limit_and_the_sandbox_recovers(sandbox: DockerSandbox) -> None:
    result = sandbox.exec("bomb() { bomb | bomb & }; bomb; sleep 5", timeout_s=20)
    assert "process limit (128) was reached" in result.output
    assert run(sandbox, "echo alive").strip() == "alive"
    assert int(run(sandbox, "ps -e --no-headers | wc -l")) < 10
    assert subprocess.run(["true"], check=False).returncode == 0  # the host can still fork


LIMIT_HITS = [
    pytest.param(
        "bomb() { bomb | bomb & }; bomb", "the process limit (128) was reached: fork failed",
        id="pids",
    ),
    # A subshell holds the whole stream in memory and is killed, not the command itself
    # (no python3 needed: the `docker exec` path's image has none).
    pytest.param(
        "( x=$(head -c 400M /dev/zero | tr '\\0' x) )",
        "killed by the out-of-memory killer (limit 256 MB)",
        id="memory",
    ),
]  # fmt: skip
"""Commands that hit a limit and go on, with the note the output must then end with."""


@pytest.mark.parametrize(("hit", "note"), LIMIT_HITS)
def test_a_limit_hit_by_a_command_killed_at_its_timeout_is_still_reported(
    sandbox: DockerSandbox, hit: str, note: str
) -> None:
    assert sandbox.channel is not None  # the `docker exec` path: test_resident_channel.py
    result = sandbox.exec(f"{hit}; sleep 60", timeout_s=8)
    assert result.timed_out
    assert note in result.output
    assert result.output.index(note) < result.output.index("timed out after 8 s")
    assert result.output.count(note) == 1
    assert run(sandbox, "echo alive").strip() == "alive"


def test_a_command_killed_at_its_timeout_without_hitting_a_limit_names_none(
    sandbox: DockerSandbox,
) -> None:
    result = sandbox.exec("sleep 60", timeout_s=1)
    assert result.timed_out
    assert "[sandbox] timed out after 1 s" in result.output
    assert "process limit" not in result.output and "out-of-memory" not in result.output


def test_memory_hog_is_oom_killed_and_reported(sandbox: DockerSandbox) -> None:
    hog = "python3 -c 'a = []\nwhile True: a.append(b\"x\" * (16 << 20))'"
    result = sandbox.exec(hog, timeout_s=60)
    assert result.exit_code == 137 and not result.timed_out
    assert "out-of-memory" in result.output
    assert run(sandbox, "echo alive").strip() == "alive"


def test_disk_filler_is_bounded_by_the_tmpfs_size(sandbox: DockerSandbox) -> None:
    for where in ("/workspace", "/tmp", "/home/sandbox"):
        result = sandbox.exec(f"dd if=/dev/zero of={where}/fill bs=1M count=500", timeout_s=60)
        assert result.exit_code != 0 and "No space left" in result.output, where
        size = int(run(sandbox, f"stat -c %s {where}/fill"))
        assert size <= LIMITS.tmpfs_mb * 1024 * 1024
        run(sandbox, f"rm -f {where}/fill")


# -- network ------------------------------------------------------------------------------


def probe(box: DockerSandbox, target: str) -> str:
    return run(box, f"{FAST_DNS} python3 -c '{PROBE}' {target}")


def _no_egress(box: DockerSandbox) -> None:
    for target in ("1.1.1.1:443", "169.254.169.254:80", "example.com"):
        assert probe(box, target).startswith("FAILED"), target
    routes = run(box, "cat /proc/net/route").splitlines()[1:]
    assert not routes


def test_no_egress_while_the_network_is_off(sandbox: DockerSandbox) -> None:
    _no_egress(sandbox)


def apt_mirror() -> tuple[str, int]:
    """Host and port of the Debian mirror this host's apt is configured with (read the same
    way the offline image bootstrap reads it): the setup phase must reach what the operator
    configured, so that is what the reachability probe connects to."""
    script = Path(__file__).resolve().parents[2] / "deploy/sandbox/bootstrap-base.sh"
    listed = subprocess.run(
        ["bash", str(script), "--print-sources"], capture_output=True, text=True, check=False
    )
    if listed.returncode != 0:
        pytest.skip(f"no Debian mirror in this host's apt configuration: {listed.stderr}")
    uri = listed.stdout.split()[1]
    parts = urllib.parse.urlsplit(uri)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        pytest.skip(f"the configured mirror {uri} is not reached over the network")
    return parts.hostname, parts.port or (443 if parts.scheme == "https" else 80)


def test_setup_phase_has_a_network_and_turning_it_off_removes_it(
    provider: DockerProvider, tree: Path
) -> None:
    host, port = apt_mirror()
    box = provider.create(f"test-net-{uuid.uuid4().hex[:8]}", tree, network=True)
    try:
        routes = run(box, "cat /proc/net/route")
        assert "00000000" in routes  # a default route exists while setting up
        # Through the mirror the operator configured: DNS and a TCP connection both work.
        assert probe(box, f"{host}:{port}").startswith("REACHED")
        box.set_network(False)
        _no_egress(box)
        box.set_network(True)
        assert "00000000" in run(box, "cat /proc/net/route")
        box.set_network(False)
        _no_egress(box)
    finally:
        box.close()


def test_a_sandbox_created_offline_can_be_connected_for_setup(sandbox: DockerSandbox) -> None:
    sandbox.set_network(True)
    assert "00000000" in run(sandbox, "cat /proc/net/route")
    sandbox.set_network(False)
    _no_egress(sandbox)


def test_a_setup_network_name_held_twice_is_settled_on_the_oldest(
    provider: DockerProvider, tree: Path, client: docker.DockerClient
) -> None:
    """Processes creating the network at one moment can leave two of its name (the engine's
    duplicate check is best effort), after which every lookup by name fails as ambiguous."""
    from loopwright.sandbox.docker.engine import NETWORK_NAME
    from loopwright.sandbox.docker.network import sandbox_network

    first = sandbox_network(client)
    twin = client.networks.create(NETWORK_NAME, driver="bridge", check_duplicate=False)
    try:
        assert sandbox_network(client).id == first.id
        with pytest.raises(docker.errors.NotFound):
            client.networks.get(str(twin.id))  # unused, so removed
        box = provider.create(f"test-twin-{uuid.uuid4().hex[:8]}", tree, network=True)
        try:
            assert "00000000" in run(box, "cat /proc/net/route")
            box.set_network(False)
            _no_egress(box)
        finally:
            box.close()
    finally:
        with contextlib.suppress(docker.errors.NotFound):
            client.api.remove_network(str(twin.id))


def test_a_network_of_the_setup_name_that_loopwright_did_not_make_is_refused(
    client: docker.DockerClient,
) -> None:
    """Read from networks the engine really made: only the one with ICC off and the label
    passes; one made another way (ICC on, no label) would let sandboxes reach each other."""
    from loopwright.sandbox.docker.network import network_problem, sandbox_network

    assert network_problem(sandbox_network(client).attrs) is None
    name = f"loopwright-test-rogue-{uuid.uuid4().hex[:8]}"
    rogue = client.networks.create(name, driver="bridge")
    try:
        rogue.reload()
        assert "label" in (network_problem(rogue.attrs) or "")
        labelled = client.networks.create(
            name + "-l", driver="bridge", labels={"loopwright.network": "sandbox"}
        )
        try:
            labelled.reload()
            assert "enable_icc" in (network_problem(labelled.attrs) or "")
        finally:
            labelled.remove()
    finally:
        rogue.remove()


# -- secrets ------------------------------------------------------------------------------


def test_host_secrets_are_not_visible_inside(
    provider: DockerProvider,
    tree: Path,
    client: docker.DockerClient,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name, value in CANARIES.items():
        monkeypatch.setenv(name, value)
    box = provider.create(f"test-canary-{uuid.uuid4().hex[:8]}", tree, network=False)
    try:
        out = run(
            box,
            "env; tr '\\0' '\\n' < /proc/1/environ; tr '\\0' '\\n' < /proc/self/environ; "
            "cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n'; git config -l 2>&1",
        )
        assert "CANARY" not in out
        assert "PATH=" in out and "CI=true" in out
        env = client.api.inspect_container(box.container_id)["Config"]["Env"]
        assert not any("CANARY" in item for item in env)
        names = {item.partition("=")[0] for item in env}
        assert names <= {"PATH", "HOME", "LANG", "CI"}
        with pytest.raises(FileToolError):
            box.read_file("/proc/self/environ")
    finally:
        box.close()


# -- files --------------------------------------------------------------------------------


def test_write_and_read_files_as_the_sandbox_user(sandbox: DockerSandbox) -> None:
    sandbox.write_file("new/deep/file.txt", b"hello\x00\xff")
    assert sandbox.read_file("new/deep/file.txt") == b"hello\x00\xff"
    assert run(sandbox, "stat -c %u:%g new/deep/file.txt new/deep").split() == [
        "10001:10001",
        "10001:10001",
    ]
    sandbox.write_file("run.sh", b"#!/bin/sh\necho changed\n")
    assert run(sandbox, "./run.sh").strip() == "changed"  # the executable bit survived
    assert sandbox.read_file("src/app.py").startswith(b"def add")


def test_write_file_makes_parents_deeper_than_the_recursion_limit(sandbox: DockerSandbox) -> None:
    """The resident made a file's parents with `os.makedirs`, which recurses once a level:
    at 1,500 it answered "maximum recursion depth exceeded". The local sandbox writes there."""
    deep = "d/" * 1500 + "leaf.txt"
    sandbox.write_file(deep, b"deep\n")
    assert sandbox.read_file(deep) == b"deep\n"
    assert run(sandbox, f"stat -c %u {'d/' * 1500}").split() == ["10001"]


def test_symlinks_cannot_take_file_tools_outside_the_workspace(
    sandbox: DockerSandbox, tmp_path: Path
) -> None:
    sentinel = tmp_path / "sentinel.txt"
    sentinel.write_text("host sentinel\n")
    before = sentinel.stat()
    run(
        sandbox,
        f"ln -s / root; ln -s /etc/passwd passwd; ln -s /nonexistent/file dangling; "
        f"ln -s {sentinel} host; ln -s ../.. up",
    )
    refused_reads = [
        "root/etc/passwd", "passwd", "up/etc/passwd", "../../etc/passwd", "/etc/passwd",
        "/proc/self/environ", "host", str(sentinel), "a\x00b", "root",
    ]  # fmt: skip
    for path in refused_reads:
        with pytest.raises(FileToolError):
            sandbox.read_file(path)
    refused_writes = [
        "dangling", "root/tmp/x", "passwd", "host", str(sentinel), "../x", "up/tmp/x", "a\x00b",
    ]  # fmt: skip
    for path in refused_writes:
        with pytest.raises(FileToolError):
            sandbox.write_file(path, b"owned\n")
    assert sentinel.read_text() == "host sentinel\n"
    assert sentinel.stat().st_mtime_ns == before.st_mtime_ns
    assert "owned" not in run(sandbox, "cat /etc/passwd; ls /tmp")


# -- lifecycle ----------------------------------------------------------------------------


def test_close_is_idempotent_and_removes_container_and_volume(
    provider: DockerProvider, tree: Path, client: docker.DockerClient
) -> None:
    box = provider.create(f"test-close-{uuid.uuid4().hex[:8]}", tree, network=False)
    volume = client.api.inspect_container(box.container_id)["Mounts"][0]["Name"]
    box.close()
    box.close()
    with pytest.raises(docker.errors.NotFound):
        client.api.inspect_container(box.container_id)
    with pytest.raises(docker.errors.NotFound):
        client.api.inspect_volume(volume)
    with pytest.raises(SandboxError):
        box.exec("true", timeout_s=5)


def test_interrupt_during_a_command_still_lets_close_clean_up(
    provider: DockerProvider, tree: Path, client: docker.DockerClient
) -> None:
    box = provider.create(f"test-int-{uuid.uuid4().hex[:8]}", tree, network=False)

    def interrupt(text: str) -> None:
        raise KeyboardInterrupt

    try:
        with pytest.raises(KeyboardInterrupt):
            box.exec("echo first; sleep 30", timeout_s=60, on_output=interrupt)
    finally:
        box.close()
    with pytest.raises(docker.errors.NotFound):
        client.api.inspect_container(box.container_id)


def test_a_dead_container_raises_sandbox_error(
    sandbox: DockerSandbox, client: docker.DockerClient
) -> None:
    client.api.kill(sandbox.container_id)
    with pytest.raises(SandboxError, match="died or is unusable"):
        sandbox.exec("true", timeout_s=5)


def test_missing_image_says_how_to_build_it(settings: Settings, tree: Path) -> None:
    missing = DockerProvider(settings.with_overrides(sandbox_image="loopwright-missing:none"))
    try:
        with pytest.raises(SandboxError, match="loopwright sandbox build"):
            missing.create("test-missing", tree, network=False)
    finally:
        missing.close()


def test_reap_orphans_removes_containers_of_missions_no_longer_running(
    settings: Settings, tree: Path, client: docker.DockerClient
) -> None:
    crashed = DockerProvider(settings, client=client)
    orphan = crashed.create(f"test-orphan-{uuid.uuid4().hex[:8]}", tree, network=False)
    live = crashed.create(f"test-live-{uuid.uuid4().hex[:8]}", tree, network=False)
    try:
        restarted = DockerProvider(settings, client=client)  # knows nothing of either
        removed = restarted.reap_orphans({live.mission_id})
        assert orphan.container_id in removed
        assert live.container_id not in removed
        with pytest.raises(docker.errors.NotFound):
            client.api.inspect_container(orphan.container_id)
        assert run(live, "echo alive").strip() == "alive"
        restarted.close()
    finally:
        orphan.close()
        live.close()
        crashed.close()


def _pool_containers(client: docker.DockerClient, owner: str | None = None) -> set[str]:
    """Pool containers on the engine (of the process `owner` names, when given)."""
    labels = [POOL_LABEL] if owner is None else [POOL_LABEL, f"{OWNER_LABEL}={owner}"]
    listed = client.api.containers(all=True, filters={"label": labels})
    return {str(c["Id"]) for c in listed}


def test_warm_pool_acquire_hands_out_a_pooled_container_that_works(
    settings: Settings, tree: Path, client: docker.DockerClient
) -> None:
    pooled = DockerProvider(settings.with_overrides(warm_pool=2), client=client)
    try:
        pooled.fill_pool()
        assert pooled.pool_size == 2
        waiting = _pool_containers(client)
        box = pooled.create(f"test-warm-{uuid.uuid4().hex[:8]}", tree, network=False)
        try:
            # One of the started pool containers, not a cold start.
            assert box.container_id in waiting
            assert "return a + b" in run(box, "cat src/app.py")
            _no_egress(box)
            pooled.reap_orphans({box.mission_id})  # must keep both the claimed and idle ones
            assert run(box, "echo alive").strip() == "alive"
        finally:
            box.close()
        deadline = time.monotonic() + 30
        while pooled.pool_size < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert pooled.pool_size == 2  # refilled in the background
    finally:
        pooled.close()


def _claim_file(client: docker.DockerClient, container_id: str) -> tuple[str, str]:
    """The claim file's contents and its `stat` (owner uid, mode), read as an operator would."""
    out = subprocess.run(
        ["docker", "exec", container_id, "sh", "-c",
         f"cat {CLAIM_FILE}; stat -c '%u %a' {CLAIM_DIR} {CLAIM_FILE}"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    claim, _, stats = out.partition("\n")
    return claim, stats.strip()


def test_a_claimed_pool_container_names_its_mission_in_a_file_the_sandbox_user_cannot_change(
    settings: Settings, tree: Path, client: docker.DockerClient, tmp_path: Path
) -> None:
    migrate(f"sqlite:///{tmp_path / 'claims.db'}")
    store = Store(f"sqlite:///{tmp_path / 'claims.db'}")
    pooled = DockerProvider(settings.with_overrides(warm_pool=1), client=client, ledger=store)
    mission = f"test-claim-{uuid.uuid4().hex[:8]}"
    try:
        pooled.fill_pool()
        waiting = _pool_containers(client)
        box = pooled.create(mission, tree, network=False)
        try:
            assert box.container_id in waiting
            labels = client.api.inspect_container(box.container_id)["Config"]["Labels"]
            assert labels[MISSION_LABEL].startswith("pool-")  # the contract's key, pool value
            text, stats = _claim_file(client, box.container_id)
            claim = SandboxClaim.from_json(text)
            assert claim is not None, text
            assert (claim.container_id, claim.mission_id) == (box.container_id, mission)
            assert claim.owner == labels["loopwright.owner"]
            assert stats.split("\n") == ["0 755", "0 644"]
            assert store.claim_of(box.container_id) == claim
            assert pooled.pool_claims == 1
            # uid 10001 can read it but neither change, replace, remove nor hide it.
            attempts = run(
                box,
                f"id -u; cat {CLAIM_FILE} >/dev/null && echo readable; "
                f"echo forged > {CLAIM_FILE} || echo no-write; "
                f"rm -f {CLAIM_FILE} || echo no-rm; "
                f"mv {CLAIM_DIR} /tmp/elsewhere || echo no-mv; "
                f"rm -rf {CLAIM_DIR} || echo no-rmdir; "
                f"chmod 777 {CLAIM_DIR} || echo no-chmod; "
                f"touch {CLAIM_DIR}/other || echo no-touch; "
                f"ln -sf /workspace {CLAIM_DIR}/claim.json || echo no-ln; "
                "rm -rf /tmp/* /tmp/.[!.]* 2>/dev/null; true",
            )
            assert attempts.split()[0] == "10001", attempts
            for refused in ("readable", "no-write", "no-rm", "no-mv", "no-rmdir", "no-chmod",
                            "no-touch", "no-ln"):  # fmt: skip
                assert refused in attempts, attempts
            assert _claim_file(client, box.container_id) == (text, stats)
            # A second provider (a restarted process) knows nothing of the claim in memory:
            # it judges the container by the mission the file names.
            other = DockerProvider(settings, client=client)
            try:
                assert box.container_id not in other.reap_orphans({mission})
                assert run(box, "echo alive").strip() == "alive"
                # A stopped container cannot be asked: the ledger answers.
                client.api.stop(box.container_id, timeout=1)
                keeper = DockerProvider(settings, client=client, ledger=store)
                try:
                    assert box.container_id not in keeper.reap_orphans({mission})
                finally:
                    keeper.close()
                # Neither file nor ledger: a pool value matches no mission, so it goes.
                assert box.container_id in other.reap_orphans({mission})
            finally:
                other.close()
        finally:
            box.close()
    finally:
        pooled.close()
        store.close()


def test_an_idle_pool_container_holds_a_root_claim_directory_and_a_claim_leaves_no_root_process(
    settings: Settings, tree: Path, client: docker.DockerClient
) -> None:
    before = _pool_containers(client, owner=owner_id())
    pooled = DockerProvider(settings.with_overrides(warm_pool=1), client=client)
    try:
        pooled.fill_pool()
        (idle,) = _pool_containers(client, owner=owner_id()) - before
        # Made by root when the member started, before anything could run in it: the
        # sandbox user can neither make its own nor write into this one.
        made = subprocess.run(
            ["docker", "exec", "-u", "10001", idle, "sh", "-c",
             f"stat -c '%u %a' {CLAIM_DIR}; mkdir {CLAIM_DIR} 2>&1; touch {CLAIM_DIR}/x 2>&1"],
            capture_output=True, text=True,
        )  # fmt: skip
        first = made.stdout.splitlines()[0]
        assert first == "0 755", made.stdout
        assert "File exists" in made.stdout and "Permission denied" in made.stdout, made.stdout
        box = pooled.create(f"test-idle-{uuid.uuid4().hex[:8]}", tree, network=False)
        try:
            assert box.container_id == idle
            # The writer exited with the claim written: no root process is left for the
            # mission's commands (and their sweeps) to meet.
            users = run(box, "ps -eo uid= | sort -u").split()
            assert users == ["10001"], users
            assert pooled.pool_claims == 1
        finally:
            box.close()
    finally:
        pooled.close()


def test_a_pool_container_whose_claim_writer_is_gone_is_discarded_for_a_cold_start(
    settings: Settings, tree: Path, client: docker.DockerClient
) -> None:
    before = _pool_containers(client, owner=owner_id())
    pooled = DockerProvider(settings.with_overrides(warm_pool=1), client=client)
    try:
        pooled.fill_pool()
        (broken,) = _pool_containers(client, owner=owner_id()) - before
        killed = subprocess.run(
            ["docker", "exec", "-u", "0", broken, "sh", "-c",
             "ps -eo pid=,args= | awk '$2 == \"/bin/bash\" && /loopwright-claim/ {print $1}'"
             " | while read -r pid; do kill -9 \"$pid\" && echo k; done"],
            capture_output=True, text=True,
        )  # fmt: skip
        assert killed.stdout.split() == ["k"], (killed.stdout, killed.stderr)
        box = pooled.create(f"test-writer-{uuid.uuid4().hex[:8]}", tree, network=False)
        try:
            assert box.container_id != broken
            labels = client.api.inspect_container(box.container_id)["Config"]["Labels"]
            assert labels[MISSION_LABEL] == box.mission_id  # a cold start
            assert pooled.pool_claims == 0
            with pytest.raises(docker.errors.NotFound):
                client.api.inspect_container(broken)
        finally:
            box.close()
        deadline = time.monotonic() + 30
        while pooled.pool_size < 1 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert pooled.pool_size == 1  # the discarded member is replaced
    finally:
        pooled.close()


@pytest.mark.parametrize(
    ("copy_in_flight", "found"),
    [
        (False, "; it did not answer a ping within 2 s either"),
        # The ping's write waits behind the copy's, which the stopped server never reads.
        (True, "; no ping could be sent to it within 3 s"),
    ],
    ids=["idle-channel", "copy-in-flight"],
)
def test_a_server_that_answers_nothing_is_reported_with_what_a_ping_found(
    provider: DockerProvider,
    tree: Path,
    client: docker.DockerClient,
    copy_in_flight: bool,
    found: str,
) -> None:
    """The engine's freezer stops every process of the container, the resident server's
    reading loop included: the command's deadline passes (its timeout and the channel's
    grace), and the error says the whole server is stuck, not only that command, within
    a bounded time however the channel is held."""
    box = provider.create(f"test-silent-{uuid.uuid4().hex[:8]}", tree, network=False)
    archive = io.BytesIO()
    with tarfile.open(fileobj=archive, mode="w") as tar:
        info = tarfile.TarInfo("big.bin")
        info.size = 32 << 20
        tar.addfile(info, io.BytesIO(bytes(info.size)))

    def copy() -> None:
        archive.seek(0)
        with contextlib.suppress(SandboxError):
            box.put_archive("/workspace", archive)

    copying = threading.Timer(0.5, copy)  # once the command's request is on its way
    try:
        assert box.exec("true", timeout_s=30).exit_code == 0  # the channel is up
        client.api.pause(box.container_id)
        try:
            if copy_in_flight:
                copying.start()
            started = time.monotonic()
            with pytest.raises(SandboxError) as raised:
                box.exec("true", timeout_s=1)
            assert time.monotonic() - started < 1 + 30 + 5
        finally:
            client.api.unpause(box.container_id)
    finally:
        box.close()
        if copy_in_flight:
            copying.join(60)
    message = str(raised.value)
    assert "(status paused" in message
    assert "stopped answering while running a command" in message
    assert message.endswith(found)


REMOTE_POOL_OWNER = """
import dataclasses, json, socket, sys
from loopwright.config import SandboxLimits, Settings
from loopwright.sandbox.docker.provider import DockerProvider
socket.sethostname(sys.argv[1])  # in a UTS namespace of its own: another host's worker
limits = SandboxLimits(**json.loads(sys.argv[3]))
settings = Settings(sandbox_limits=limits, network="none", sandbox_image=sys.argv[2], warm_pool=1)
DockerProvider(settings).fill_pool()
print("ready", flush=True)
sys.stdin.read()
"""


@contextlib.contextmanager
def remote_pool_member(
    settings: Settings, client: docker.DockerClient
) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """A worker on another host (here: a process with a host name of its own, which this
    host's process table cannot vouch for) with one idle pool member: the worker and the
    member's id. Everything of that host is removed afterwards."""
    host = f"lw-remote-{uuid.uuid4().hex[:8]}"
    assert host != socket.gethostname()
    limits = json.dumps(dataclasses.asdict(settings.sandbox_limits))
    worker = subprocess.Popen(
        ["unshare", "--uts", sys.executable, "-c", REMOTE_POOL_OWNER, host,
         settings.sandbox_image, limits],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert worker.stdout is not None
        ready = select.select([worker.stdout], [], [], 120)[0]
        assert ready and worker.stdout.readline() == "ready\n", worker.stderr
        (member,) = [
            str(c["Id"])
            for c in client.api.containers(filters={"label": POOL_LABEL})
            if c["Labels"][OWNER_LABEL].startswith(f"{host}:")
        ]
        yield worker, member
    finally:
        worker.kill()
        worker.wait(30)
        for c in client.api.containers(all=True, filters={"label": OWNER_LABEL}):
            if c["Labels"][OWNER_LABEL].startswith(f"{host}:"):
                with contextlib.suppress(docker.errors.NotFound):
                    client.api.remove_container(c["Id"], force=True, v=True)


def _gone(client: docker.DockerClient, container: str) -> bool:
    try:
        client.api.inspect_container(container)
    except docker.errors.NotFound:
        return True
    return False


def test_an_idle_pool_member_of_a_gone_owner_on_another_host_is_reaped(
    settings: Settings, client: docker.DockerClient
) -> None:
    """An idle pool member serves no mission the store could judge: its claim writer,
    whose connection the worker held, says when the worker is gone."""
    reaping = DockerProvider(settings, client=client)  # no store: the member says it itself
    try:
        with remote_pool_member(settings, client) as (worker, member):
            assert member not in reaping.reap_abandoned()  # its worker holds it
            worker.kill()
            worker.wait(30)
            deadline = time.monotonic() + 30
            while (
                not (_gone(client, member) or abandoned(client, member))
                and time.monotonic() < deadline
            ):
                time.sleep(0.1)
            # Another process on the engine (a server's timed round) may reap it first, or
            # be removing it while this one looks: an exec into the member then fails
            # ("cannot exec in a stopped state") and this reaper leaves it to that one.
            # Either way it is gone within seconds; this reaper looks again meanwhile.
            seen = ""
            if not _gone(client, member) and member not in reaping.reap_abandoned():
                seen = _member_state(client, member)
                deadline = time.monotonic() + 30
                while not _gone(client, member) and time.monotonic() < deadline:
                    if member in reaping.reap_abandoned():
                        break
                    time.sleep(1.0)
            assert _gone(client, member), seen
    finally:
        reaping.close()


def _member_state(client: docker.DockerClient, member: str) -> str:
    """What a pool member that was not reaped looked like: its state, its processes (is the
    claim writer still waiting for a line?) and its claim directory, as root reads it."""
    try:
        state = client.api.inspect_container(member)["State"]
        top = client.api.top(member)
        listing = client.api.exec_start(
            client.api.exec_create(member, ["ls", "-la", CLAIM_DIR], user="0:0")["Id"]
        )
    except docker.errors.APIError as exc:
        return f"member {member[:12]}: {exc}"
    return (
        f"member {member[:12]} {state.get('Status')} since {state.get('StartedAt')}; "
        f"processes {[(row[0], row[-1][:60]) for row in top.get('Processes') or []]}; "
        f"{CLAIM_DIR}: {listing!r}"
    )


def test_a_stopped_idle_pool_member_of_another_host_is_reaped_and_a_created_one_is_not(
    settings: Settings, client: docker.DockerClient
) -> None:
    """An engine restart stops every container, the claim writer with them: the abandoned
    marker can then never be written, and the member, stopped, could never serve its owner
    again. Once it has been stopped for the grace period it goes, even while its owner
    lives. One stopped just now stays: a `docker restart` of a live sandbox (which empties
    its claim file too) stops it for a moment. So does one still `created` (between its
    creation and its start)."""
    reaping = DockerProvider(settings, client=client)  # no store: the member says it itself
    try:
        with remote_pool_member(settings, client) as (worker, member):
            labels = client.api.inspect_container(member)["Config"]["Labels"]
            made = client.api.create_container(
                settings.sandbox_image, command=["true"], labels=labels
            )
            created = str(made["Id"])
            assert not {member, created} & set(reaping.reap_abandoned())  # its worker holds it
            client.api.stop(member, timeout=0)
            stopped = time.monotonic()
            assert worker.poll() is None  # the owner lives on
            assert member not in reaping.reap_abandoned()  # stopped for less than a minute
            assert member not in reap_abandoned(client, None, stopped_for_s=30)
            time.sleep(max(0.0, stopped + 1.5 - time.monotonic()))
            assert member in reap_abandoned(client, None, stopped_for_s=1)
            assert _gone(client, member)
            assert client.api.inspect_container(created)["State"]["Status"] == "created"
    finally:
        reaping.close()


def test_after_a_restart_the_sandbox_user_cannot_forge_a_claim_or_the_abandoned_marker(
    settings: Settings, client: docker.DockerClient
) -> None:
    """A restart empties the container's /tmp: the sandbox user can then make the claim
    directory itself. The reaper reads only what root wrote there, and never blocks on a
    FIFO or streams a link to /dev/zero."""
    before = _pool_containers(client, owner=owner_id())
    pooled = DockerProvider(settings.with_overrides(warm_pool=1), client=client)
    try:
        pooled.fill_pool()
        (member,) = _pool_containers(client, owner=owner_id()) - before
        client.api.restart(member, timeout=0)
        forged = json.dumps(
            {"container": member, "mission": "forged", "owner": "x:1:1",
             "claimed_at": "2026-01-01T00:00:00+00:00"}
        )  # fmt: skip
        for plant in (
            f"printf abandoned > {CLAIM_DIR}/abandoned; printf '%s' '{forged}' > {CLAIM_FILE}",
            f"ln -s /dev/zero {CLAIM_DIR}/abandoned; mkfifo {CLAIM_FILE}",
        ):
            made = subprocess.run(
                ["docker", "exec", "-u", "10001", member, "sh", "-c",
                 f"rm -rf {CLAIM_DIR} && mkdir {CLAIM_DIR} && {plant} && echo planted"],
                capture_output=True, text=True,
            )  # fmt: skip
            assert made.stdout.strip() == "planted", made.stderr
            started = time.monotonic()
            assert not abandoned(client, member)
            assert read_claim(client, member) is None
            assert time.monotonic() - started < 10
    finally:
        pooled.close()


def test_reaping_volumes_while_sandboxes_start_never_leaves_a_workspace_without_its_limit(
    settings: Settings, client: docker.DockerClient, tree: Path
) -> None:
    """Other processes reap unused workspace volumes at any time (`serve` and `worker` on
    a timer). A workspace volume exists only from its container's creation on, so none is
    ever unused in between, to be removed and silently remade by the engine as a plain
    volume on the host's disk."""
    stop = threading.Event()
    rounds = 0

    def reap() -> None:
        nonlocal rounds
        while not stop.is_set():
            reap_volumes(client)
            rounds += 1

    reaping = threading.Thread(target=reap, daemon=True)
    reaping.start()
    cold = DockerProvider(settings, client=client)
    try:
        for _ in range(8):
            box = cold.create(f"test-vol-{uuid.uuid4().hex[:8]}", tree, network=False)
            try:
                mount = run(box, "stat -f -c %T /workspace; df -m --output=size /workspace")
                kind, _, size = mount.split()
                assert kind == "tmpfs" and int(size) <= settings.sandbox_limits.tmpfs_mb, mount
            finally:
                box.close()
    finally:
        stop.set()
        reaping.join(30)
        cold.close()
    assert rounds > 8


def test_a_cold_start_records_no_claim_and_its_label_names_the_mission(
    settings: Settings, tree: Path, client: docker.DockerClient, tmp_path: Path
) -> None:
    migrate(f"sqlite:///{tmp_path / 'claims.db'}")
    store = Store(f"sqlite:///{tmp_path / 'claims.db'}")
    cold = DockerProvider(settings, client=client, ledger=store)
    try:
        box = cold.create(f"test-cold-{uuid.uuid4().hex[:8]}", tree, network=False)
        try:
            labels = client.api.inspect_container(box.container_id)["Config"]["Labels"]
            assert labels[MISSION_LABEL] == box.mission_id
            assert POOL_LABEL not in labels
            assert store.claim_of(box.container_id) is None
            assert cold.pool_claims == 0
            assert "No such file" in run(box, f"cat {CLAIM_FILE} 2>&1; true")
        finally:
            box.close()
    finally:
        cold.close()


# -- image and doctor ---------------------------------------------------------------------


def test_ensure_image_does_not_rebuild_a_current_image(
    settings: Settings, client: docker.DockerClient
) -> None:
    lines: list[str] = []
    image = client.images.get(settings.sandbox_image).id
    assert ensure_image(client, settings, lines.append) == settings.sandbox_image
    assert any("is current" in line for line in lines)
    assert not any("building" in line for line in lines)
    assert client.images.get(settings.sandbox_image).id == image


def test_doctor_reports_every_check_with_a_fix_for_failures(settings: Settings) -> None:
    checks = {c.name: c for c in doctor(settings)}
    assert set(checks) >= {
        "docker package", "docker engine", "sandbox image", "debootstrap", "chromium",
        "free disk",
    }  # fmt: skip
    assert checks["docker engine"].ok and "API" in checks["docker engine"].detail
    assert checks["sandbox image"].ok
    for check in checks.values():
        assert check.ok or check.fix, check


def test_reap_abandoned_removes_sandboxes_of_killed_processes_only(
    settings: Settings, tree: Path, client: docker.DockerClient
) -> None:
    """Another test's provider on the same engine may reap the dead owner's sandbox first
    (every provider reaps abandoned ones at start-up); the scenario is then run again, and
    this provider's own reap must remove one within a few tries."""
    outcomes = []
    for _ in range(3):
        outcomes.append(_kill_an_owner_and_reap(settings, tree, client))
        if outcomes[-1]:
            break
    assert outcomes[-1], f"another process reaped first on every try: {outcomes}"


def _kill_an_owner_and_reap(settings: Settings, tree: Path, client: docker.DockerClient) -> bool:
    """A child process makes a sandbox and is SIGKILLed; a live provider reaps right after.

    Returns whether that reap removed the child's sandbox (it is gone either way)."""
    import signal
    import sys

    child_code = (
        "import sys, time\n"
        "from pathlib import Path\n"
        "from loopwright.config import Settings\n"
        "from loopwright.sandbox.docker.provider import DockerProvider\n"
        "provider = DockerProvider(Settings.from_env({}))\n"
        "box = provider.create('test-killed-owner', Path(sys.argv[1]), network=False)\n"
        "print(box.container_id, flush=True)\n"
        "time.sleep(600)\n"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", child_code, str(tree)], stdout=subprocess.PIPE, text=True
    )
    survivor = DockerProvider(settings, client=client)
    live = None
    try:
        assert child.stdout is not None
        abandoned_id = child.stdout.readline().strip()
        assert abandoned_id
        # While its owner lives, even a reap that knows of no active mission leaves it alone.
        bystander = DockerProvider(settings, client=client)
        try:
            assert abandoned_id not in bystander.reap_orphans(set())
            assert abandoned_id not in bystander.reap_abandoned()
        finally:
            bystander.close()
        live = survivor.create(f"test-live-owner-{uuid.uuid4().hex[:8]}", tree, network=False)
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=10)
        removed = survivor.reap_abandoned()
        assert live.container_id not in removed
        with pytest.raises(docker.errors.NotFound):
            client.api.inspect_container(abandoned_id)
        assert run(live, "echo alive").strip() == "alive"
        return abandoned_id in removed
    finally:
        child.kill()
        child.wait(timeout=10)
        if live is not None:
            live.close()
        survivor.close()


# -- the setup network's firewall (SECURITY 41) ---------------------------------------------


def _iptables_rules(chain: str) -> list[str]:
    return subprocess.run(
        ["iptables", "-w", "5", "-S", chain], capture_output=True, text=True, check=True
    ).stdout.splitlines()


class _Listener:
    """A TCP listener of the test's own; records every connection it accepts."""

    def __init__(self, host: str) -> None:
        self.sock = socket.create_server((host, 0))
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.accepted: list[tuple[str, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                conn, peer = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.accepted.append(peer)
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self.sock.close()


@pytest.fixture
def setup_box(provider: DockerProvider, tree: Path) -> Iterator[DockerSandbox]:
    box = provider.create(f"test-fw-{uuid.uuid4().hex[:8]}", tree, network=True)
    try:
        yield box
    finally:
        box.close()


def _sandbox_bridge(client: docker.DockerClient) -> tuple[str, str, str]:
    from loopwright.sandbox.docker.engine import NETWORK_NAME
    from loopwright.sandbox.docker.network import bridge_interface

    attrs = client.networks.get(NETWORK_NAME).attrs
    config = attrs["IPAM"]["Config"][0]
    return bridge_interface(attrs), config["Gateway"], config["Subnet"]


def test_setup_network_cannot_reach_a_listener_on_the_host_side_of_the_bridge(
    setup_box: DockerSandbox, client: docker.DockerClient
) -> None:
    _, gateway, _ = _sandbox_bridge(client)
    listener = _Listener(gateway)
    try:
        out = probe(setup_box, f"{gateway}:{listener.port}")
        assert out.startswith("FAILED"), out
        # The host's other addresses are the host too: the same listener port on any of them.
        time.sleep(0.5)
        assert listener.accepted == []
    finally:
        listener.close()
    assert "00000000" in run(setup_box, "cat /proc/net/route")  # the network itself is up


def test_setup_network_cannot_reach_a_host_service_on_another_host_address(
    setup_box: DockerSandbox,
) -> None:
    """The host's other addresses (its LAN address, docker0) are the host too."""
    hostname = subprocess.run(["hostname", "-I"], capture_output=True, text=True, check=False)
    addresses = [a for a in hostname.stdout.split() if ":" not in a]
    assert addresses
    for address in addresses:
        listener = _Listener(address)
        try:
            out = probe(setup_box, f"{address}:{listener.port}")
            assert out.startswith("FAILED"), (address, out)
            time.sleep(0.3)
            assert listener.accepted == [], address
        finally:
            listener.close()


def test_sandboxes_on_the_setup_network_cannot_reach_each_other(
    provider: DockerProvider, setup_box: DockerSandbox, tree: Path, client: docker.DockerClient
) -> None:
    other = provider.create(f"test-fw-peer-{uuid.uuid4().hex[:8]}", tree, network=True)
    try:
        from loopwright.sandbox.docker.engine import NETWORK_NAME

        info = client.api.inspect_container(other.container_id)
        peer = info["NetworkSettings"]["Networks"][NETWORK_NAME]["IPAddress"]
        with other.run_service(
            "python3 -m http.server 8765", port=8765, env={}, log=".lw/peer.log"
        ) as url:
            # The service really listens (reached over the host relay) ...
            run(other, "for i in $(seq 50); do (exec 3<>/dev/tcp/127.0.0.1/8765) && break;"
                       " sleep 0.1; done 2>/dev/null; echo up")  # fmt: skip
            assert url.startswith("http://127.0.0.1:")
            # ... but the other sandbox on the same bridge cannot connect to it.
            assert probe(setup_box, f"{peer}:8765").startswith("FAILED")
    finally:
        other.close()


def test_the_setup_firewall_rules_are_installed_once_and_scoped_to_the_bridge(
    setup_box: DockerSandbox, client: docker.DockerClient
) -> None:
    from loopwright.sandbox.docker.engine import NETWORK_NAME
    from loopwright.sandbox.docker.network import FIREWALL_TAG, ensure_setup_firewall

    interface, _, subnet = _sandbox_bridge(client)
    ensure_setup_firewall(client.networks.get(NETWORK_NAME).attrs)  # a second time: no change
    ensure_setup_firewall(client.networks.get(NETWORK_NAME).attrs)
    forward = [r for r in _iptables_rules("DOCKER-USER") if FIREWALL_TAG in r]
    inputs = [r for r in _iptables_rules("INPUT") if FIREWALL_TAG in r]
    assert all(f"-i {interface} " in r for r in forward + inputs)
    metadata = [r for r in forward if "-d 169.254.0.0/16" in r]
    assert len(metadata) == 1 and metadata[0].endswith("-j DROP")
    assert len(forward) == len(set(forward)) and len(inputs) == len(set(inputs))
    assert inputs[-1].endswith("-j DROP") and len(inputs) == 2
    assert "ESTABLISHED" in inputs[0] and inputs[0].endswith("-j ACCEPT")
    # The bridge's own subnet is not dropped (ICC already keeps sandboxes apart).
    assert not [r for r in forward if f"-d {subnet}" in r]


def test_doctor_reports_the_setup_network_firewall(settings: Settings) -> None:
    checks = {c.name: c for c in doctor(settings.with_overrides(network="setup"))}
    assert checks["setup network firewall"].ok, checks["setup network firewall"]
    assert "rules" in checks["setup network firewall"].detail or "installed" in (
        checks["setup network firewall"].detail
    )


def test_firewall_rules_cover_the_host_networks_in_a_route_table() -> None:
    from loopwright.sandbox.docker.network import firewall_rules, host_networks, nameservers

    table = (
        "Iface\tDestination\tGateway\tFlags\tRefCnt\tUse\tMetric\tMask\tMTU\tWindow\tIRTT\n"
        "eth0\t00000000\t010200C0\t0003\t0\t0\t0\t00000000\t0\t0\t0\n"
        "eth0\t000200C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n"
        "br-x\t000012AC\t00000000\t0001\t0\t0\t0\t0000FFFF\t0\t0\t0\n"
        "wg0\t0000000A\t00000000\t0001\t0\t0\t0\t000000FF\t0\t0\t0\n"
    )
    nets = host_networks(table)
    assert nets == ["10.0.0.0/8", "172.18.0.0/16", "192.0.2.0/24"]
    rules = firewall_rules("br-x", {"172.18.0.0/16"}, nets)
    dropped = [r[r.index("-d") + 1] for r in rules if r[0] == "DOCKER-USER"]
    assert dropped == ["169.254.0.0/16", "10.0.0.0/8", "192.0.2.0/24"]
    assert [r[0] for r in rules[:2]] == ["INPUT", "INPUT"]
    # DNS to the host's own resolvers is let through before the drops (a resolver on the LAN).
    resolvers = nameservers("nameserver 127.0.0.53\nnameserver 192.0.2.53\nnameserver ::1\n")
    assert resolvers == ["192.0.2.53"]
    with_dns = firewall_rules("br-x", {"172.18.0.0/16"}, nets, resolvers)
    forward = [r for r in with_dns if r[0] == "DOCKER-USER"]
    assert [(r[r.index("-d") + 1], r[-1]) for r in forward[:2]] == [
        ("192.0.2.53/32", "ACCEPT"),
        ("192.0.2.53/32", "ACCEPT"),
    ]
    assert {r[r.index("-p") + 1] for r in forward[:2]} == {"udp", "tcp"}
    assert all(r[-1] == "DROP" for r in forward[2:])


# -- no survivors (SECURITY 42) ------------------------------------------------------------


def _container_processes(client: docker.DockerClient, box: DockerSandbox) -> list[str]:
    """Every process in the container, as the engine sees it (no exec, so no sweep runs)."""
    top = client.api.top(box.container_id, ps_args="-eo pid,args")
    index = top["Titles"].index("COMMAND") if "COMMAND" in top["Titles"] else -1
    return [row[index] for row in top["Processes"]]


@pytest.mark.parametrize("way", sorted(SURVIVORS))
def test_no_process_outlives_its_command_in_the_container(
    sandbox: DockerSandbox, client: docker.DockerClient, way: str
) -> None:
    """SECURITY 42: after each command only init and the keeper are left."""
    tag = survivor_tag()
    result = sandbox.exec(SURVIVORS[way].format(dir="/tmp", tag=tag), timeout_s=30)
    assert "started" in result.output, result.output
    processes = _container_processes(client, sandbox)
    assert not [p for p in processes if tag in p], processes
    assert len(processes) == 2, processes  # docker-init and `sleep infinity`
    time.sleep(SURVIVOR_DELAY_S + 1.5)
    assert _container_processes(client, sandbox) == processes
    assert tag not in run(sandbox, "ls -a /tmp")


def test_a_survivor_marker_is_written_when_the_container_command_waits(
    sandbox: DockerSandbox,
) -> None:
    tag = survivor_tag()
    command = SURVIVORS["setsid-env-i"].format(dir="/tmp", tag=tag) + "; sleep 2.5"
    assert sandbox.exec(command, timeout_s=30).exit_code == 0
    assert run(sandbox, f"cat /tmp/{tag}").strip() == "survived"  # the probe itself works


def test_a_service_survives_commands_while_open_and_is_killed_on_close(
    sandbox: DockerSandbox, client: docker.DockerClient
) -> None:
    tag = survivor_tag()
    # One child clears its environment (but stays in the service's session), one moves to a
    # session of its own (keeping the environment the host gave the service).
    service = (
        f"env -i /bin/sh -c 'sleep 60' {tag}-service-quiet & "
        f"setsid /bin/sh -c 'sleep 60' {tag}-service-session & wait"
    )
    with sandbox.run_service(service, port=1, env={}, log=".lw/svc.log"):
        # A command's own survivor is still swept while a service is open ...
        sandbox.exec(SURVIVORS["double-fork"].format(dir="/tmp", tag=tag), timeout_s=30)
        processes = _container_processes(client, sandbox)
        assert not [p for p in processes if tag in p and "service" not in p], processes
        # ... but the service's own processes stay.
        assert [p for p in processes if f"{tag}-service-quiet" in p], processes
        assert [p for p in processes if f"{tag}-service-session" in p], processes
    processes = _container_processes(client, sandbox)
    assert not [p for p in processes if tag in p], processes
    assert len(processes) == 2, processes


def test_a_remote_workers_sandbox_goes_once_the_store_says_it_no_longer_runs_the_mission(
    settings: Settings, client: docker.DockerClient, tmp_path: Path
) -> None:
    """A worker in another container on the same engine (another hostname) cannot be seen
    in this host's process table; once it was replaced, the store says which of its
    sandboxes nobody runs any more: the mission ended, or another worker took it over."""
    url = f"sqlite:///{tmp_path / 'store.db'}"
    migrate(url)
    store = Store(url)
    gone = "worker-replaced-1:7:99"
    assert gone.split(":")[0] != socket.gethostname()
    missions = {}
    for name in ("runs", "taken", "ended", "requeued"):
        request = MissionRequest(trigger="cli", repo="acme/reap", clone_url="", head_sha=name)
        missions[name] = store.create_mission(request)[0].id
    for name in ("runs", "ended"):
        assert store.claim(missions[name], runner=gone)
    assert store.claim(missions["taken"], runner="worker-b:8:1")
    assert store.set_status(missions["ended"], "verified", expect="running")
    missions["unknown"] = f"not-in-this-store-{uuid.uuid4().hex[:8]}"
    made = {
        name: client.api.create_container(
            settings.sandbox_image,
            command=["sleep", "300"],
            labels={MISSION_LABEL: mission, OWNER_LABEL: gone},
        )["Id"]
        for name, mission in missions.items()
    }
    try:
        plain = DockerProvider(settings, client=client)
        try:  # without the store nothing says the remote owner is gone
            assert not set(made.values()) & set(plain.reap_abandoned())
        finally:
            plain.close()
        provider = DockerProvider(settings, client=client)
        try:
            provider.record_claims_in(store)
            removed = set(provider.reap_abandoned())
        finally:
            provider.close()
        assert {n for n, cid in made.items() if cid in removed} == {"taken", "ended", "requeued"}
        assert {c["Id"] for c in client.api.containers(all=True)} >= {
            made["runs"],
            made["unknown"],
        }
    finally:
        for cid in made.values():
            with contextlib.suppress(docker.errors.NotFound):
                client.api.remove_container(cid, force=True)
        store.close()
