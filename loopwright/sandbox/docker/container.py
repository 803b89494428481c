"""One running sandbox container: commands, file tools, the network switch and services."""

from __future__ import annotations

import codecs
import contextlib
import io
import queue
import secrets
import tarfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import IO, Any

import docker
import docker.errors

from loopwright.config import SandboxLimits, Settings
from loopwright.sandbox.base import (
    MAX_FILE_BYTES,
    SANDBOX_UID,
    WORKSPACE,
    ExecResult,
    FileToolError,
    OutputCallback,
    RawCallback,
    SandboxError,
)
from loopwright.sandbox.docker.channel import (
    Call,
    ChannelClosed,
    ResidentChannel,
    boot_resident,
)
from loopwright.sandbox.docker.copy_in import Sink, write_tree_tar
from loopwright.sandbox.docker.engine import (
    ENGINE_FAILURES,
    LIMITS_VAR,
    SERVICE_TOKEN_VAR,
    USER,
    WRAPPER_VAR,
    engine_error,
    remove_container,
    script,
)
from loopwright.sandbox.docker.network import sandbox_network
from loopwright.sandbox.docker.relay import PortRelay
from loopwright.sandbox.docker.scripts.resident import CHUNK
from loopwright.sandbox.output import CappedOutput
from loopwright.sandbox.paths import CONTAINER_RESOLVER, normalize_relative

TIMEOUT_EXIT = 124
WRAPPER_CHECK_S = 0.5
"""While a command's output is open, how often to check that its wrapper still runs."""
CHANNEL_GRACE_S = 30.0
"""How long past a command's timeout the host waits for the resident server to report it."""
SCRIPT_TIMEOUT_S = 120.0
"""How long a file script or a copy may take before the channel counts as stuck."""
LIMITS_WAIT_S = 10.0
"""How long the host waits to learn which limits a command killed at its timeout hit, on
the `docker exec` path (no notes after that)."""
PING_WAIT_S = 2.0
"""How long a server that let a request's deadline pass gets to answer a ping (the error
then says which: the request's work is stuck, or the whole server)."""


def exec_wrapper() -> str:
    """The command wrapper: the sweep functions, then the wrapper that runs the command."""
    return script("sweep.sh") + script("exec_wrapper.sh")


LIMIT_NAMES = ("memory", "pids")
"""The limits the resident server may say a timed-out command hit, in the order noted."""
LIMIT_NOTE_TAIL = 400
"""Characters at the end of a timed-out command's output searched for a limit's note that
the wrapper wrote itself before it was killed."""


def _limit_note(name: str, limits: SandboxLimits) -> str:
    """The note for a limit the container hit while a command ran: the wrapper prints it
    (`exec_wrapper.sh`), or the host for a command killed at its timeout before it could."""
    if name == "memory":
        return (
            "\n[sandbox] a process was killed by the out-of-memory killer "
            f"(limit {limits.memory_mb} MB)\n"
        )
    if name == "pids":
        return f"\n[sandbox] the process limit ({limits.pids}) was reached: fork failed\n"
    return ""


