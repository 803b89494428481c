"""The resident exec server: a sandbox container's main process, serving the host over stdio.

Started by `BOOT` (`python3 -I -c`, standard library only) under Docker's init as the sandbox
user. The host attaches to the container's stdin and stdout and speaks framed messages: each
frame carries a JSON header (a request id and an operation) and a binary payload, sealed with
HMAC-SHA256 under a key the host sends in its first frame, before any sandbox command runs.
Docker's init holds the same stdio pipes; the server makes init undumpable before any
sandbox command runs (`_seal_init`), so no sandbox process may open them through
`/proc/1/fd`, ptrace init or write its memory. Should one reach them all the same, frames
are numbered per direction and a frame that fails its seal ends the server (and with it the
container) rather than being obeyed or passed on.

The host imports this file too, for `Codec` and the frame limits: one codec for both ends.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import hashlib
import hmac
import json
import os
import queue
import select
import signal
import stat
import struct
import subprocess
import sys
import tarfile
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

BOOT = (
    "import os\n"
    "b = b''\n"
    "while len(b) < 8: b += os.read(0, 8 - len(b)) or os._exit(1)\n"
    "n = 8 + int(b)\n"
    "while len(b) < n: b += os.read(0, n - len(b)) or os._exit(1)\n"
    "try: c = compile(b[8:], 'resident', 'exec')\n"
    "except SyntaxError: os.execvp('sleep', ['sleep', 'infinity'])\n"
    "del b, n\n"
    "exec(c)\n"
)
"""The `python3 -I -c` program that runs this file's text, which the host writes to stdin
(`boot_frame`): nothing of it in the container's environment or its process list. A
python3 too old for the program becomes the plain keeper (the host then uses `docker exec`)."""
UP = b"loopwright-resident-up\n"
"""Written once the program is read and running: from then on stdin carries only frames."""
TITLE = b"sleep\0infinity\0"
"""What `ps` shows for the server: the keeper's name, as in a container without the server."""

PREFIX = struct.Struct(">2sII")
MAGIC = b"LW"
MAC_SIZE = 32
MAX_HEADER = 1 << 20
MAX_PAYLOAD = 8 << 20
CHUNK = 65536
TO_SERVER = b"H"
TO_HOST = b"A"
ORPHAN_CHECK_S = 0.5
"""While a command's output is open, how often to check that its wrapper still runs."""
KILL_TRIES = 20
PR_SET_DUMPABLE = 4
PTRACE_GETREGS, PTRACE_SETREGS, PTRACE_SINGLESTEP, PTRACE_DETACH = 12, 13, 9, 17
PTRACE_SEIZE, PTRACE_INTERRUPT = 0x4206, 0x4207
WAIT_ALL = 0x40000000
"""`__WALL`: wait for a tracee that is not a child."""
X86_64_PRCTL = 157
X86_64_REGS = 27
"""`struct user_regs_struct` on x86_64: 27 registers; rax is the 11th, then rcx, rdx, rsi,
rdi, orig_rax, rip."""


class FrameError(Exception):
    """A frame that is malformed, too large, out of sequence or not sealed with the key."""


