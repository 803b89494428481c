"""One local sandbox: a workspace directory on the host, its commands (each under the
launcher, as the user the isolation names), file tools and services, and its removal."""

from __future__ import annotations

import codecs
import contextlib
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

from loopwright.sandbox.base import (
    MAX_FILE_BYTES,
    ExecResult,
    FileToolError,
    OutputCallback,
    RawCallback,
    SandboxError,
)
from loopwright.sandbox.hosttree import make_dirs, remove_tree
from loopwright.sandbox.isolation import LAUNCHER, Isolation
from loopwright.sandbox.local.processes import PipeReader, emit, pump, stop
from loopwright.sandbox.output import CappedOutput
from loopwright.sandbox.paths import normalize_relative, resolve_inside
from loopwright.sandbox.scripts.resolve_path import MESSAGES


class LocalSandbox:
    """A workspace directory on the host; `loopwright.sandbox.local` says what it does not
    isolate."""

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
        # Held while a command is started and registered, unregistered or stopped by
        # `close`, so close never signals a process the command's own thread has already
        # reaped; and since close marks the sandbox closed before it takes the lock, a start
        # either sees it closed or is registered in time to be stopped by it, before the
        # tree is removed.
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
        started = time.monotonic()
        with self._commands_lock:  # see `_commands_lock`: a start and a close never cross
            self._require_open()
            try:
                proc = subprocess.Popen(
                    self._launch(["bash", "-c", command]),
                    cwd=self.workspace,
                    env=self._env,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,  # its own process group: a kill reaches the tree
                    close_fds=True,
                )
            except OSError as exc:
                raise SandboxError(f"could not start bash for the local sandbox: {exc}") from exc
            self._commands.add(proc)
        if proc.stdout is None:  # pragma: no cover - stdout=PIPE always sets it
            raise SandboxError("bash started without an output pipe")
        output = CappedOutput(self._cap)
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        reader = PipeReader(proc.stdout)
        timed_out = False
        ended = False
        try:
            timed_out = pump(proc, reader, started + timeout_s, output, decoder, on_output, on_raw)
            ended = True
        finally:
            if not ended:  # on_output raised, or the caller was interrupted
                stop(proc)
            reader.stop()
            with self._commands_lock:
                self._commands.discard(proc)
            proc.wait()
        for chunk in reader.drain():
            if on_raw is not None:
                on_raw(chunk)
            output.add(chunk)
            emit(on_output, decoder.decode(chunk))
        emit(on_output, decoder.decode(b"", final=True))
        returncode = proc.returncode
        exit_code = 124 if timed_out else (128 - returncode if returncode < 0 else returncode)
        return ExecResult(
            output=output.text(),
            exit_code=exit_code,
            timed_out=timed_out,
            truncated=output.truncated,
            duration_s=time.monotonic() - started,
        )

    def read_file(self, path: str) -> bytes:
        self._require_open()
        target = resolve_inside(self.workspace, path, for_write=False)
        try:
            with target.open("rb") as handle:
                data = handle.read(MAX_FILE_BYTES + 1)
                if len(data) > MAX_FILE_BYTES:
                    size = os.fstat(handle.fileno()).st_size
                    raise FileToolError(
                        f"{normalize_relative(path)} is {size} bytes, more than the "
                        f"{MAX_FILE_BYTES} bytes a file read may return"
                    )
                return data
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
            missing = make_dirs(target.parent)
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
        with self._commands_lock:  # see `_commands_lock`: a start and a close never cross
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
            self._commands.add(proc)  # so a close from another thread stops it too
        try:
            yield f"http://127.0.0.1:{port}"
        finally:
            stop(proc)
            with self._commands_lock:
                self._commands.discard(proc)
            proc.wait()

    def close(self) -> None:
        """Stop every command still running (from any thread) and remove the sandbox
        directory. Safe to call twice."""
        if self.closed:
            return
        self.closed = True
        with self._commands_lock:
            for proc in list(self._commands):
                stop(proc)
        try:
            remove_tree(self.root)
        except OSError as exc:
            raise SandboxError(f"could not remove the local sandbox {self.root}: {exc}") from exc

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
        try:
            resolved = os.path.realpath(os.path.join(root, rel))
        except RecursionError:  # realpath recurses once per link it follows
            raise FileToolError(MESSAGES["loop"].format(path=repr(rel))) from None
        if os.path.commonpath([root, resolved]) != root:
            raise FileToolError(
                f"Refused: {rel!r} resolves, through a symlink, to a location outside the "
                "repository. The path must stay inside the repository."
            )
        return os.path.relpath(resolved, root)