def sweeper() -> str:
    """The sweep on its own (after a timeout, or when a wrapper died before sweeping)."""
    return script("sweep.sh") + script("sweep_all.sh")


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
        # The server's answer is awaited on first use, so that it overlaps the copy's packing.
        self._channel = ResidentChannel.open(client, container_id)
        self._answered = False
        self._answer_lock = threading.Lock()

    @property
    def channel(self) -> ResidentChannel | None:
        """The channel commands and file tools go through (None: each is a `docker exec`)."""
        with self._answer_lock:
            if not self._answered and self._channel is not None:
                self._answered = True
                if not self._channel.wait_ready():
                    self._channel.close()
                    self._channel = None
            return self._channel

    @property
    def client(self) -> docker.DockerClient:
        return self._client

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

        The output ends with a note for a memory or process limit the container hit while
        the command ran: the wrapper writes it, or the host for a command killed at its
        timeout (the wrapper is killed with it), from what the resident server says or, on
        the `docker exec` path, from the counts the wrapper left (`limits_since.sh`).
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
            _limit_note("memory", limits),
            _limit_note("pids", limits),
            *services,
        ]
        capture = CappedOutput(limits.output_cap_bytes)
        decoder = codecs.getincrementaldecoder("utf-8")("replace")

        def take(chunk: bytes) -> None:
            if on_raw is not None:
                on_raw(chunk)
            streamed = capture.add(chunk)
            if on_output is not None and streamed:
                text = decoder.decode(streamed)
                if text:
                    on_output(text)

        started = time.monotonic()
        env = {WRAPPER_VAR: exec_wrapper()}
        hit: list[str] = []
        if (channel := self.channel) is not None:
            exit_code, timed_out, hit = self._exec_resident(channel, argv, env, timeout_s, take)
        else:
            limits_file = f"/tmp/.loopwright-limits-{token}"
            env[LIMITS_VAR] = limits_file
            exit_code, timed_out = self._exec_engine(argv, env, timeout_s, take, token)
            if timed_out:
                hit = self._limits_since(limits_file)
        if timed_out:
            output = capture.text()
            said = output[-LIMIT_NOTE_TAIL:]  # the wrapper may have written one itself
            notes = (_limit_note(name, limits) for name in hit)
            note = "".join(n for n in notes if n.strip() not in said) + (
                f"\n[sandbox] timed out after {timeout_s:g} s; "
                "the command's processes were killed\n"
            )
            return ExecResult(
                output=output + note,
                exit_code=TIMEOUT_EXIT,
                timed_out=True,
                truncated=capture.truncated,
                duration_s=time.monotonic() - started,
            )
        return ExecResult(
            output=capture.text(),
            exit_code=exit_code,
            truncated=capture.truncated,
            duration_s=time.monotonic() - started,
        )

    def _exec_resident(
        self,
        channel: ResidentChannel,
        argv: list[str],
        env: dict[str, str],
        timeout_s: float,
        take: RawCallback,
    ) -> tuple[int, bool, list[str]]:
        """Run the wrapper through the resident server, which enforces the timeout itself;
        with a timeout, the limits the container hit from the command's start until it was
        killed (the wrapper, killed with it, could not say)."""
        sweep = {"argv": self._sweep_argv(), "env": {}, "cwd": WORKSPACE}
        request = self._request(
            channel,
            {
                "op": "exec",
                "argv": argv,
                "env": env,
                "cwd": WORKSPACE,
                "timeout": timeout_s,
                "sweep": sweep,
            },
        )
        deadline = time.monotonic() + timeout_s + CHANNEL_GRACE_S
        try:
            while True:
                header, payload = self._response(channel, request, deadline, "a command")
                op = header.get("op")
                if op == "out":
                    take(payload)
                elif op == "exit":
                    break
                else:
                    raise self._died(f"the command could not be started: {header.get('message')}")
        finally:
            request.done()
        if header.get("timed_out"):
            # As after any timeout, sweep from outside too; a tree that outlived the server's
            # own kill is ended by a restart (the workspace volume survives it).
            if header.get("stuck"):
                self._restart()
            else:
                self._sweep_engine()
            said = header.get("limits")
            hit = [name for name in LIMIT_NAMES if isinstance(said, list) and name in said]
            return TIMEOUT_EXIT, True, hit
        return int(header["code"]), False, []

    def _exec_engine(
        self,
        argv: list[str],
        env: dict[str, str],
        timeout_s: float,
        take: RawCallback,
        token: str,
    ) -> tuple[int, bool]:
        """Run the wrapper as a `docker exec` of its own (an image without the server)."""
        started = time.monotonic()
        api = self._client.api
        exec_id = self.run_api(
            lambda: api.exec_create(
                self.container_id,
                argv,
                stdout=True,
                stderr=True,
                user=USER,
                workdir=WORKSPACE,
                environment=env,
            )["Id"]
        )
        chunks = self.run_api(lambda: api.exec_start(exec_id, stream=True, demux=False))
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
                if not orphaned and not self.run_api(lambda: api.exec_inspect(exec_id)["Running"]):
                    # The wrapper is gone (the command killed it) but something it left still
                    # holds the output open: sweep now rather than when that ends.
                    orphaned = True
                    self._sweep()
                continue
            if item is None:
                break
            if isinstance(item, BaseException):
                raise self._infra_error(item) from item
            take(item)
        reader.join(timeout=5)
        while not inbox.empty():
            item = inbox.get_nowait()
            if isinstance(item, bytes):
                take(item)
        if timed_out:
            return TIMEOUT_EXIT, True
        exit_code = self._exit_code(exec_id)
        if exit_code > 128:
            # A signal ended the wrapper, possibly before its sweep (the command may kill
            # its own parent); sweep again from outside.
            self._sweep()
        return exit_code, False

    def _limits_since(self, limits_file: str) -> list[str]:
        """The limits a command killed at its timeout hit since its start, on the `docker
        exec` path (`limits_since.sh`); none where that cannot be told."""
        argv = ["/bin/bash", "-c", script("sweep.sh") + script("limits_since.sh"),
                "loopwright-limits", limits_file]  # fmt: skip
        api = self._client.api
        try:
            exec_id = api.exec_create(self.container_id, argv, user=USER)["Id"]
            chunks = api.exec_start(exec_id, stream=True, demux=False)
        except (docker.errors.APIError, *ENGINE_FAILURES):
            return []
        # Streamed and waited for a bounded time: a non-streaming exec waits for its end
        # without a timeout, and a file swapped for a FIFO would block the script's read.
        # A script still blocked is killed by the next command's sweep.
        inbox: queue.Queue[bytes | BaseException | None] = queue.Queue()
        threading.Thread(
            target=_pump, args=(chunks, inbox), name="sandbox-limits", daemon=True
        ).start()
        output = b""
        deadline = time.monotonic() + LIMITS_WAIT_S
        while (wait := deadline - time.monotonic()) > 0:
            try:
                item = inbox.get(timeout=wait)
            except queue.Empty:
                break
            if not isinstance(item, bytes):
                break
            output += item
        said = output.decode("utf-8", "replace").split()
        return [name for name in LIMIT_NAMES if name in said]

    def _exit_code(self, exec_id: str) -> int:
        api = self._client.api
        for _ in range(200):
            info = self.run_api(lambda: api.exec_inspect(exec_id))
            code = info.get("ExitCode")
            if not info.get("Running") and code is not None:
                if code < 0:
                    raise self._died("the command could not be started")
                return int(code)
            time.sleep(0.01)
        raise self._died("the command's exit status never arrived")

    def _sweep_argv(self) -> list[str]:
        return ["/bin/bash", "-c", sweeper(), "loopwright-sweep", *sorted(self._services)]

    def _sweep(self) -> bool:
        """Kill every process but init, the keeper and open services'; False if it could not
        start (typically no pid is free: a fork bomb)."""
        if (channel := self.channel) is None:
            return self._sweep_engine()
        try:
            code, _, _ = self._run_resident(channel, self._sweep_argv(), {}, b"")
        except _NotStarted:
            return False
        return code >= 0

    def _sweep_engine(self) -> bool:
        """The sweep as a `docker exec` of its own."""
        api = self._client.api
        try:
            api.exec_start(api.exec_create(self.container_id, self._sweep_argv(), user=USER)["Id"])
        except docker.errors.NotFound as exc:
            raise self._died(str(exc)) from exc
        except docker.errors.APIError as exc:
            if exc.status_code == 409:
                raise self._died(str(exc.explanation or exc)) from exc
            return False
        except ENGINE_FAILURES as exc:
            raise engine_error(exc) from exc
        return True

    def _restart(self) -> None:
        """Restart the container, the last resort against an unkillable command.

        The workspace volume survives; the restarted server gets a new channel.
        """
        container = self._container()
        if self._channel is not None:
            self._channel.close()
            self._channel = None
        self.run_api(lambda: container.restart(timeout=0))
        boot_resident(self._client, self.container_id)
        self._channel = ResidentChannel.open(self._client, self.container_id)
        self._answered = False

    def _kill_command(self, reader: threading.Thread) -> None:
        """Kill every process of the timed-out command, restarting the container if need be."""
        for _ in range(20):
            if not self._sweep_engine():
                time.sleep(0.1)  # wait for the sweep's next chance at a free pid
                continue
            reader.join(timeout=5)
            if not reader.is_alive():
                return
        # Nothing else is left to try from inside; the workspace volume survives a restart.
        self._restart()
        reader.join(timeout=10)

    # -- files ----------------------------------------------------------------------------

    def read_file(self, path: str) -> bytes:
        """Read a workspace file; the path is resolved inside the container and must stay in it."""
        rel = normalize_relative(path)
        if (channel := self.channel) is not None:
            code, out, err = self._file_request(channel, "read", rel, limit=MAX_FILE_BYTES)
        else:
            code, out, err = self._run_script(
                script("read_file.sh"), CONTAINER_RESOLVER, rel, str(MAX_FILE_BYTES)
            )
        if code != 0:
            raise FileToolError(err.strip() or f"reading {path} failed (exit {code})")
        return out

    def write_file(self, path: str, data: bytes) -> None:
        """Create or replace a workspace file (and its parent directories) as the sandbox user."""
        rel = normalize_relative(path)
        if (channel := self.channel) is not None:
            code, out, err = self._file_request(channel, "write", rel)
        else:
            code, out, err = self._run_script(script("write_file.sh"), CONTAINER_RESOLVER, rel)
        if code != 0:
            raise FileToolError(err.strip() or f"writing {path} failed (exit {code})")
        mode_line, _, resolved = out.decode("utf-8", "surrogateescape").partition("\n")
        mode = int(mode_line, 8) if mode_line.strip() else 0o644
        parent, _, name = resolved.rpartition("/")
        archive = _file_tar(name, data, mode)
        if (channel := self.channel) is not None:
            try:
                self._untar(channel, parent or "/", io.BytesIO(archive))
            except _Refused as exc:
                raise FileToolError(f"writing {path} failed: {exc}") from exc
            return
        container = self._container()
        try:
            container.put_archive(parent or "/", archive)
        except docker.errors.NotFound as exc:
            raise self._died(str(exc)) from exc
        except docker.errors.APIError as exc:
            raise FileToolError(f"writing {path} failed: {exc.explanation or exc}") from exc
        except ENGINE_FAILURES as exc:
            raise engine_error(exc) from exc

    def put_archive(self, path: str, archive: IO[bytes]) -> None:
        """Unpack a tar stream under `path` in the container, as the sandbox user.

        Raises `SandboxError` (with the system's words, e.g. "No space left on device").
        """
        if (channel := self.channel) is not None:
            try:
                self._untar(channel, path, archive)
            except _Refused as exc:
                raise SandboxError(f"copying into the sandbox failed: {exc}") from exc
            return
        ok = self.run_api(lambda: self._client.api.put_archive(self.container_id, path, archive))
        if not ok:
            raise SandboxError("Docker did not accept the copy into the sandbox")

    def copy_tree(self, tree: Path) -> bool:
        """Stream `tree`'s contents into the workspace, packed as the container unpacks;
        False (nothing copied) where there is no channel: use `put_archive` then."""
        channel = self.channel
        if channel is None:
            return False
        try:
            self._untar(channel, WORKSPACE, lambda sink: write_tree_tar(tree, sink))
        except _Refused as exc:
            raise SandboxError(f"copying into the sandbox failed: {exc}") from exc
        return True

    def _untar(
        self, channel: ResidentChannel, dest: str, archive: IO[bytes] | Callable[[Sink], None]
    ) -> None:
        request = self._request(channel, {"op": "untar", "dest": dest})
        try:
            writer = _FrameWriter(request)
            try:
                if callable(archive):
                    archive(writer)
                else:
                    while chunk := archive.read(CHUNK):
                        writer.write(chunk)
                writer.flush()
            except ChannelClosed as exc:
                raise self._channel_died(channel, exc) from exc
            finally:
                # The server unpacks what it got and answers, however packing ended.
                with contextlib.suppress(ChannelClosed):
                    request.send("end")
            deadline = time.monotonic() + SCRIPT_TIMEOUT_S
            header, _ = self._response(channel, request, deadline, "a copy")
        finally:
            request.done()
        if header.get("op") != "done":
            raise _Refused(str(header.get("message") or "the copy failed"))

    def _run_script(self, source: str, *args: str) -> tuple[int, bytes, str]:
        argv = ["/bin/bash", "-c", source, "loopwright-file", *args]
        if (channel := self.channel) is not None:
            try:
                return self._run_resident(channel, argv, {}, b"")
            except _NotStarted as exc:
                raise FileToolError(str(exc)) from exc
        container = self._container()
        result = self.run_api(
            lambda: container.exec_run(
                argv,
                user=USER,
                workdir=WORKSPACE,
                demux=True,
            )
        )
        out, err = result.output
        return int(result.exit_code), out or b"", (err or b"").decode("utf-8", "replace")

    def _file_request(
        self, channel: ResidentChannel, kind: str, rel: str, *, limit: int = 0
    ) -> tuple[int, bytes, str]:
        """A file read, or a write's preparation, done by the server itself (the answers of
        `read_file.sh` / `write_file.sh` without starting a process for them)."""
        header = {"op": "file", "kind": kind, "path": rel, "limit": limit}
        request = self._request(channel, {**header, "resolver": CONTAINER_RESOLVER})
        chunks: list[bytes] = []
        try:
            deadline = time.monotonic() + SCRIPT_TIMEOUT_S
            while True:
                answer, data = self._response(channel, request, deadline, f"a file {kind}")
                if answer.get("op") == "out":
                    chunks.append(data)
                    continue
                if answer.get("op") != "done":
                    raise FileToolError(str(answer.get("message") or f"the file {kind} failed"))
                return int(answer["code"]), b"".join(chunks), str(answer.get("stderr") or "")
        finally:
            request.done()

    def _run_resident(
        self, channel: ResidentChannel, argv: list[str], env: dict[str, str], stdin: bytes
    ) -> tuple[int, bytes, str]:
        """Run a script through the server to its end: (exit status, stdout, stderr)."""
        request = self._request(
            channel, {"op": "run", "argv": argv, "env": env, "cwd": WORKSPACE}, stdin
        )
        try:
            deadline = time.monotonic() + SCRIPT_TIMEOUT_S
            header, out = self._response(channel, request, deadline, "a file script")
        finally:
            request.done()
        if header.get("op") != "done":
            raise _NotStarted(str(header.get("message") or "the script could not be started"))
        return int(header["code"]), out, str(header.get("stderr") or "")

    def _request(
        self, channel: ResidentChannel, header: dict[str, Any], payload: bytes = b""
    ) -> Call:
        if self._closed:
            raise SandboxError(f"sandbox for mission {self.mission_id} is already closed")
        try:
            return channel.call(header, payload)
        except ChannelClosed as exc:
            raise self._channel_died(channel, exc) from exc

    def _response(
        self, channel: ResidentChannel, request: Call, deadline: float, what: str
    ) -> tuple[dict[str, Any], bytes]:
        """The request's next response; `SandboxError` when the server dies or goes silent."""
        try:
            answer = request.next(deadline)
        except ChannelClosed as exc:
            raise self._channel_died(channel, exc) from exc
        if answer is None:
            detail = f"the resident exec server stopped answering while running {what}"
            raise self._died(detail + _silence(channel))
        return answer

    def _channel_died(self, channel: ResidentChannel, exc: ChannelClosed) -> SandboxError:
        detail = f"the resident exec server is gone ({exc})" + _said(channel)
        if self._closed:
            return SandboxError(f"sandbox for mission {self.mission_id} is already closed")
        return self._died(detail)

    # -- network --------------------------------------------------------------------------

    def set_network(self, enabled: bool) -> None:
        """Attach to or detach from the sandbox bridge; detached leaves only loopback."""
        if enabled == self._network:
            return
        container = self._container()
        if enabled:
            network = sandbox_network(self._client)
            attached = self._attached_networks(container)
            if "none" in attached:
                self.run_api(lambda: self._client.networks.get("none").disconnect(container))
            self.run_api(lambda: network.connect(container))
        else:
            for name, network_id in self._attached_networks(container).items():
                if name == "none":
                    continue
                net = self.run_api(lambda n=network_id: self._client.networks.get(n))
                self.run_api(lambda n=net: n.disconnect(container, force=True))
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
        argv = ["/bin/bash", "-c", script("service.sh"), "loopwright-service", command]
        argv.append(f"{WORKSPACE}/{normalize_relative(log)}")
        environment = {**env, SERVICE_TOKEN_VAR: token}
        self._container()
        self._services.add(token)
        try:
            self._start_service(argv, environment)
            relay = PortRelay(self, port, token)
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

    def _start_service(self, argv: list[str], env: dict[str, str]) -> None:
        channel = self.channel
        if channel is not None:
            request = self._request(
                channel, {"op": "spawn", "argv": argv, "env": env, "cwd": WORKSPACE}
            )
            try:
                deadline = time.monotonic() + SCRIPT_TIMEOUT_S
                header, _ = self._response(channel, request, deadline, "a service")
            finally:
                request.done()
            if header.get("op") != "done":
                raise SandboxError(f"the service could not be started: {header.get('message')}")
            return
        api = self._client.api
        exec_id = self.run_api(
            lambda: api.exec_create(
                self.container_id, argv, user=USER, workdir=WORKSPACE, environment=env
            )["Id"]
        )
        self.run_api(lambda: api.exec_start(exec_id, detach=True))

    def _attached_networks(self, container: Any) -> dict[str, str]:
        """Name to id of each network the container is on (ids: a name can be held twice)."""
        self.run_api(container.reload)
        networks = container.attrs.get("NetworkSettings", {}).get("Networks") or {}
        return {name: str(info.get("NetworkID") or name) for name, info in networks.items()}

    # -- lifecycle ------------------------------------------------------------------------

    def close(self) -> None:
        """Remove the container and its workspace volume. Safe to call twice."""
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
        if self._channel is not None:
            self._channel.close()
        remove_container(self._client, self.container_id, self._volume)

    def __enter__(self) -> DockerSandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- helpers --------------------------------------------------------------------------

    def _container(self) -> Any:
        if self._closed:
            raise SandboxError(f"sandbox for mission {self.mission_id} is already closed")
        return self.run_api(lambda: self._client.containers.get(self.container_id))

    def run_api(self, call: Any) -> Any:
        """Run an engine call for this sandbox; engine failures become `SandboxError`."""
        try:
            return call()
        except docker.errors.NotFound as exc:
            raise self._died(str(exc)) from exc
        except docker.errors.APIError as exc:
            if exc.status_code == 409:
                raise self._died(str(exc.explanation or exc)) from exc
            raise SandboxError(f"Docker refused a sandbox operation: {exc}") from exc
        except ENGINE_FAILURES as exc:
            raise engine_error(exc) from exc

    def _infra_error(self, exc: BaseException) -> SandboxError:
        if isinstance(exc, ENGINE_FAILURES):
            return engine_error(exc)
        return SandboxError(f"lost the command's output stream: {exc}")

    def _died(self, detail: str) -> SandboxError:
        state = ""
        try:
            info = self._client.api.inspect_container(self.container_id)["State"]
            state = f" (status {info.get('Status')}, OOMKilled={info.get('OOMKilled')})"
        except docker.errors.NotFound:
            state = " (the container no longer exists)"
        except (docker.errors.APIError, *ENGINE_FAILURES):
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
        code, out, err = self._run_script(script("resolve_path.sh"), rel)
        if code != 0:
            raise FileToolError(err.strip() or f"resolving {rel} failed (exit {code})")
        root, _, resolved = out.decode("utf-8", "surrogateescape").partition("\n")
        if resolved != root and not resolved.startswith(root.rstrip("/") + "/"):
            raise FileToolError(
                f"Refused: {rel!r} resolves, through a symlink, to a location outside the "
                "repository. The path must stay inside the repository."
            )
        return resolved[len(root) :].lstrip("/") or "."