class Codec:
    """Seals the frames one end sends and opens the frames it receives.

    The seal covers the direction, the frame's sequence number, and its bytes, so a frame
    cannot be forged, replayed, reordered, or reflected back to its sender.
    """

    def __init__(self, key: bytes, *, sends: bytes, receives: bytes) -> None:
        self._key = key
        self._sends = sends
        self._receives = receives
        self._sent = 0
        self._received = 0

    def _mac(self, direction: bytes, seq: int, body: bytes) -> bytes:
        message = direction + seq.to_bytes(8, "big") + body
        return hmac.new(self._key, message, hashlib.sha256).digest()

    def seal(self, header: dict[str, Any], payload: bytes = b"") -> bytes:
        """The frame for `header` and `payload`; frames must be written in the order sealed."""
        head = json.dumps(header, separators=(",", ":")).encode()
        if len(head) > MAX_HEADER or len(payload) > MAX_PAYLOAD:
            raise FrameError(f"a frame of {len(head)} + {len(payload)} bytes is too large")
        body = PREFIX.pack(MAGIC, len(head), len(payload)) + head + payload
        mac = self._mac(self._sends, self._sent, body)
        self._sent += 1
        return body + mac

    def open(self, read_exact: Callable[[int], bytes]) -> tuple[dict[str, Any], bytes]:
        """Read and check the next frame with `read_exact`; return its header and payload."""
        prefix = read_exact(PREFIX.size)
        magic, head_size, payload_size = PREFIX.unpack(prefix)
        if magic != MAGIC or head_size > MAX_HEADER or payload_size > MAX_PAYLOAD:
            raise FrameError("the stream is not a sequence of frames")
        head = read_exact(head_size)
        payload = read_exact(payload_size)
        mac = read_exact(MAC_SIZE)
        expected = self._mac(self._receives, self._received, prefix + head + payload)
        if not hmac.compare_digest(mac, expected):
            raise FrameError("a frame failed its seal (forged, replayed or corrupted)")
        self._received += 1
        try:
            header = json.loads(head)
        except ValueError as exc:
            raise FrameError(f"a frame's header is not JSON: {exc}") from None
        if not isinstance(header, dict):
            raise FrameError("a frame's header is not an object")
        return header, payload


def boot_frame(source: str) -> bytes:
    """What `BOOT` reads: the program's length in eight digits, then the program."""
    data = source.encode()
    return b"%08d" % len(data) + data


def host_codec(key: bytes) -> Codec:
    return Codec(key, sends=TO_SERVER, receives=TO_HOST)


def hello(codec: Codec, key: bytes) -> bytes:
    """The host's first frame: it hands the server the key, sealed with that key."""
    return codec.seal({"op": "hello", "key": key.hex()})


def open_hello(read_exact: Callable[[int], bytes]) -> Codec:
    """The server's side of `hello`: the codec for the key in the first frame."""
    prefix = read_exact(PREFIX.size)
    magic, head_size, payload_size = PREFIX.unpack(prefix)
    if magic != MAGIC or head_size > MAX_HEADER or payload_size != 0:
        raise FrameError("the first frame is not a hello")
    head = read_exact(head_size)
    try:
        key = bytes.fromhex(json.loads(head)["key"])
    except (ValueError, KeyError, TypeError) as exc:
        raise FrameError(f"the first frame is not a hello: {exc}") from None
    codec = Codec(key, sends=TO_HOST, receives=TO_SERVER)
    mac = read_exact(MAC_SIZE)
    if not hmac.compare_digest(mac, codec._mac(TO_SERVER, 0, prefix + head)):
        raise FrameError("the hello failed its seal")
    codec._received = 1
    return codec


def _fd_reader(fd: int) -> Callable[[int], bytes]:
    def read_exact(size: int) -> bytes:
        buf = bytearray()
        while len(buf) < size:
            chunk = os.read(fd, size - len(buf))
            if not chunk:
                raise EOFError("the host closed the channel")
            buf += chunk
        return bytes(buf)

    return read_exact


# The cgroup counters the wrapper reads too (`lw_counter`: v2 first, then v1): how often a
# fork failed at the pids limit, and how many processes the out-of-memory killer ended. They
# count for the whole container, not for one command.
LIMIT_COUNTERS: Mapping[str, tuple[str, tuple[str, ...]]] = {
    "pids": ("max", ("/sys/fs/cgroup/pids.events", "/sys/fs/cgroup/pids/pids.events")),
    "memory": (
        "oom_kill",
        ("/sys/fs/cgroup/memory.events", "/sys/fs/cgroup/memory/memory.oom_control"),
    ),
}


