"""The Docker sandbox: one hardened, disposable container per mission.

Each container runs the sandbox image as uid 10001 with every capability dropped, a read-only
root, bounded tmpfs mounts and pids/memory/CPU limits; its /workspace is a size-bounded tmpfs
volume holding a copy of the repository, and commands and file tools run inside it.
"""

from __future__ import annotations

import codecs
import contextlib
import io
import os
import queue
import secrets
import shutil
import socket
import subprocess
import tarfile
import tempfile
import threading
import time
import uuid
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import docker
import docker.errors
import docker.types
import requests.exceptions

from loopwright.config import Settings
from loopwright.sandbox.base import (
    MISSION_LABEL,
    SANDBOX_UID,
    WORKSPACE,
    ExecResult,
    FileToolError,
    OutputCallback,
    RawCallback,
    SandboxError,
)
from loopwright.sandbox.paths import CONTAINER_RESOLVER, normalize_relative

POOL_LABEL = "loopwright.pool"
PROVIDER_LABEL = "loopwright.provider"
VOLUME_LABEL = "loopwright.volume"
OWNER_LABEL = "loopwright.owner"
NETWORK_NAME = "loopwright-sandbox"
HOME = "/home/sandbox"
USER = f"{SANDBOX_UID}:{SANDBOX_UID}"
SANDBOX_ENV = {
    "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "HOME": HOME,
    "LANG": "C.UTF-8",
    "CI": "true",
}
SERVICE_TOKEN_VAR = "LOOPWRIGHT_SERVICE_ID"  # noqa: S105 - a name, not a secret
# The wrapper travels in the environment (and is unset before the command runs) so that `ps`
# inside the sandbox shows the command, not a page of bash.
WRAPPER_VAR = "LOOPWRIGHT_WRAPPER"
TIMEOUT_EXIT = 124
WRAPPER_CHECK_S = 0.5
"""While a command's output is open, how often to check that its wrapper still runs."""
MAX_FILE_BYTES = 10_000_000
BUILD_HINT = "build it with `loopwright sandbox build`"

# Bash functions shared by the command wrapper and the timeout killer. Builtins only: when a
# fork bomb has used up the pids limit, a sweep that needs to fork could never run.
#
# No process may outlive the command that started it, and a process can leave its session,
# clear its environment, rename itself and be reparented to init, so the sweep does not try
# to recognise the command's processes: it kills every process in the container except
# init (PID 1), the keeper (init's oldest child, `sleep infinity`), the pids it is told to
# spare (itself), and the processes of open services (verification's web app): those hold
# a service token in their environment, or share a session a token holder leads.
_SWEEP_FUNCTIONS = r"""
lw_sweep() {
    local spare=" 1 $1 " round d pid line rest keeper kstart tok envline
    shift
    local -a f envs seen victims
    local -A sid_of holder lead
    for ((round = 0; round < 200; round++)); do
        keeper= kstart=
        seen=() sid_of=() holder=() lead=()
        for d in /proc/[0-9]*; do
            pid=${d#/proc/}
            [[ $spare == *" $pid "* ]] && continue
            read -r line 2>/dev/null < "$d/stat" || continue
            rest=${line##*) }
            f=($rest)
            [[ ${f[0]} == Z ]] && continue
            if ((f[1] == 1)) && [[ -z $kstart || ${f[19]} -lt $kstart ]]; then
                keeper=$pid kstart=${f[19]}
            fi
            seen+=("$pid")
            sid_of[$pid]=${f[3]}
            if (($#)); then
                envs=()
                mapfile -d '' -t envs 2>/dev/null < "$d/environ"
                envline=" ${envs[*]} "
                for tok; do
                    if [[ $envline == *" LOOPWRIGHT_SERVICE_ID=$tok "* ]]; then
                        holder[$pid]=1
                        [[ ${f[3]} == "$pid" ]] && lead[$pid]=1
                        break
                    fi
                done
            fi
        done
        victims=()
        for pid in "${seen[@]}"; do
            [[ $pid == "$keeper" || -n ${holder[$pid]:-} ]] && continue
            [[ -n ${lead[${sid_of[$pid]}]:-} ]] && continue
            victims+=("$pid")
        done
        ((${#victims[@]})) || return 0
        # Frozen first, so that none runs again to see another die (a shell whose `sleep`
        # is killed would go on to its next command).
        kill -STOP "${victims[@]}" 2>/dev/null
        kill -KILL "${victims[@]}" 2>/dev/null
    done
}
lw_counter() {
    # Prints nothing; sets LW_COUNT to the value of key $1 in the first readable file.
    local key=$1 file k v
    shift
    LW_COUNT=0
    for file in "$@"; do
        [[ -r $file ]] || continue
        while read -r k v; do
            if [[ $k == "$key" ]]; then LW_COUNT=$v; return; fi
        done < "$file"
    done
}
"""

_OOM_FILES = "/sys/fs/cgroup/memory.events /sys/fs/cgroup/memory/memory.oom_control"
_PIDS_FILES = "/sys/fs/cgroup/pids.events /sys/fs/cgroup/pids/pids.events"

# Run as `bash -c 'eval "$LOOPWRIGHT_WRAPPER"'` with $1 the command, $2 the memory limit (MB),
# $3 the pids limit, and $4... the tokens of the services open in this sandbox.
_EXEC_WRAPPER = (
    _SWEEP_FUNCTIONS
    + rf"""
unset LOOPWRIGHT_WRAPPER
exec 2>&1 </dev/null
# Leftovers of a file tool, or of a command whose wrapper was killed before it swept.
lw_sweep "$$" "${{@:4}}"
lw_counter oom_kill {_OOM_FILES}; oom_before=$LW_COUNT
lw_counter max {_PIDS_FILES}; pids_before=$LW_COUNT
/bin/bash -c "$1"
rc=$?
# Nothing the command started outlives it: background jobs, new sessions, daemons.
lw_sweep "$$" "${{@:4}}"
lw_counter oom_kill {_OOM_FILES}
if ((LW_COUNT > oom_before)); then
    printf '\n[sandbox] a process was killed by the out-of-memory killer (limit %s MB)\n' "$2"
fi
lw_counter max {_PIDS_FILES}
if ((LW_COUNT > pids_before)); then
    printf '\n[sandbox] the process limit (%s) was reached: fork failed\n' "$3"
fi
exit $rc
"""
)

