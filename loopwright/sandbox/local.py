"""A sandbox that is a temporary directory on the host, for development and tests.

The local backend has NO isolation: commands run as the current user, with the host's
network and filesystem. What it does keep is everything that does not need a container: a
scrubbed environment (no host secrets), a private HOME and TMPDIR, a process group per
command that is killed on timeout, and the file tools' path rules.
"""

from __future__ import annotations

import codecs
import contextlib
import os
import queue
import re
import select
import shutil
import signal
import stat
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import IO

from loopwright.config import SandboxLimits
from loopwright.sandbox.base import (
    ExecResult,
    FileToolError,
    OutputCallback,
    RawCallback,
    SandboxError,
)
from loopwright.sandbox.paths import normalize_relative, resolve_inside

_READ_CHUNK = 65536
_POLL_S = 0.02
_DRAIN_GRACE_S = 1.0
"""After the command ends, how long to wait for output still in flight before returning."""


class LocalProvider:
    """Creates `LocalSandbox`es under `base_dir` (default: the system temporary directory)."""

    kind = "local"

    def __init__(
        self,
        limits: SandboxLimits,
        *,
        base_dir: Path | None = None,
        extra_env: Mapping[str, str] | None = None,
        path: str | None = None,
    ) -> None:
        """`extra_env` is added to every command's environment; `path` is its PATH.

        PATH defaults to the host's, read once here: it is needed to find toolchains and is
        the only variable taken from the host environment.
        """
        self._limits = limits
        self._base_dir = base_dir
        self._extra_env = dict(extra_env or {})
        self._path = path if path is not None else os.environ.get("PATH", os.defpath)
        self._open: list[LocalSandbox] = []

    def create(self, mission_id: str, tree: Path, *, network: bool) -> LocalSandbox:
        """A new sandbox holding a copy of `tree`; `network` is ignored (no isolation)."""
        if not tree.is_dir():
            raise SandboxError(f"cannot create a sandbox from {tree}: it is not a directory")
        if self._base_dir is not None:
            self._base_dir.mkdir(parents=True, exist_ok=True)
        label = re.sub(r"[^A-Za-z0-9_.-]", "_", mission_id)[:40]
        root = Path(tempfile.mkdtemp(prefix=f"loopwright-{label}-", dir=self._base_dir))
        try:
            (root / "home").mkdir()
            (root / "tmp").mkdir()
            # symlinks=True copies links as links, so none is followed out of the tree.
            shutil.copytree(tree, root / "workspace", symlinks=True)
        except (OSError, shutil.Error) as exc:
            _remove_tree(root)
            raise SandboxError(f"could not copy {tree} into a local sandbox: {exc}") from exc
        sandbox = LocalSandbox(
            mission_id,
            root,
            env=self._environment(root),
            output_cap_bytes=self._limits.output_cap_bytes,
        )
        self._open = [s for s in self._open if not s.closed]
        self._open.append(sandbox)
        return sandbox

    def _environment(self, root: Path) -> dict[str, str]:
        # Built from an allow-list, never from os.environ: the host's model key, GITHUB_TOKEN
        # and ACTIONS_* variables must not reach commands the model chooses.
        env = {
            "PATH": self._path,
            "HOME": str(root / "home"),
            "TMPDIR": str(root / "tmp"),
            "LANG": "C.UTF-8",
            "LC_ALL": "C.UTF-8",
            "TERM": "dumb",
            "CI": "true",
            "PYTHONDONTWRITEBYTECODE": "1",
        }
        env.update(self._extra_env)
        return env

    def close(self) -> None:
        """Remove any sandbox this provider created that is still open."""
        for sandbox in self._open:
            sandbox.close()
        self._open.clear()