def limit_counts(
    counters: Mapping[str, tuple[str, tuple[str, ...]]] = LIMIT_COUNTERS,
) -> dict[str, int]:
    """Each limit's counter, read without starting a process (none may be free): the value
    of its key in the first file that has it, as the wrapper reads it; 0 where none has."""
    counts: dict[str, int] = {}
    for limit, (key, paths) in counters.items():
        counts[limit] = 0
        for path in paths:
            try:
                with open(path, encoding="ascii") as events:
                    lines = events.read().splitlines()
            except (OSError, ValueError):
                continue
            values = [
                value
                for name, _, value in (line.partition(" ") for line in lines)
                if name == key and value.strip().isdigit()
            ]
            if values:
                counts[limit] = int(values[0])
                break
    return counts


def _exit_status(returncode: int) -> int:
    """Docker's convention: a process ended by signal N exits 128 + N."""
    return 128 - returncode if returncode < 0 else returncode


class Server:
    """Runs the host's requests; each command, file script and copy in a thread of its own."""

    def __init__(self, codec: Codec, out_fd: int) -> None:
        self._codec = codec
        self._out = out_fd
        self._lock = threading.Lock()
        self._env = dict(os.environ)
        self._feeds: dict[int, queue.Queue[bytes | None]] = {}
        self._resolvers: dict[str, dict[str, Any]] = {}

    def send(self, header: dict[str, Any], payload: bytes = b"") -> None:
        with self._lock:
            view = memoryview(self._codec.seal(header, payload))
            while view:
                view = view[os.write(self._out, view) :]

    def serve(self, read_exact: Callable[[int], bytes]) -> None:
        while True:
            header, payload = self._codec.open(read_exact)
            op, rid = header.get("op"), header.get("id")
            if op in ("data", "end"):
                if isinstance(rid, int) and (feed := self._feeds.get(rid)) is not None:
                    feed.put(payload if op == "data" else None)
                    if op == "end":
                        del self._feeds[rid]
                continue
            if op == "ping":
                self.send({"id": rid, "op": "pong", "pid": os.getpid()})
                continue
            target = {
                "exec": self._exec,
                "run": self._run,
                "spawn": self._spawn,
                "untar": self._untar,
                "file": self._file,
            }.get(str(op))
            if target is None or not isinstance(rid, int):
                self.send({"id": rid, "op": "error", "message": f"unknown request {op!r}"})
                continue
            if op == "untar":
                self._feeds[rid] = queue.Queue(maxsize=64)
            try:
                threading.Thread(
                    target=self._answer, args=(target, rid, header, payload), daemon=True
                ).start()
            except RuntimeError as exc:  # no thread to be had: the pids limit is reached
                self._feeds.pop(rid, None)
                self.send({"id": rid, "op": "error", "message": str(exc), "errno": errno.EAGAIN})

    def _answer(
        self,
        target: Callable[[int, dict[str, Any], bytes], None],
        rid: int,
        header: dict[str, Any],
        payload: bytes,
    ) -> None:
        """Run a request's handler; whatever it did not expect still gets an answer, so the
        host is never left waiting out its deadline on a thread that is gone."""
        try:
            target(rid, header, payload)
        except Exception as exc:  # noqa: BLE001 - reported, never the end of the server
            message = f"the {header.get('op')} request failed: {type(exc).__name__}: {exc}"
            self.send({"id": rid, "op": "error", "message": message})

    def _popen(self, header: dict[str, Any], **streams: Any) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            [str(arg) for arg in header["argv"]],
            env={**self._env, **{str(k): str(v) for k, v in header.get("env", {}).items()}},
            cwd=str(header.get("cwd") or "/"),
            close_fds=True,
            start_new_session=True,
            **streams,
        )

    def _failed(self, rid: int, exc: OSError, what: str) -> None:
        self.send({"id": rid, "op": "error", "message": f"{what}: {exc}", "errno": exc.errno})

    # -- a command ------------------------------------------------------------------------

    def _exec(self, rid: int, header: dict[str, Any], _payload: bytes) -> None:
        sweep: dict[str, Any] = header["sweep"]
        counts = limit_counts()
        try:
            proc = self._popen(
                header, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
            )
        except OSError as exc:
            self._failed(rid, exc, "the command could not be started")
            return
        assert proc.stdout is not None
        fd = proc.stdout.fileno()
        deadline = time.monotonic() + float(header["timeout"])
        poller = select.poll()
        poller.register(fd, select.POLLIN | select.POLLHUP)
        timed_out = orphaned = eof = False
        while not eof:
            wait = deadline - time.monotonic()
            if wait <= 0:
                timed_out = True
                break
            if poller.poll(min(wait, ORPHAN_CHECK_S) * 1000):
                eof = not self._forward(rid, fd)
            elif not orphaned and proc.poll() is not None:
                # The wrapper is gone (the command killed it) but something it left still
                # holds the output open: sweep now rather than when that ends.
                orphaned = True
                self._sweep(sweep)
        stuck = False
        if not timed_out:
            try:
                proc.wait(timeout=max(deadline - time.monotonic(), 0.001))
            except subprocess.TimeoutExpired:
                timed_out = True
        if timed_out:
            stuck = not self._kill(rid, proc, fd, poller, sweep)
        code = proc.poll()
        status = _exit_status(code) if code is not None else 137
        if not timed_out and status > 128:
            # A signal ended the wrapper, possibly before its sweep (the command may kill
            # its own parent); sweep again.
            self._sweep(sweep)
        proc.stdout.close()
        # The wrapper says which limit a command hit, unless it was killed at the timeout
        # first: a fork bomb whose shells retry their forks runs until then. Like the
        # wrapper's, the counts are the container's: a service's process killed for memory
        # meanwhile is counted too.
        hit = []
        if timed_out:
            hit = [name for name, count in limit_counts().items() if count > counts[name]]
        self.send(
            {
                "id": rid,
                "op": "exit",
                "code": status,
                "timed_out": timed_out,
                "stuck": stuck,
                "limits": hit,
            }
        )

    def _forward(self, rid: int, fd: int) -> bool:
        data = os.read(fd, CHUNK)
        if data:
            self.send({"id": rid, "op": "out"}, data)
        return bool(data)

    def _kill(
        self,
        rid: int,
        proc: subprocess.Popen[bytes],
        fd: int,
        poller: select.poll,
        sweep: dict[str, Any],
    ) -> bool:
        """Kill the timed-out command's tree and forward what it wrote; False if it never ended."""
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGKILL)
        for _ in range(KILL_TRIES):
            swept = self._sweep(sweep)
            ends = time.monotonic() + (2.0 if swept else 0.1)
            while (left := ends - time.monotonic()) > 0:
                if poller.poll(left * 1000) and not self._forward(rid, fd):
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        proc.wait(timeout=2)
                    return True
        return False

    def _sweep(self, sweep: dict[str, Any]) -> bool:
        """Run the sweep; False if it could not start (no pid is free: a fork bomb)."""
        try:
            proc = self._popen(
                sweep,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        except OSError:
            return False
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=30)
        return True

    # -- file scripts, services, copies ---------------------------------------------------

    def _run(self, rid: int, header: dict[str, Any], payload: bytes) -> None:
        try:
            proc = self._popen(
                header, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
            )
        except OSError as exc:
            self._failed(rid, exc, "the script could not be started")
            return
        out, err = proc.communicate(payload)
        self.send(
            {
                "id": rid,
                "op": "done",
                "code": _exit_status(proc.returncode),
                "stderr": err.decode("utf-8", "replace")[-65536:],
            },
            out[:MAX_PAYLOAD],
        )

    def _file(self, rid: int, header: dict[str, Any], _payload: bytes) -> None:
        """A file tool's read, or the preparation of its write, done here rather than by
        `read_file.sh` / `write_file.sh` (which start a python3 of their own for the path
        rules): the same rules (the resolver's source, sent by the host), the same answers
        (exit status, stdout, the words on stderr)."""
        try:
            code, out, err = _file_op(header, self._resolvers)
        except Exception as exc:  # noqa: BLE001 - reported, never the end of the server
            code, out, err = 4, b"", f"{header.get('path')}: {exc}\n"
        for start in range(0, len(out), CHUNK):
            self.send({"id": rid, "op": "out"}, out[start : start + CHUNK])
        self.send({"id": rid, "op": "done", "code": code, "stderr": err[-65536:]})

    def _spawn(self, rid: int, header: dict[str, Any], _payload: bytes) -> None:
        devnull = subprocess.DEVNULL
        try:
            proc = self._popen(header, stdin=devnull, stdout=devnull, stderr=devnull)
        except OSError as exc:
            self._failed(rid, exc, "the service could not be started")
            return
        self.send({"id": rid, "op": "done", "pid": proc.pid})
        proc.wait()

    def _untar(self, rid: int, header: dict[str, Any], _payload: bytes) -> None:
        feed = self._feeds[rid]
        reader = _FeedReader(feed)
        try:
            _extract(reader, str(header["dest"]))
        except Exception as exc:  # noqa: BLE001 - reported once the feed is drained
            # Drained first: the reading loop blocks on a full feed nobody takes from.
            reader.drain()
            if isinstance(exc, (OSError, tarfile.TarError, ValueError)):
                message = str(exc)
            else:
                message = f"the copy failed: {type(exc).__name__}: {exc}"
            code = exc.errno if isinstance(exc, OSError) else None
            self.send({"id": rid, "op": "error", "message": message, "errno": code})
            return
        reader.drain()
        self.send({"id": rid, "op": "done"})