# argv after `bash -c`: $1... the tokens of the services to spare.
_SWEEPER = _SWEEP_FUNCTIONS + '\nlw_sweep "$$" "$@"\n'

# argv after `bash -c`: $1 the command, $2 the log file (its exit status goes to $2.exit).
_SERVICE_SCRIPT = (
    'mkdir -p -- "${2%/*}" && exec >"$2" 2>&1 </dev/null; /bin/bash -c "$1"; echo $? > "$2.exit"'
)

# One relayed connection: stdin goes to 127.0.0.1:$1 inside the sandbox, its replies to stdout.
_RELAY_SCRIPT = r"""
import os, socket, sys, threading
try:
    upstream = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
except OSError as exc:
    sys.exit(f"relay: {exc}")
upstream.settimeout(None)


def forward():
    try:
        while data := os.read(0, 65536):
            upstream.sendall(data)
        upstream.shutdown(socket.SHUT_WR)
    except OSError:
        pass


threading.Thread(target=forward, daemon=True).start()
out = sys.stdout.buffer
try:
    while data := upstream.recv(65536):
        out.write(data)
        out.flush()
except OSError:
    pass
"""

# argv after `bash -c`: $1 resolver source, $2 path, $3 size limit.
_READ_SCRIPT = r"""
p=$(python3 -I -c "$1" /workspace "$2" read) || exit $?
if [[ -d $p ]]; then echo "$2 is a directory, not a file" >&2; exit 4; fi
if [[ ! -f $p ]]; then echo "$2 is not a regular file" >&2; exit 4; fi
size=$(stat -c %s -- "$p") || exit 4
if ((size > $3)); then
    echo "$2 is $size bytes, more than the $3 bytes a file read may return" >&2
    exit 4
fi
exec cat -- "$p"
"""

# argv after `bash -c`: $1 resolver source, $2 path. Prints the existing file's mode (or an
# empty line) and then the resolved path, and creates the parent directories.
_WRITE_SCRIPT = r"""
p=$(python3 -I -c "$1" /workspace "$2" write) || exit $?
if [[ -d $p ]]; then echo "$2 is a directory" >&2; exit 4; fi
mkdir -p -- "$(dirname -- "$p")" || exit 4
if [[ -f $p ]]; then stat -c %a -- "$p"; else echo; fi
printf %s "$p"
"""


def _engine_error(exc: BaseException) -> SandboxError:
    return SandboxError(
        f"the Docker engine is unreachable ({exc}); start it (`dockerd &` or "
        "`systemctl start docker`) and check DOCKER_HOST"
    )


def connect(client: docker.DockerClient | None = None) -> docker.DockerClient:
    """A client for the local engine with the API version negotiated, or `SandboxError`."""
    if client is not None:
        return client
    try:
        return docker.from_env(version="auto")
    except docker.errors.DockerException as exc:
        raise _engine_error(exc) from exc


@dataclass
class _ExecCapture:
    """Bounded command output: the head and the tail survive, the middle is counted."""

    cap: int
    head: bytearray
    tail: deque[bytes]
    tail_bytes: int = 0
    dropped: int = 0

    @classmethod
    def new(cls, cap: int) -> _ExecCapture:
        return cls(cap=max(cap, 2), head=bytearray(), tail=deque())

    def add(self, chunk: bytes) -> bytes:
        """Store `chunk`; return the part of it that still fits in the head (to stream)."""
        room = self.cap // 2 - len(self.head)
        streamed = chunk[: max(room, 0)]
        self.head += streamed
        rest = chunk[len(streamed) :]
        if rest:
            self.tail.append(rest)
            self.tail_bytes += len(rest)
            limit = self.cap - self.cap // 2
            while self.tail_bytes > limit:
                first = self.tail.popleft()
                excess = self.tail_bytes - limit
                if len(first) > excess:
                    self.tail.appendleft(first[excess:])
                    self.dropped += excess
                    self.tail_bytes -= excess
                else:
                    self.dropped += len(first)
                    self.tail_bytes -= len(first)
        return bytes(streamed)

    @property
    def truncated(self) -> bool:
        return self.dropped > 0

    def text(self) -> str:
        head = self.head.decode("utf-8", "replace")
        tail = b"".join(self.tail).decode("utf-8", "replace")
        if not self.dropped:
            return head + tail
        return f"{head}\n[... {self.dropped} bytes of output omitted ...]\n{tail}"


