"""A sandbox that is a temporary directory on the host, for development and tests.

The local backend has NO container isolation: commands use the host's network and
filesystem. What it does keep is everything that does not need a container: a scrubbed
environment (no host secrets), a private HOME and TMPDIR, the file tools' path rules, and a
launcher per command that is a child subreaper, so every process the command starts (in a
new session or not) is killed when it ends or times out. Loopwright's own process is made
non-dumpable, so commands cannot read its environment, memory or open files through /proc;
when Loopwright runs as root, commands run as the unprivileged sandbox user (uid 10001,
owning the workspace copy), or, where that user cannot reach the workspace or the
toolchain, as root without any capability.
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
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
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
from loopwright.sandbox.isolation import LAUNCHER, Isolation, choose_isolation, make_undumpable
from loopwright.sandbox.output import CappedOutput
from loopwright.sandbox.paths import normalize_relative, resolve_inside

_READ_CHUNK = 65536
_POLL_S = 0.02
_DRAIN_GRACE_S = 1.0
"""After the command ends, how long to wait for output still in flight before returning."""
_STOP_GRACE_S = 5.0
"""How long a launcher told to stop gets to kill its command's processes."""


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
        self.undumpable = make_undumpable()
        self.isolation = choose_isolation(self._path, base_dir)
        self._notice: Callable[[str], None] | None = _print_notice if self.isolation.note else None

    def reap_abandoned(self) -> list[str]:
        """Nothing to reap: a local sandbox is a directory its own process removes on close,
        and an exited process's directory is an ordinary temporary one. Returns no ids."""
        return []

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
            if self.isolation.run_as == "user":
                _chown_tree(root, self.isolation.uid, self.isolation.gid)
        except (OSError, shutil.Error) as exc:
            _remove_tree(root)
            raise SandboxError(f"could not copy {tree} into a local sandbox: {exc}") from exc
        if self._notice is not None:
            # Once per provider: where commands cannot run as the unprivileged user.
            self._notice(self.isolation.note)
            self._notice = None
        sandbox = LocalSandbox(
            mission_id,
            root,
            env=self._environment(root),
            output_cap_bytes=self._limits.output_cap_bytes,
            isolation=self.isolation,
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
        self,
        mission_id: str,
        root: Path,
        *,
        env: Mapping[str, str],
        output_cap_bytes: int,
        isolation: Isolation | None = None,
    ) -> None:
        self.mission_id = mission_id
        self.root = root
        """The sandbox's private directory: workspace/, home/ and tmp/."""
        self.workspace = root / "workspace"
        self._env = dict(env)
        self._cap = max(output_cap_bytes, 0)
        self.isolation = isolation or Isolation("same", os.getuid(), os.getgid(), "")
        self.closed = False
        self._commands: set[subprocess.Popen[bytes]] = set()
        # Held while a command is registered, unregistered or stopped by `close`, so close
        # never signals a process the command's own thread has already reaped.
        self._commands_lock = threading.Lock()

    def _launch(self, argv: list[str]) -> list[str]:
        """`argv` under the launcher (see `scripts/launcher.py`), as the user `isolation` names."""
        iso = self.isolation
        program = shutil.which(argv[0], path=self._env.get("PATH")) or argv[0]
        launcher = [sys.executable, "-I", "-S", "-c", LAUNCHER, iso.run_as]
        return [*launcher, str(iso.uid), str(iso.gid), program, *argv]

    def exec(
        self,
        command: str,
        *,
        timeout_s: float,
        on_output: OutputCallback | None = None,
        on_raw: RawCallback | None = None,
    ) -> ExecResult:
        """Run `command` with bash in the workspace; kill all it started on timeout.

        `on_output` is called on the caller's thread with decoded text as it arrives. Every
        process the command leaves behind (in a new session or not) is killed when it ends.
        """
        self._require_open()
        started = time.monotonic()
        try:
            proc = subprocess.Popen(
                self._launch(["bash", "-c", command]),
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
        with self._commands_lock:
            self._commands.add(proc)
        output = CappedOutput(self._cap)
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
                _stop(proc)
            reader.stop()
            with self._commands_lock:
                self._commands.discard(proc)
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
        output: CappedOutput,
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
                    if timed_out:
                        _stop(proc)
                    # The launcher has killed its descendants; this catches any left in its
                    # group if it was killed first. It is still unreaped here (WNOWAIT), so
                    # its pid, the group id, cannot have been reused.
                    _kill_group(proc.pid)
                    stop_by = time.monotonic() + _DRAIN_GRACE_S
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
        missing = [d for d in (target.parent, *target.parent.parents) if not d.exists()]
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
        except (FileExistsError, NotADirectoryError):
            raise FileToolError(
                f"cannot write {rel}: one of its parent directories is a file"
            ) from None
        owner = self._owner()
        if owner is not None:
            for directory in missing:
                os.chown(directory, *owner, follow_symlinks=False)
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
            if owner is not None:
                os.chown(tmp_name, *owner)
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
            owner = self._owner()
            if owner is not None:
                os.chown(log_path, *owner)
            try:
                proc = subprocess.Popen(
                    self._launch(argv),
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
            _stop(proc)
            proc.wait()

    def close(self) -> None:
        """Stop every command still running (from any thread) and remove the sandbox
        directory. Safe to call twice."""
        if self.closed:
            return
        self.closed = True
        with self._commands_lock:
            for proc in list(self._commands):
                _stop(proc)
        _remove_tree(self.root)

    def _owner(self) -> tuple[int, int] | None:
        """The uid and gid new workspace files need, when commands run as another user."""
        if self.isolation.run_as != "user":
            return None
        return self.isolation.uid, self.isolation.gid

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


def _emit(on_output: OutputCallback | None, text: str) -> None:
    if on_output is not None and text:
        on_output(text)


def _has_exited(pid: int) -> bool:
    """Whether the child has exited, without reaping it (WNOWAIT keeps its pid reserved)."""
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """Tell the launcher to kill everything its command started, give it a moment, then
    kill its process group. The launcher is never reaped here (its pid stays reserved), so
    neither signal can reach a process that reused the pid."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + _STOP_GRACE_S
    while not _has_exited(proc.pid) and time.monotonic() < deadline:
        time.sleep(_POLL_S / 4)
    _kill_group(proc.pid)


def _print_notice(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _chown_tree(root: Path, uid: int, gid: int) -> None:
    os.chown(root, uid, gid)
    for dirpath, dirnames, filenames in os.walk(root):  # does not follow symlinks
        for name in (*dirnames, *filenames):
            os.chown(os.path.join(dirpath, name), uid, gid, follow_symlinks=False)


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