def _make_parents(path: str) -> None:
    """`os.makedirs(path, exist_ok=True)` one level at a time: `makedirs` recurses once a
    level, and a write tool's path may be nested deeper than the interpreter recurses."""
    missing = []
    while path and not os.path.isdir(path):
        missing.append(path)
        path = os.path.dirname(path)
    for folder in reversed(missing):
        try:
            os.mkdir(folder)
        except FileExistsError:
            if not os.path.isdir(folder):
                raise


class _FeedReader:
    """A file-like reader over the payloads of a copy's `data` frames (`None` ends it)."""

    def __init__(self, feed: queue.Queue[bytes | None]) -> None:
        self._feed = feed
        self._chunk = b""
        self._at = 0
        self._done = False

    def read(self, size: int = -1) -> bytes:
        parts: list[bytes] = []
        want = size if size >= 0 else sys.maxsize
        while want > 0:
            if self._at == len(self._chunk):
                chunk = None if self._done else self._feed.get()
                if chunk is None:
                    self._done = True
                    break
                self._chunk, self._at = chunk, 0
            part = self._chunk[self._at : self._at + want]
            self._at += len(part)
            want -= len(part)
            parts.append(part)
        return b"".join(parts)

    def drain(self) -> None:
        while not self._done:
            if self._feed.get() is None:
                self._done = True