def _workspace_tar(tree: Path) -> IO[bytes]:
    """The tree as a tar owned by the sandbox user; special files and set-id bits dropped."""

    def owned(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
        if not (info.isreg() or info.isdir() or info.issym() or info.islnk()):
            return None
        info.uid = info.gid = SANDBOX_UID
        info.uname = info.gname = "sandbox"
        info.mode &= 0o1777
        return info

    spool = tempfile.SpooledTemporaryFile(max_size=64 * 1024 * 1024)  # noqa: SIM115 - returned
    with tarfile.open(fileobj=spool, mode="w") as tar:
        for child in sorted(tree.iterdir()):
            tar.add(child, arcname=child.name, filter=owned)
    spool.seek(0)
    return spool


def _file_tar(name: str, data: bytes, mode: int) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        info = tarfile.TarInfo(name)
        info.size = len(data)
        info.mode = mode
        info.uid = info.gid = SANDBOX_UID
        info.uname = info.gname = "sandbox"
        info.mtime = int(time.time())
        tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


class DockerSandbox:
    """A running sandbox container; created by `DockerProvider.create`."""

    def __init__(
        self,
        client: docker.DockerClient,
        settings: Settings,
        container_id: str,
        volume: str,
        mission_id: str,
        *,
        network: bool,
    ) -> None:
        self.mission_id = mission_id
        self.container_id = container_id
        self._client = client
        self._settings = settings
        self._volume = volume
        self._network = network
        self._closed = False
        self._close_lock = threading.Lock()
        self._services: set[str] = set()
        """Tokens of the services open now; their processes survive the sweeps."""

    # -- commands -------------------------------------------------------------------------

    def exec(
        self,
        command: str,
        *,
        timeout_s: float,
        on_output: OutputCallback | None = None,
        on_raw: RawCallback | None = None,
    ) -> ExecResult:
        """Run `command` with bash in /workspace; kill its whole process tree on timeout.

        When the command ends, every process in the container but init and the keeper is
        killed (those of an open `run_service` excepted), however it detached itself.
        """
        limits = self._settings.sandbox_limits
        token = secrets.token_hex(16)
        services = sorted(self._services)
        argv = [
            "/bin/bash",
            "-c",
            f'eval "${WRAPPER_VAR}"',
            "loopwright-exec",
            command,
            str(limits.memory_mb),
            str(limits.pids),
            *services,
        ]
        capture = _ExecCapture.new(limits.output_cap_bytes)
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        started = time.monotonic()
        api = self._client.api
        exec_id = self._api(
            lambda: api.exec_create(
                self.container_id,
                argv,
                stdout=True,
                stderr=True,
                user=USER,
                workdir=WORKSPACE,
                environment={WRAPPER_VAR: _EXEC_WRAPPER},
            )["Id"]
        )
        chunks = self._api(lambda: api.exec_start(exec_id, stream=True, demux=False))
        inbox: queue.Queue[bytes | BaseException | None] = queue.Queue()
        reader = threading.Thread(
            target=_pump, args=(chunks, inbox), name=f"sandbox-exec-{token[:8]}", daemon=True
        )
        reader.start()
        deadline = started + timeout_s
        timed_out = False
        orphaned = False
        while True:
            wait = deadline - time.monotonic()
            try:
                item = inbox.get(timeout=max(min(wait, WRAPPER_CHECK_S), 0.0))
            except queue.Empty:
                if time.monotonic() >= deadline:
                    timed_out = True
                    self._kill_command(reader)
                    break
                if not orphaned and not self._api(lambda: api.exec_inspect(exec_id)["Running"]):
                    # The wrapper is gone (the command killed it) but something it left still
                    # holds the output open: sweep now rather than when that ends.
                    orphaned = True
                    self._sweep()
                continue
            if item is None:
                break
            if isinstance(item, BaseException):
                raise self._infra_error(item) from item
            if on_raw is not None:
                on_raw(item)
            streamed = capture.add(item)
            if on_output is not None and streamed:
                text = decoder.decode(streamed)
                if text:
                    on_output(text)
        reader.join(timeout=5)
        while not inbox.empty():
            item = inbox.get_nowait()
            if isinstance(item, bytes):
                if on_raw is not None:
                    on_raw(item)
                capture.add(item)
        duration = time.monotonic() - started
        if timed_out:
            note = (
                f"\n[sandbox] timed out after {timeout_s:g} s; "
                "the command's processes were killed\n"
            )
            return ExecResult(
                output=capture.text() + note,
                exit_code=TIMEOUT_EXIT,
                timed_out=True,
                truncated=capture.truncated,
                duration_s=duration,
            )
        exit_code = self._exit_code(exec_id)
        if exit_code > 128:
            # A signal ended the wrapper, possibly before its sweep (the command may kill
            # its own parent); sweep again from outside.
            self._sweep()
        return ExecResult(
            output=capture.text(),
            exit_code=exit_code,
            truncated=capture.truncated,
            duration_s=time.monotonic() - started,
        )

    def _exit_code(self, exec_id: str) -> int:
        api = self._client.api
        for _ in range(200):
            info = self._api(lambda: api.exec_inspect(exec_id))
            code = info.get("ExitCode")
            if not info.get("Running") and code is not None:
                if code < 0:
                    raise self._died("the command could not be started")
                return int(code)
            time.sleep(0.01)
        raise self._died("the command's exit status never arrived")

    def _sweep(self) -> bool:
        """Kill every process but init, the keeper and open services'; False if it could not
        start (typically no pid is free: a fork bomb)."""
        api = self._client.api
        try:
            api.exec_start(
                api.exec_create(
                    self.container_id,
                    ["/bin/bash", "-c", _SWEEPER, "loopwright-sweep", *sorted(self._services)],
                    user=USER,
                )["Id"]
            )
        except docker.errors.NotFound as exc:
            raise self._died(str(exc)) from exc
        except docker.errors.APIError as exc:
            if exc.status_code == 409:
                raise self._died(str(exc.explanation or exc)) from exc
            return False
        except requests.exceptions.ConnectionError as exc:
            raise _engine_error(exc) from exc
        return True

    def _kill_command(self, reader: threading.Thread) -> None:
        """Kill every process of the timed-out command, restarting the container if need be."""
        for _ in range(20):
            if not self._sweep():
                time.sleep(0.1)  # wait for the sweep's next chance at a free pid
                continue
            reader.join(timeout=5)
            if not reader.is_alive():
                return
        # Nothing else is left to try from inside; the workspace volume survives a restart.
        container = self._container()
        self._api(lambda: container.restart(timeout=0))
        reader.join(timeout=10)

    # -- files ----------------------------------------------------------------------------

    def read_file(self, path: str) -> bytes:
        """Read a workspace file; the path is resolved inside the container and must stay in it."""
        code, out, err = self._run_script(
            _READ_SCRIPT, CONTAINER_RESOLVER, normalize_relative(path), str(MAX_FILE_BYTES)
        )
        if code != 0:
            raise FileToolError(err.strip() or f"reading {path} failed (exit {code})")
        return out

    def write_file(self, path: str, data: bytes) -> None:
        """Create or replace a workspace file (and its parent directories) as the sandbox user."""
        code, out, err = self._run_script(
            _WRITE_SCRIPT, CONTAINER_RESOLVER, normalize_relative(path)
        )
        if code != 0:
            raise FileToolError(err.strip() or f"writing {path} failed (exit {code})")
        mode_line, _, resolved = out.decode("utf-8", "surrogateescape").partition("\n")
        mode = int(mode_line, 8) if mode_line.strip() else 0o644
        parent, _, name = resolved.rpartition("/")
        container = self._container()
        try:
            container.put_archive(parent or "/", _file_tar(name, data, mode))
        except docker.errors.NotFound as exc:
            raise self._died(str(exc)) from exc
        except docker.errors.APIError as exc:
            raise FileToolError(f"writing {path} failed: {exc.explanation or exc}") from exc
        except requests.exceptions.ConnectionError as exc:
            raise _engine_error(exc) from exc

    def _run_script(self, script: str, *args: str) -> tuple[int, bytes, str]:
        container = self._container()
        result = self._api(
            lambda: container.exec_run(
                ["/bin/bash", "-c", script, "loopwright-file", *args],
                user=USER,
                workdir=WORKSPACE,
                demux=True,
            )
        )
        out, err = result.output
        return int(result.exit_code), out or b"", (err or b"").decode("utf-8", "replace")

    # -- network --------------------------------------------------------------------------

    def set_network(self, enabled: bool) -> None:
        """Attach to or detach from the sandbox bridge; detached leaves only loopback."""
        if enabled == self._network:
            return
        container = self._container()
        if enabled:
            network = _sandbox_network(self._client)
            attached = self._attached_networks(container)
            if "none" in attached:
                self._api(lambda: self._client.networks.get("none").disconnect(container))
            self._api(lambda: network.connect(container))
        else:
            for name in self._attached_networks(container):
                if name == "none":
                    continue
                net = self._api(lambda n=name: self._client.networks.get(n))
                self._api(lambda n=net: n.disconnect(container, force=True))
        self._network = enabled

    # -- services (verification only) ----------------------------------------------------

    @contextlib.contextmanager
    def run_service(
        self, command: str, *, port: int, env: Mapping[str, str], log: str
    ) -> Iterator[str]:
        """Run `command` detached while the context is open; yield a loopback URL reaching `port`.

        The service and its relays carry a token of their own, so the sweep after each
        command spares them while the context is open; leaving it kills them and everything
        else but init and the keeper.
        """
        token = secrets.token_hex(16)
        argv = ["/bin/bash", "-c", _SERVICE_SCRIPT, "loopwright-service", command]
        argv.append(f"{WORKSPACE}/{normalize_relative(log)}")
        api = self._client.api
        self._container()
        exec_id = self._api(
            lambda: api.exec_create(
                self.container_id,
                argv,
                user=USER,
                workdir=WORKSPACE,
                environment={**env, SERVICE_TOKEN_VAR: token},
            )["Id"]
        )
        self._services.add(token)
        try:
            self._api(lambda: api.exec_start(exec_id, detach=True))
            relay = _PortRelay(self, port, token)
        except BaseException:
            self._services.discard(token)
            raise
        try:
            yield relay.url
        finally:
            relay.close()
            self._services.discard(token)
            if not self._closed:
                for _ in range(20):
                    if self._sweep():
                        break
                    time.sleep(0.1)

    def _attached_networks(self, container: Any) -> list[str]:
        self._api(container.reload)
        networks = container.attrs.get("NetworkSettings", {}).get("Networks") or {}
        return list(networks)

    # -- lifecycle ------------------------------------------------------------------------

    def close(self) -> None:
        """Remove the container and its workspace volume. Safe to call twice."""
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
        _remove_container(self._client, self.container_id, self._volume)

    def __enter__(self) -> DockerSandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- helpers --------------------------------------------------------------------------

    def _container(self) -> Any:
        if self._closed:
            raise SandboxError(f"sandbox for mission {self.mission_id} is already closed")
        return self._api(lambda: self._client.containers.get(self.container_id))

    def _api(self, call: Any) -> Any:
        try:
            return call()
        except docker.errors.NotFound as exc:
            raise self._died(str(exc)) from exc
        except docker.errors.APIError as exc:
            if exc.status_code == 409:
                raise self._died(str(exc.explanation or exc)) from exc
            raise SandboxError(f"Docker refused a sandbox operation: {exc}") from exc
        except requests.exceptions.ConnectionError as exc:
            raise _engine_error(exc) from exc

    def _infra_error(self, exc: BaseException) -> SandboxError:
        if isinstance(exc, requests.exceptions.ConnectionError):
            return _engine_error(exc)
        return SandboxError(f"lost the command's output stream: {exc}")

    def _died(self, detail: str) -> SandboxError:
        state = ""
        try:
            info = self._client.api.inspect_container(self.container_id)["State"]
            state = f" (status {info.get('Status')}, OOMKilled={info.get('OOMKilled')})"
        except docker.errors.NotFound:
            state = " (the container no longer exists)"
        except (docker.errors.APIError, requests.exceptions.ConnectionError):
            state = ""
        return SandboxError(
            f"the sandbox container for mission {self.mission_id} died or is unusable{state}: "
            f"{detail}"
        )

    def resolve_path(self, path: str) -> str:
        """The workspace-relative path `path` names once symlinks are resolved in the container.

        `realpath -m` follows every link that exists, as the container sees it, and takes
        the missing rest as written.
        """
        rel = normalize_relative(path)
        script = (
            'root=$(realpath -- /workspace) && p=$(realpath -m -- "/workspace/$1") || exit 4\n'
            'printf "%s\\n%s" "$root" "$p"\n'
        )
        code, out, err = self._run_script(script, rel)
        if code != 0:
            raise FileToolError(err.strip() or f"resolving {rel} failed (exit {code})")
        root, _, resolved = out.decode("utf-8", "surrogateescape").partition("\n")
        if resolved != root and not resolved.startswith(root.rstrip("/") + "/"):
            raise FileToolError(
                f"Refused: {rel!r} resolves, through a symlink, to a location outside the "
                "repository. The path must stay inside the repository."
            )
        return resolved[len(root) :].lstrip("/") or "."


class _PortRelay:
    """Relays loopback connections on the host to a port inside the sandbox, over `docker exec`.

    Each accepted connection gets its own exec running a tiny relay (stdin/stdout to the
    port), so the container needs no network at all and nothing else can reach the app.
    """

    def __init__(self, sandbox: DockerSandbox, port: int, token: str) -> None:
        self._sandbox = sandbox
        self._port = port
        self._token = token
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._closed = False
        threading.Thread(target=self._accept, name="sandbox-relay", daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return  # the listener was closed
            threading.Thread(
                target=self._relay, args=(client,), name="sandbox-relay-conn", daemon=True
            ).start()

    def _relay(self, client: socket.socket) -> None:
        api = self._sandbox._client.api
        try:
            exec_id = api.exec_create(
                self._sandbox.container_id,
                ["python3", "-I", "-c", _RELAY_SCRIPT, str(self._port)],
                stdin=True,
                stdout=True,
                stderr=False,
                user=USER,
                environment={SERVICE_TOKEN_VAR: self._token},
            )["Id"]
            response: Any = api.exec_start(exec_id, socket=True)
        except (docker.errors.APIError, requests.exceptions.ConnectionError):
            client.close()
            return
        upstream: socket.socket = getattr(response, "_sock", response)
        upstream.settimeout(None)
        if not self._track(client, upstream):
            return
        threading.Thread(
            target=_copy_until_eof, args=(client, upstream), name="sandbox-relay-up", daemon=True
        ).start()
        try:
            # Docker frames an exec's output (8-byte header: stream, 0, 0, 0, size).
            while header := _read_exact(upstream, 8):
                payload = _read_exact(upstream, int.from_bytes(header[4:8], "big"))
                if payload is None:
                    break
                client.sendall(payload)
        except OSError:
            pass
        finally:
            for sock in (client, upstream):
                self._forget(sock)

    def _track(self, *socks: socket.socket) -> bool:
        with self._lock:
            if self._closed:
                for sock in socks:
                    sock.close()
                return False
            self._open.update(socks)
        return True

    def _forget(self, sock: socket.socket) -> None:
        with self._lock:
            self._open.discard(sock)
        _close_socket(sock)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            socks = list(self._open)
            self._open.clear()
        self._listener.close()
        for sock in socks:
            _close_socket(sock)


def _read_exact(sock: socket.socket, size: int) -> bytes | None:
    buf = bytearray()
    while len(buf) < size:
        chunk = sock.recv(size - len(buf))
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


def _copy_until_eof(source: socket.socket, sink: socket.socket) -> None:
    try:
        while data := source.recv(65536):
            sink.sendall(data)
        sink.shutdown(socket.SHUT_WR)
    except OSError:
        return


def _close_socket(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    sock.close()


def _pump(chunks: Iterator[bytes], inbox: queue.Queue[bytes | BaseException | None]) -> None:
    try:
        for chunk in chunks:
            inbox.put(chunk)
    except BaseException as exc:  # noqa: BLE001 - handed to the waiting caller, which raises
        inbox.put(exc)
    inbox.put(None)


def _sandbox_network(client: docker.DockerClient) -> Any:
    """The bridge sandboxes use while they may reach the network; ICC off, so not each other.

    Its firewall (see `ensure_setup_firewall`) is checked and completed every time.
    """
    try:
        network = client.networks.get(NETWORK_NAME)
    except docker.errors.NotFound:
        try:
            network = client.networks.create(
                NETWORK_NAME,
                driver="bridge",
                options={"com.docker.network.bridge.enable_icc": "false"},
                labels={"loopwright.network": "sandbox"},
            )
        except docker.errors.APIError:
            # Another process created it between our lookup and create.
            network = client.networks.get(NETWORK_NAME)
    except requests.exceptions.ConnectionError as exc:
        raise _engine_error(exc) from exc
    ensure_setup_firewall(network.attrs)
    return network


# -- the setup network's firewall -------------------------------------------------------------

FIREWALL_TAG = "loopwright-sandbox"
"""The comment on every rule Loopwright installs; only rules carrying it are ever removed."""
METADATA_NET = "169.254.0.0/16"
_FIREWALL_HINT = (
    "run Loopwright as root on the Docker host (with iptables and Docker's DOCKER-USER chain), "
    "or set LOOPWRIGHT_NETWORK=none to run setup without a network"
)


def bridge_interface(attrs: Mapping[str, Any]) -> str:
    """The host interface of a Docker bridge network (Docker names it br-<id> by default)."""
    options = attrs.get("Options") or {}
    return str(options.get("com.docker.network.bridge.name") or f"br-{str(attrs['Id'])[:12]}")


def _subnets(attrs: Mapping[str, Any]) -> set[str]:
    configs = (attrs.get("IPAM") or {}).get("Config") or []
    return {str(c["Subnet"]) for c in configs if c.get("Subnet")}


def host_networks(route_table: str | None = None) -> list[str]:
    """The IPv4 networks this host routes to directly or through a gateway (not the default
    route), from /proc/net/route: the host's own local and private networks."""
    if route_table is None:
        try:
            route_table = Path("/proc/net/route").read_text()
        except OSError:
            return []
    nets: set[str] = set()
    for line in route_table.splitlines()[1:]:
        fields = line.split()
        if len(fields) < 8:
            continue
        dest, mask = int(fields[1], 16), int(fields[7], 16)
        if mask == 0:
            continue  # the default route: the internet, which setup may reach
        addr = socket.inet_ntoa(dest.to_bytes(4, "little"))
        prefix = bin(mask).count("1")
        nets.add(f"{addr}/{prefix}")
    return sorted(nets)


def nameservers(resolv_conf: str | None = None) -> list[str]:
    """The host's IPv4 resolvers (not loopback ones), which Docker's embedded DNS forwards to
    from inside each container's namespace."""
    if resolv_conf is None:
        try:
            resolv_conf = Path("/etc/resolv.conf").read_text()
        except OSError:
            return []
    found = []
    for line in resolv_conf.splitlines():
        words = line.split()
        if len(words) >= 2 and words[0] == "nameserver":
            try:
                socket.inet_aton(words[1])
            except OSError:
                continue  # IPv6 or malformed
            if not words[1].startswith("127.") and words[1].count(".") == 3:
                found.append(words[1])
    return found


def firewall_rules(
    interface: str, own_subnets: set[str], networks: list[str], resolvers: Sequence[str] = ()
) -> list[list[str]]:
    """`iptables` rule specs (chain first) for the setup bridge `interface`, in order.

    INPUT: nothing from the bridge reaches any address of the host (replies to connections
    the host opened excepted). Docker's embedded DNS answers inside each container's own
    namespace, so setup needs nothing on the host. DOCKER-USER (forwarded traffic): nothing
    from the bridge reaches the metadata range or the host's other networks, except DNS to
    the host's own resolvers (which may sit on one of those networks).
    """
    tag = ["-m", "comment", "--comment", FIREWALL_TAG]
    rules = [
        ["INPUT", "-i", interface, "-m", "conntrack", "--ctstate", "RELATED,ESTABLISHED",
         *tag, "-j", "ACCEPT"],
        ["INPUT", "-i", interface, *tag, "-j", "DROP"],
    ]  # fmt: skip
    for resolver in resolvers:
        for proto in ("udp", "tcp"):
            rules.append(
                ["DOCKER-USER", "-i", interface, "-d", f"{resolver}/32", "-p", proto,
                 "--dport", "53", *tag, "-j", "ACCEPT"]
            )  # fmt: skip
    for net in [METADATA_NET, *networks]:
        if net not in own_subnets:
            rules.append(["DOCKER-USER", "-i", interface, "-d", net, *tag, "-j", "DROP"])
    return rules


def _iptables(binary: str, *args: str) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            [binary, "-w", "5", *args], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SandboxError(
            f"cannot install the setup network's firewall ({binary}: {exc}); {_FIREWALL_HINT}"
        ) from exc


def _install(binary: str, interface: str, rules: list[list[str]]) -> None:
    """Add the missing `rules` (top of their chain, keeping their order) and remove rules of
    ours for other interfaces (a sandbox network that was removed and made again)."""
    chains = sorted({rule[0] for rule in rules})
    for chain in chains:
        listed = _iptables(binary, "-S", chain)
        if listed.returncode != 0:
            raise SandboxError(
                f"cannot install the setup network's firewall: `{binary} -S {chain}` failed "
                f"({listed.stderr.strip()}); {_FIREWALL_HINT}"
            )
        for line in listed.stdout.splitlines():
            words = line.split()
            if FIREWALL_TAG in words and interface not in words and words[:1] == ["-A"]:
                _iptables(binary, "-D", *words[1:])
    for chain in chains:
        position = 1
        for rule in (r for r in rules if r[0] == chain):
            if _iptables(binary, "-C", *rule).returncode != 0:
                added = _iptables(binary, "-I", chain, str(position), *rule[1:])
                if added.returncode != 0:
                    raise SandboxError(
                        f"cannot install the setup network's firewall: `{binary} -I "
                        f"{' '.join(rule)}` failed ({added.stderr.strip()}); {_FIREWALL_HINT}"
                    )
            position += 1


def ensure_setup_firewall(attrs: Mapping[str, Any]) -> list[str]:
    """Install (idempotently) the rules that keep the setup bridge off the host's own
    addresses, the metadata range and the host's other networks; return the rules as
    `iptables -S` would print them. Raises `SandboxError` saying what to do when it cannot."""
    interface = bridge_interface(attrs)
    if not Path("/sys/class/net", interface).exists():
        raise SandboxError(
            f"the setup network's bridge {interface} is not on this host (is DOCKER_HOST a "
            f"remote engine?), so Loopwright cannot firewall it; {_FIREWALL_HINT}"
        )
    binary = shutil.which("iptables") or "/usr/sbin/iptables"
    rules = firewall_rules(interface, _subnets(attrs), host_networks(), nameservers())
    _install(binary, interface, rules)
    ip6tables = shutil.which("ip6tables")
    if ip6tables and Path("/proc/net/if_inet6").exists():
        # IPv6 link-local addresses of the host are on the bridge too.
        tag = ["-m", "comment", "--comment", FIREWALL_TAG]
        _install(ip6tables, interface, [["INPUT", "-i", interface, *tag, "-j", "DROP"]])
    return ["-A " + " ".join(rule) for rule in rules]


def _remove_container(client: docker.DockerClient, container_id: str, volume: str | None) -> None:
    try:
        client.api.remove_container(container_id, force=True, v=True)
    except docker.errors.NotFound:
        pass
    except docker.errors.APIError as exc:
        if exc.status_code != 409:  # 409: removal already in progress
            raise SandboxError(
                f"could not remove sandbox container {container_id[:12]}: {exc}"
            ) from exc
    except requests.exceptions.ConnectionError as exc:
        raise _engine_error(exc) from exc
    if volume:
        _remove_volume(client, volume)


def _remove_volume(client: docker.DockerClient, name: str) -> None:
    for attempt in range(20):
        try:
            client.api.remove_volume(name, force=True)
            return
        except docker.errors.NotFound:
            return
        except docker.errors.APIError as exc:
            # 409: the container holding it is still being torn down.
            if exc.status_code != 409 or attempt == 19:
                raise SandboxError(f"could not remove sandbox volume {name}: {exc}") from exc
            time.sleep(0.05)
        except requests.exceptions.ConnectionError as exc:
            raise _engine_error(exc) from exc


class DockerProvider:
    """Creates Docker sandboxes, keeps an optional warm pool, and reaps orphaned containers.

    Warm-pool containers carry `loopwright.pool=1` and a `loopwright.mission` value naming
    the pool; labels cannot change after creation, so which mission a claimed pool container
    serves is kept in memory (and honoured by `reap_orphans`).
    """

    kind = "docker"

    def __init__(self, settings: Settings, *, client: docker.DockerClient | None = None) -> None:
        self._settings = settings
        self._client = connect(client)
        self._owns_client = client is None
        self._instance = uuid.uuid4().hex[:12]
        self._lock = threading.Lock()
        self._idle: deque[tuple[str, str, bool]] = deque()
        self._claimed: dict[str, str] = {}
        self._fillers: list[threading.Thread] = []
        self._starting = 0
        self._changed = threading.Condition(self._lock)
        self._closed = False
        if settings.warm_pool > 0:
            self._refill_later()

    @property
    def client(self) -> docker.DockerClient:
        return self._client

    # -- creating -------------------------------------------------------------------------

    def create(self, mission_id: str, tree: Path, *, network: bool) -> DockerSandbox:
        """A started sandbox whose /workspace holds a copy of `tree`, from the pool if possible."""
        if not tree.is_dir():
            raise SandboxError(f"{tree} is not a directory; nothing to copy into the sandbox")
        with self._lock:
            if self._closed:
                raise SandboxError("the Docker sandbox provider is closed")
            pooled = self._idle.popleft() if self._idle else None
        if pooled is not None:
            container_id, volume, pool_network = pooled
            sandbox = DockerSandbox(
                self._client, self._settings, container_id, volume, mission_id,
                network=pool_network,
            )  # fmt: skip
            with self._lock:
                self._claimed[container_id] = mission_id
            try:
                self._fill(sandbox, tree)
                sandbox.set_network(network)
            except SandboxError:
                # A pool container that died while idle: fall back to a cold start.
                self._discard(sandbox)
            except BaseException:
                self._discard(sandbox)
                raise
            else:
                # Refill only now: a container starting alongside slows the copy above.
                self._refill_later()
                return sandbox
        return self._cold(mission_id, tree, network=network)

    def _cold(self, mission_id: str, tree: Path, *, network: bool) -> DockerSandbox:
        container_id, volume = self._start_container({MISSION_LABEL: mission_id}, network=network)
        sandbox = DockerSandbox(
            self._client, self._settings, container_id, volume, mission_id, network=network
        )
        with self._lock:
            self._claimed[container_id] = mission_id
        try:
            self._fill(sandbox, tree)
        except BaseException:
            self._discard(sandbox)
            raise
        return sandbox

    def _discard(self, sandbox: DockerSandbox) -> None:
        with self._lock:
            self._claimed.pop(sandbox.container_id, None)
        sandbox.close()

    def _fill(self, sandbox: DockerSandbox, tree: Path) -> None:
        archive = _workspace_tar(tree)
        try:
            ok = sandbox._api(
                lambda: self._client.api.put_archive(sandbox.container_id, WORKSPACE, archive)
            )
        except SandboxError as exc:
            if "no space left" in str(exc).lower():
                raise SandboxError(
                    f"{tree} does not fit in the sandbox workspace "
                    f"({self._settings.sandbox_limits.tmpfs_mb} MB); raise "
                    "LOOPWRIGHT_SANDBOX_TMPFS_MB"
                ) from exc
            raise
        finally:
            archive.close()
        if not ok:
            raise SandboxError(f"Docker did not accept the copy of {tree} into the sandbox")

    def _start_container(self, labels: dict[str, str], *, network: bool) -> tuple[str, str]:
        """Create and start one hardened container with its own workspace volume."""
        limits = self._settings.sandbox_limits
        suffix = uuid.uuid4().hex[:12]
        volume = f"loopwright-ws-{suffix}"
        labels = {
            **labels,
            PROVIDER_LABEL: self._instance,
            VOLUME_LABEL: volume,
            OWNER_LABEL: owner_id(),
        }
        api = self._client.api
        # The workspace is a tmpfs *volume*, not a plain tmpfs mount: Docker's archive
        # endpoints (used to copy the repository in and files out) only reach volumes, and a
        # volume outlives a container restart, the last resort against an unkillable command.
        self._engine(
            lambda: api.create_volume(
                volume,
                driver="local",
                driver_opts={
                    "type": "tmpfs",
                    "device": "tmpfs",
                    "o": f"size={limits.tmpfs_mb}m,uid={SANDBOX_UID},gid={SANDBOX_UID},mode=0755",
                },
                labels=labels,
            )
        )
        host_config = api.create_host_config(
            cap_drop=["ALL"],
            security_opt=["no-new-privileges"],
            read_only=True,
            privileged=False,
            init=True,
            pids_limit=limits.pids,
            mem_limit=f"{limits.memory_mb}m",
            memswap_limit=f"{limits.memory_mb}m",
            nano_cpus=int(limits.cpus * 1e9),
            tmpfs={
                "/tmp": f"rw,exec,nosuid,nodev,size={limits.tmpfs_mb}m",
                HOME: (
                    f"rw,exec,nosuid,nodev,size={limits.tmpfs_mb}m,"
                    f"uid={SANDBOX_UID},gid={SANDBOX_UID},mode=0700"
                ),
            },
            mounts=[docker.types.Mount(WORKSPACE, volume, type="volume")],
            network_mode=NETWORK_NAME if network else "none",
        )
        if network:
            _sandbox_network(self._client)
        try:
            created = self._engine(
                lambda: api.create_container(
                    self._settings.sandbox_image,
                    command=["sleep", "infinity"],
                    user=USER,
                    working_dir=WORKSPACE,
                    environment=SANDBOX_ENV,
                    hostname="sandbox",
                    labels=labels,
                    host_config=host_config,
                )
            )
        except BaseException:
            _remove_volume(self._client, volume)
            raise
        container_id = str(created["Id"])
        try:
            self._engine(lambda: api.start(container_id))
        except BaseException:
            _remove_container(self._client, container_id, volume)
            raise
        return container_id, volume

    def _engine(self, call: Any) -> Any:
        try:
            return call()
        except docker.errors.ImageNotFound as exc:
            raise SandboxError(
                f"the sandbox image {self._settings.sandbox_image} is missing; {BUILD_HINT}"
            ) from exc
        except docker.errors.APIError as exc:
            if exc.status_code == 404 and "image" in str(exc).lower():
                raise SandboxError(
                    f"the sandbox image {self._settings.sandbox_image} is missing; {BUILD_HINT}"
                ) from exc
            raise SandboxError(f"Docker could not start a sandbox: {exc}") from exc
        except requests.exceptions.ConnectionError as exc:
            raise _engine_error(exc) from exc

    # -- warm pool ------------------------------------------------------------------------

    @property
    def pool_size(self) -> int:
        """Idle containers ready to be claimed."""
        with self._lock:
            return len(self._idle)

    def fill_pool(self) -> None:
        """Start pool containers until `settings.warm_pool` are idle (blocking)."""
        size = self._settings.warm_pool
        while True:
            with self._changed:
                # Starting ones count too, so concurrent fillers never overshoot the size;
                # wait for those another filler is starting.
                while (
                    not self._closed and len(self._idle) < size <= len(self._idle) + self._starting
                ):
                    self._changed.wait(timeout=1)
                if self._closed or len(self._idle) >= size:
                    return
                self._starting += 1
            try:
                self._add_pool_member()
            finally:
                with self._changed:
                    self._starting -= 1
                    self._changed.notify_all()

    def _add_pool_member(self) -> None:
        network = self._settings.network != "none"
        labels = {MISSION_LABEL: f"pool-{self._instance}", POOL_LABEL: "1"}
        container_id, volume = self._start_container(labels, network=network)
        with self._lock:
            if not self._closed:
                self._idle.append((container_id, volume, network))
                return
        _remove_container(self._client, container_id, volume)

    def _refill_later(self) -> None:
        thread = threading.Thread(target=self._refill, name="sandbox-pool-fill", daemon=True)
        with self._lock:
            if self._closed:
                return
            self._fillers = [t for t in self._fillers if t.is_alive()]
            self._fillers.append(thread)
        thread.start()

    def _refill(self) -> None:
        try:
            self.fill_pool()
        except SandboxError:
            # The pool is an optimisation: missions fall back to cold starts, which report
            # the same engine or image problem to the user.
            return

    # -- cleanup --------------------------------------------------------------------------

    def reap_orphans(self, active_mission_ids: set[str]) -> list[str]:
        """Remove labelled containers (and volumes) of missions not active; return their ids.

        Containers owned by another Loopwright process that is still running are left to it.
        """
        with self._lock:
            idle = {cid for cid, _, _ in self._idle}
            claimed = dict(self._claimed)
        try:
            containers = self._client.api.containers(all=True, filters={"label": MISSION_LABEL})
        except requests.exceptions.ConnectionError as exc:
            raise _engine_error(exc) from exc
        removed = []
        for info in containers:
            cid = str(info["Id"])
            labels = info.get("Labels") or {}
            if cid in idle:
                continue
            if labels.get(PROVIDER_LABEL) == self._instance and cid not in claimed:
                continue  # a pool member still being started by this provider
            mission = claimed.get(cid, labels.get(MISSION_LABEL, ""))
            if mission in active_mission_ids:
                continue
            owner = labels.get(OWNER_LABEL, "")
            if owner and owner != owner_id() and owner_alive(owner):
                continue  # another live Loopwright process's sandbox, not ours to judge
            _remove_container(self._client, cid, labels.get(VOLUME_LABEL))
            with self._lock:
                self._claimed.pop(cid, None)
            removed.append(cid)
        self._reap_volumes()
        return removed

    def reap_abandoned(self) -> list[str]:
        """Remove sandboxes whose owning process on this host has exited.

        Safe while other Loopwright processes run missions on the same engine: only
        containers of dead owners go. Returns the removed container ids.
        """
        try:
            containers = self._client.api.containers(all=True, filters={"label": OWNER_LABEL})
        except requests.exceptions.ConnectionError as exc:
            raise _engine_error(exc) from exc
        removed = []
        for info in containers:
            labels = info.get("Labels") or {}
            if owner_alive(labels.get(OWNER_LABEL, "")):
                continue
            _remove_container(self._client, str(info["Id"]), labels.get(VOLUME_LABEL))
            removed.append(str(info["Id"]))
        self._reap_volumes()
        return removed

    def _reap_volumes(self) -> None:
        try:
            volumes = self._client.api.volumes(filters={"label": MISSION_LABEL}).get("Volumes")
        except requests.exceptions.ConnectionError as exc:
            raise _engine_error(exc) from exc
        for vol in volumes or []:
            try:
                self._client.api.remove_volume(vol["Name"])
            except docker.errors.NotFound:
                continue
            except docker.errors.APIError as exc:
                if exc.status_code != 409:  # 409: in use by a live sandbox
                    raise SandboxError(
                        f"could not remove sandbox volume {vol['Name']}: {exc}"
                    ) from exc

    def close(self) -> None:
        """Remove idle pool containers, stop refilling; claimed sandboxes stay with their owners."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            idle = list(self._idle)
            self._idle.clear()
            fillers = list(self._fillers)
        for thread in fillers:
            thread.join(timeout=30)
        for container_id, volume, _ in idle:
            _remove_container(self._client, container_id, volume)
        if self._owns_client:
            self._client.close()


def _process_start(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (field 22 of /proc/PID/stat)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def owner_id(pid: int | None = None) -> str:
    """`host:pid:start` naming this process; the start time guards against pid reuse."""
    pid = os.getpid() if pid is None else pid
    return f"{socket.gethostname()}:{pid}:{_process_start(pid) or '?'}"


def owner_alive(owner: str) -> bool:
    """Whether the process named by an owner label still runs (other hosts count as alive)."""
    host, _, rest = owner.partition(":")
    pid_text, _, start = rest.partition(":")
    if host != socket.gethostname() or not pid_text.isdigit():
        return True
    return _process_start(int(pid_text)) == start


__all__ = [
    "DockerProvider",
    "DockerSandbox",
    "connect",
    "ensure_setup_firewall",
    "firewall_rules",
    "host_networks",
    "nameservers",
    "owner_alive",
    "owner_id",
]