def _said(channel: ResidentChannel) -> str:
    said = channel.stderr_tail
    return f"; it said: {said[-500:]}" if said else ""


def _silence(channel: ResidentChannel) -> str:
    """What is known of a server that let a request's deadline pass: whether its reading
    loop still answers (only that request's work is stuck) or not (the whole process is
    stuck or stopped), and what it last wrote to stderr.

    The ping is sent from a thread of its own, waited for a bounded time: its write may
    wait behind another request's, blocked on a server that reads nothing. Such a thread
    ends when the sandbox closes the channel."""
    heard: list[str] = []

    def ping() -> None:
        try:
            call = channel.call({"op": "ping"})
        except ChannelClosed as exc:
            heard.append(f"; the channel then closed ({exc})")
            return
        try:
            pong = call.next(time.monotonic() + PING_WAIT_S)
        except ChannelClosed as exc:
            heard.append(f"; the channel then closed ({exc})")
            return
        finally:
            call.done()
        if pong is not None and pong[0].get("op") == "pong":
            heard.append("; it still answers a ping: that request's own work is stuck")
        else:
            heard.append(f"; it did not answer a ping within {PING_WAIT_S:g} s either")

    pinging = threading.Thread(target=ping, name="sandbox-ping", daemon=True)
    pinging.start()
    pinging.join(PING_WAIT_S + 1)
    sent = heard[0] if heard else f"; no ping could be sent to it within {PING_WAIT_S + 1:g} s"
    return sent + _said(channel)


class _FrameWriter:
    """A writer that sends what it is given as a copy's `data` frames of `CHUNK` bytes."""

    def __init__(self, request: Call) -> None:
        self._request = request
        self._buf = bytearray()

    def write(self, data: bytes) -> int:
        self._buf += data
        while len(self._buf) >= CHUNK:
            self._request.send("data", bytes(self._buf[:CHUNK]))
            del self._buf[:CHUNK]
        return len(data)

    def flush(self) -> None:
        if self._buf:
            self._request.send("data", bytes(self._buf))
            self._buf.clear()


class _NotStarted(Exception):
    """The server could not start a process (typically: no pid is free)."""


class _Refused(Exception):
    """The server refused or failed a copy; the message is the system's."""


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


def _pump(chunks: Iterator[bytes], inbox: queue.Queue[bytes | BaseException | None]) -> None:
    try:
        for chunk in chunks:
            inbox.put(chunk)
    except BaseException as exc:  # noqa: BLE001 - handed to the waiting caller, which raises
        inbox.put(exc)
    inbox.put(None)