def _file_op(
    header: dict[str, Any], resolvers: dict[str, dict[str, Any]]
) -> tuple[int, bytes, str]:
    """(exit status, stdout, stderr) of `read_file.sh` or `write_file.sh` for the request."""
    source = str(header["resolver"])
    digest = hashlib.sha256(source.encode("utf-8")).hexdigest()
    rules = resolvers.get(digest)
    if rules is None:
        rules = {"__name__": "loopwright_resolver"}
        exec(compile(source, "resolve_path", "exec"), rules)  # noqa: S102 - the host's rules
        resolvers[digest] = rules
    kind, rel = str(header["kind"]), str(header["path"])
    try:
        path = str(rules["resolve"]("/workspace", rel, for_write=kind == "write"))
    except rules["Refusal"] as refusal:
        return int(rules["REFUSED"]), b"", refusal.message + "\n"
    if kind == "write":
        if os.path.isdir(path):
            return 4, b"", f"{rel} is a directory\n"
        parent = os.path.dirname(path)
        try:
            _make_parents(parent)
        except OSError as exc:
            return 4, b"", f"mkdir: cannot create directory '{parent}': {exc.strerror}\n"
        try:
            info = os.stat(path)
        except OSError:
            info = None
        mode = format(info.st_mode & 0o7777, "o") if info and stat.S_ISREG(info.st_mode) else ""
        return 0, f"{mode}\n{path}".encode("utf-8", "surrogateescape"), ""
    if os.path.isdir(path):
        return 4, b"", f"{rel} is a directory, not a file\n"
    limit = int(header["limit"])
    try:
        # Not through a link put there since the check, never blocking on a pipe.
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ELOOP, errno.ENXIO):
            return 4, b"", f"{rel} is not a regular file\n"
        return 1, b"", f"cat: {path}: {exc.strerror}\n"
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            return 4, b"", f"{rel} is not a regular file\n"
        if info.st_size > limit:
            return (
                4,
                b"",
                (
                    f"{rel} is {info.st_size} bytes, more than the {limit} bytes a file read may "
                    "return\n"
                ),
            )
        data = handle.read(limit + 1)
    if len(data) > limit:  # it grew since
        return 4, b"", f"{rel} is more than the {limit} bytes a file read may return\n"
    return 0, data, ""