class LocalSandbox:
    """A workspace directory on the host; see the module docstring for what it does not isolate."""

    def __init__(
        self, mission_id: str, root: Path, *, env: Mapping[str, str], output_cap_bytes: int
    ) -> None:
        self.mission_id = mission_id
        self.root = root
        """The sandbox's private directory: workspace/, home/ and tmp/."""
        self.workspace = root / "workspace"
        self._env = dict(env)
        self._cap = max(output_cap_bytes, 0)
        self.closed = False

    def exec(
        self,
        command: str,
        *,
        timeout_s: float,
        on_output: OutputCallback | None = None,
        on_raw: RawCallback | None = None,
    ) -> ExecResult:
        """Run `command` with bash in the workspace; kill its process group on timeout.

        `on_output` is called on the caller's thread with decoded text as it arrives. Any
        process the command leaves behind in its group is killed when it returns.
        """
        self._require_open()
        started = time.monotonic()
        try:
            proc = subprocess.Popen(
                ["bash", "-c", command],
                cwd=self.workspace,
                env=self._env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group, so a kill reaches the tree
                close_fds=True,
            )
        except OSError as exc:
            raise SandboxError(f"could not start bash for the local sandbox: {exc}") from exc
        if proc.stdout is None:  # pragma: no cover - stdout=PIPE always sets it
            raise SandboxError("bash started without an output pipe")
        output = _CappedOutput(self._cap)
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        reader = _PipeReader(proc.stdout)
        timed_out = False
        ended = False
        try:
            timed_out = self._pump(
                proc, reader, started + timeout_s, output, decoder, on_output, on_raw
            )
            ended = True
        finally:
            if not ended:  # on_output raised, or the caller was interrupted
                _kill_group(proc.pid)
            reader.stop()
            proc.wait()
        for chunk in reader.drain():
            if on_raw is not None:
                on_raw(chunk)
            output.add(chunk)
            _emit(on_output, decoder.decode(chunk))
        _emit(on_output, decoder.decode(b"", final=True))
        returncode = proc.returncode
        exit_code = 124 if timed_out else (128 - returncode if returncode < 0 else returncode)
        return ExecResult(
            output=output.text(),
            exit_code=exit_code,
            timed_out=timed_out,
            truncated=output.truncated,
            duration_s=time.monotonic() - started,
        )

    @staticmethod
    def _pump(
        proc: subprocess.Popen[bytes],
        reader: _PipeReader,
        deadline: float,
        output: _CappedOutput,
        decoder: codecs.IncrementalDecoder,
        on_output: OutputCallback | None,
        on_raw: RawCallback | None = None,
    ) -> bool:
        """Forward output until the command ends and its output is drained; True on timeout."""
        timed_out = False
        stop_by: float | None = None
        eof = False
        while True:
            now = time.monotonic()
            if stop_by is None:
                exited = _has_exited(proc.pid)
                if exited or now >= deadline:
                    timed_out = not exited
                    # Leftovers of the command would hold the pipe open and outlive it. bash
                    # is still unreaped here, so its pid (the group id) cannot be reused yet.
                    _kill_group(proc.pid)
                    stop_by = now + _DRAIN_GRACE_S
            if stop_by is not None and (eof or now >= stop_by):
                return timed_out
            if eof:
                time.sleep(_POLL_S)  # output closed but bash still running: wait for it
                continue
            limit = (stop_by if stop_by is not None else deadline) - now
            chunk = reader.get(max(0.0, min(_POLL_S, limit)))
            if chunk is None:
                continue
            if chunk == b"":
                eof = True
                continue
            if on_raw is not None:
                on_raw(chunk)
            output.add(chunk)
            _emit(on_output, decoder.decode(chunk))

    def read_file(self, path: str) -> bytes:
        self._require_open()
        target = resolve_inside(self.workspace, path, for_write=False)
        try:
            return target.read_bytes()
        except FileNotFoundError:
            raise FileToolError(
                f"{normalize_relative(path)} does not exist in the repository; list files "
                "with run_command (e.g. `git ls-files` or `ls`) to find the right path."
            ) from None
        except OSError as exc:
            raise FileToolError(f"cannot read {normalize_relative(path)}: {exc.strerror}") from None

    def write_file(self, path: str, data: bytes) -> None:
        self._require_open()
        target = resolve_inside(self.workspace, path, for_write=True)
        rel = normalize_relative(path)
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
        except (FileExistsError, NotADirectoryError):
            raise FileToolError(
                f"cannot write {rel}: one of its parent directories is a file"
            ) from None
        try:
            mode = stat.S_IMODE(target.stat().st_mode)
        except FileNotFoundError:
            mode = 0o644
        # Write a sibling and rename it over the target: the swap is atomic and a hard link
        # at the target is replaced rather than written through.
        fd, tmp_name = tempfile.mkstemp(dir=target.parent, prefix=".loopwright-write-")
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            os.chmod(tmp_name, mode)
            os.replace(tmp_name, target)
        except OSError as exc:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp_name)
            raise FileToolError(f"cannot write {rel}: {exc.strerror}") from None

    def set_network(self, enabled: bool) -> None:
        """No-op: the local backend has no network isolation to switch."""

    @contextlib.contextmanager
    def run_service(
        self, command: str, *, port: int, env: Mapping[str, str], log: str
    ) -> Iterator[str]:
        """Run `command` in its own process group while the context is open.

        Without isolation the app listens on the host itself, so the URL is its own port.
        """
        self._require_open()
        log_path = resolve_inside(self.workspace, log, for_write=True)
        log_path.parent.mkdir(parents=True, exist_ok=True)
        wrapper = '/bin/bash -c "$1"; echo $? > "$2"'
        argv = ["bash", "-c", wrapper, "loopwright-service", command, f"{log_path}.exit"]
        with log_path.open("wb") as out:
            try:
                proc = subprocess.Popen(
                    argv,
                    cwd=self.workspace,
                    env={**self._env, **env},
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                    close_fds=True,
                )
            except OSError as exc:
                raise SandboxError(f"could not start `{command}`: {exc}") from exc
        try:
            yield f"http://127.0.0.1:{port}"
        finally:
            _kill_group(proc.pid)
            proc.wait()

    def close(self) -> None:
        """Remove the sandbox directory. Safe to call twice."""
        if self.closed:
            return
        self.closed = True
        _remove_tree(self.root)

    def _require_open(self) -> None:
        if self.closed:
            raise SandboxError(f"the local sandbox for mission {self.mission_id} is closed")

    def resolve_path(self, path: str) -> str:
        """The workspace-relative path `path` names once symlinks are resolved (see base)."""
        self._require_open()
        rel = normalize_relative(path)
        root = os.path.realpath(self.workspace)
        resolved = os.path.realpath(os.path.join(root, rel))
        if os.path.commonpath([root, resolved]) != root:
            raise FileToolError(
                f"Refused: {rel!r} resolves, through a symlink, to a location outside the "
                "repository. The path must stay inside the repository."
            )
        return os.path.relpath(resolved, root)