def _inside(root: str, path: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _extract(reader: _FeedReader, dest: str) -> None:
    """Unpack a tar stream under `dest` as the sandbox user: regular files, directories and
    links only, set-id bits dropped, nothing placed outside `dest` (through `..` or a link)."""
    root = os.path.realpath(dest)
    directories: list[tuple[str, tarfile.TarInfo]] = []
    with tarfile.open(fileobj=reader, mode="r|") as tar:  # type: ignore[call-overload]
        for member in tar:
            name = member.name.lstrip("/")
            if not name or ".." in name.split("/"):
                raise ValueError(f"refusing {member.name!r}: it leaves the destination")
            if not (member.isreg() or member.isdir() or member.issym() or member.islnk()):
                continue
            if member.islnk() and ".." in member.linkname.split("/"):
                raise ValueError(f"refusing hard link {member.name!r} to {member.linkname!r}")
            target = os.path.join(root, name)
            if not _inside(root, os.path.realpath(os.path.dirname(target))):
                raise ValueError(f"refusing {member.name!r}: a link leads out of the destination")
            member.name = name
            member.mode &= 0o1777
            if member.isdir():
                os.makedirs(target, exist_ok=True)
                directories.append((target, member))
                continue
            if os.path.lexists(target) and not os.path.isdir(target):
                os.unlink(target)  # replace a file (or link) rather than write through it
            if member.issym():
                os.symlink(member.linkname, target)
                continue
            if member.islnk():
                os.link(os.path.join(root, member.linkname.lstrip("/")), target)
                continue
            source = tar.extractfile(member)
            assert source is not None
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
            fd = os.open(target, flags, 0o600)
            try:
                while block := source.read(CHUNK):
                    view = memoryview(block)
                    while view:
                        view = view[os.write(fd, view) :]
                os.fchmod(fd, member.mode)
                os.utime(fd, (member.mtime, member.mtime))
            finally:
                os.close(fd)
    for target, member in reversed(directories):
        os.chmod(target, member.mode)
        os.utime(target, (member.mtime, member.mtime))


def _set_title() -> None:
    """Overwrite the argument area `ps` reads (the setproctitle technique)."""
    with open("/proc/self/stat", encoding="ascii") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    start, end = int(fields[45]), int(fields[46])
    if end - start >= len(TITLE):
        ctypes.memmove(start, TITLE + b"\0" * (end - start - len(TITLE)), end - start)


def _seal_init(libc: Any) -> str:
    """Make Docker's init (PID 1) undumpable, as this process is: it runs as the sandbox user,
    holds the channel's pipes and is spared by every sweep, so a command that could ptrace
    it, write its /proc/1/mem or open /proc/1/fd would leave code running past its end, with
    the channel's traffic in reach. Init cannot be asked, so for one system call it is made
    to do so itself: stopped, given the call, stepped over it, restored and let go, all
    before any sandbox command exists. An empty string when done, else why not."""
    if os.uname().machine != "x86_64":
        return f"init is left dumpable on {os.uname().machine}"
    ptrace = libc.ptrace
    ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
    ptrace.restype = ctypes.c_long

    def call(request: int, data: Any = None) -> None:
        if ptrace(request, 1, None, data) != 0:
            raise OSError(ctypes.get_errno(), f"ptrace({request}, 1)")

    def stopped() -> int:
        _, status = os.waitpid(1, WAIT_ALL)
        if not os.WIFSTOPPED(status):
            raise OSError(errno.ESRCH, "init ended")
        return os.WSTOPSIG(status) if not status >> 16 else 0

    try:
        call(PTRACE_SEIZE)
    except OSError as exc:
        return f"init could not be sealed: {os.strerror(exc.errno or 0)}"
    signum = 0
    try:
        call(PTRACE_INTERRUPT)
        signum = stopped()
        saved = (ctypes.c_ulonglong * X86_64_REGS)()
        call(PTRACE_GETREGS, ctypes.addressof(saved))
        regs = (ctypes.c_ulonglong * X86_64_REGS)(*saved)
        # rax: the call; rdi, rsi: its arguments; orig_rax -1: no syscall restart on the way
        # in; rip: a `syscall` instruction in init's own code.
        regs[10], regs[14], regs[13], regs[15] = X86_64_PRCTL, PR_SET_DUMPABLE, 0, 2**64 - 1
        regs[16] = _syscall_site()
        call(PTRACE_SETREGS, ctypes.addressof(regs))
        while True:
            call(PTRACE_SINGLESTEP)
            got = stopped()
            if got == signal.SIGTRAP:
                break
            signum = got or signum
        call(PTRACE_GETREGS, ctypes.addressof(regs))
        call(PTRACE_SETREGS, ctypes.addressof(saved))
        if regs[10] != 0:
            return f"init could not be sealed: prctl returned {regs[10] - 2**64}"
        return ""
    except (OSError, ValueError) as exc:
        return f"init could not be sealed: {exc}"
    finally:
        with contextlib.suppress(OSError):
            call(PTRACE_DETACH, signum or None)


def _syscall_site() -> int:
    """The address of a `syscall` instruction (0f 05) in init's executable mappings."""
    with open("/proc/1/maps", encoding="ascii") as maps, open("/proc/1/mem", "rb", 0) as mem:
        for line in maps:
            fields = line.split()
            if len(fields) < 5 or "x" not in fields[1]:
                continue
            start, end = (int(bound, 16) for bound in fields[0].split("-"))
            mem.seek(start)
            at = mem.read(end - start).find(b"\x0f\x05")
            if at >= 0:
                return start + at
    raise ValueError("no syscall instruction in init's code")


def main() -> None:
    # First of all: processes of the same uid may then neither ptrace this one nor open its
    # /proc entries (fds, environ, mem).
    libc = ctypes.CDLL(None, use_errno=True)
    refused = ""
    if libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        refused = f"prctl(PR_SET_DUMPABLE, 0) failed: {os.strerror(ctypes.get_errno())}"
    if sealed := _seal_init(libc):
        sys.stderr.write(f"resident: {sealed}\n")
    with contextlib.suppress(OSError, ValueError, IndexError):
        _set_title()
    # The channel moves off 0 and 1, so nothing started later can inherit it by accident.
    in_fd, out_fd = os.dup(0), os.dup(1)
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    os.close(devnull)
    os.chdir("/")
    os.write(out_fd, UP)
    read_exact = _fd_reader(in_fd)
    codec = open_hello(read_exact)
    server = Server(codec, out_fd)
    if refused:
        server.send({"id": 0, "op": "unavailable", "message": refused})
        os.execvp("sleep", ["sleep", "infinity"])  # noqa: S606 - the plain keeper
    server.send({"id": 0, "op": "ready", "pid": os.getpid()})
    try:
        server.serve(read_exact)
    except (EOFError, FrameError) as exc:
        sys.stderr.write(f"resident: {exc}\n")
        os._exit(1)


if __name__ == "__main__":
    main()