class _PipeReader:
    """Reads a pipe on a thread into a queue; `b""` marks end of file."""

    def __init__(self, pipe: IO[bytes]) -> None:
        self._pipe = pipe
        self._queue: queue.Queue[bytes] = queue.Queue()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="local-sandbox-output", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        fd = self._pipe.fileno()
        # select with a short timeout, so stop() works even while an escaped descendant
        # keeps the pipe open.
        while not self._stop.is_set():
            ready, _, _ = select.select([fd], [], [], _POLL_S)
            if not ready:
                continue
            data = os.read(fd, _READ_CHUNK)
            self._queue.put(data)
            if not data:
                return

    def get(self, timeout: float) -> bytes | None:
        try:
            return self._queue.get(timeout=timeout)
        except queue.Empty:
            return None

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        self._pipe.close()

    def drain(self) -> list[bytes]:
        """What is left in the queue after `stop`, without the end-of-file marker."""
        chunks: list[bytes] = []
        while True:
            try:
                chunk = self._queue.get_nowait()
            except queue.Empty:
                return chunks
            if chunk:
                chunks.append(chunk)


class _CappedOutput:
    """Keeps the first and last halves of `cap` bytes and counts what falls between."""

    def __init__(self, cap: int) -> None:
        self._cap = cap
        self._head_cap = cap // 2
        self._tail_cap = cap - self._head_cap
        self._head = bytearray()
        self._tail = bytearray()
        self._total = 0

    def add(self, data: bytes) -> None:
        self._total += len(data)
        room = self._head_cap - len(self._head)
        if room > 0:
            self._head += data[:room]
            data = data[room:]
        if data:
            self._tail += data
            excess = len(self._tail) - self._tail_cap
            if excess > 0:
                del self._tail[:excess]

    @property
    def truncated(self) -> bool:
        return self._total > self._cap

    def text(self) -> str:
        head = self._head.decode("utf-8", errors="replace")
        tail = self._tail.decode("utf-8", errors="replace")
        elided = self._total - len(self._head) - len(self._tail)
        if elided <= 0:
            return (self._head + self._tail).decode("utf-8", errors="replace")
        return f"{head}\n[... {elided} bytes elided ...]\n{tail}"


def _emit(on_output: OutputCallback | None, text: str) -> None:
    if on_output is not None and text:
        on_output(text)


def _has_exited(pid: int) -> bool:
    """Whether the child has exited, without reaping it (WNOWAIT keeps its pid reserved)."""
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


def _kill_group(pgid: int) -> None:
    # ProcessLookupError: the group is already empty, which is the state we want.
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)


def _remove_tree(root: Path) -> None:
    """Delete a sandbox directory, including read-only trees (e.g. Go's module cache)."""
    try:
        shutil.rmtree(root)
    except FileNotFoundError:
        return
    except PermissionError:
        for dirpath, _, _ in os.walk(root):  # walk does not follow symlinks out of the tree
            os.chmod(dirpath, stat.S_IRWXU)
        shutil.rmtree(root)
