"""The resident exec channel's frames, its host end over a socket, and the server's handling
of requests, run here on real pipes and processes (no engine)."""

from __future__ import annotations

import io
import os
import select
import socket
import struct
import subprocess
import sys
import tarfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from loopwright.sandbox.docker.channel import ChannelClosed, ResidentChannel
from loopwright.sandbox.docker.scripts.resident import (
    BOOT,
    MAX_PAYLOAD,
    PREFIX,
    TO_HOST,
    TO_SERVER,
    Codec,
    FrameError,
    Server,
    boot_frame,
    hello,
    host_codec,
    limit_counts,
    open_hello,
)

KEY = bytes(range(32))


def reader_of(data: bytes) -> Callable[[int], bytes]:
    stream = io.BytesIO(data)

    def read_exact(size: int) -> bytes:
        chunk = stream.read(size)
        if len(chunk) < size:
            raise EOFError("short")
        return chunk

    return read_exact


def server_codec(key: bytes = KEY) -> Codec:
    return Codec(key, sends=TO_HOST, receives=TO_SERVER)


def test_frames_round_trip_in_order() -> None:
    host, server = host_codec(KEY), server_codec()
    frames = host.seal({"op": "a", "id": 1}) + host.seal({"op": "b", "id": 2}, b"\x00\xffdata")
    read = reader_of(frames)
    assert server.open(read) == ({"op": "a", "id": 1}, b"")
    assert server.open(read) == ({"op": "b", "id": 2}, b"\x00\xffdata")


@pytest.mark.parametrize(
    "offset", [0, 3, 12, -40, -1], ids=["magic", "size", "head", "body", "mac"]
)
def test_a_changed_byte_fails_the_seal(offset: int) -> None:
    frame = bytearray(host_codec(KEY).seal({"op": "exit", "code": 0}, b"payload-bytes"))
    frame[offset] ^= 0x01
    with pytest.raises((FrameError, EOFError)):
        server_codec().open(reader_of(bytes(frame)))


def test_replayed_reordered_and_reflected_frames_are_refused() -> None:
    host = host_codec(KEY)
    first, second = host.seal({"n": 1}), host.seal({"n": 2})
    server = server_codec()
    server.open(reader_of(first))
    with pytest.raises(FrameError):
        server.open(reader_of(first))  # replay
    with pytest.raises(FrameError):
        server_codec().open(reader_of(second))  # out of order
    with pytest.raises(FrameError):
        host_codec(KEY).open(reader_of(host_codec(KEY).seal({"n": 1})))  # reflected


def test_a_frame_sealed_with_another_key_is_refused() -> None:
    frame = host_codec(b"k" * 32).seal({"op": "exit"})
    with pytest.raises(FrameError, match="seal"):
        server_codec().open(reader_of(frame))


def test_oversized_frames_are_refused_before_their_body_is_read() -> None:
    prefix = PREFIX.pack(b"LW", 10, MAX_PAYLOAD + 1)
    with pytest.raises(FrameError, match="not a sequence of frames"):
        server_codec().open(reader_of(prefix))
    with pytest.raises(FrameError, match="too large"):
        host_codec(KEY).seal({}, b"x" * (MAX_PAYLOAD + 1))


def test_hello_hands_over_the_key() -> None:
    host = host_codec(KEY)
    data = hello(host, KEY) + host.seal({"op": "ping", "id": 1})
    read = reader_of(data)
    server = open_hello(read)
    assert server.open(read) == ({"op": "ping", "id": 1}, b"")
    reply = server.seal({"op": "pong", "id": 1})
    assert host.open(reader_of(reply)) == ({"op": "pong", "id": 1}, b"")


def test_a_hello_that_is_not_sealed_with_its_own_key_is_refused() -> None:
    forged = bytearray(hello(host_codec(b"x" * 32), KEY))
    with pytest.raises(FrameError, match="hello"):
        open_hello(reader_of(bytes(forged)))


def test_boot_runs_the_program_it_reads_from_stdin() -> None:
    program = "import sys\nprint('booted', __name__)\nsys.stdout.flush()\n"
    done = subprocess.run(
        [sys.executable, "-I", "-c", BOOT], input=boot_frame(program) + b"rest", capture_output=True
    )
    assert done.returncode == 0 and done.stdout == b"booted __main__\n"
    cut = subprocess.run([sys.executable, "-I", "-c", BOOT], input=boot_frame(program)[:12])
    assert cut.returncode == 1


def test_boot_keeps_the_container_alive_when_python3_cannot_compile_the_program() -> None:
    keeper = subprocess.Popen([sys.executable, "-I", "-c", BOOT], stdin=subprocess.PIPE)
    try:
        assert keeper.stdin is not None
        keeper.stdin.write(boot_frame("def broken(:\n"))
        keeper.stdin.flush()
        time.sleep(0.5)
        assert keeper.poll() is None
        with open(f"/proc/{keeper.pid}/cmdline", "rb") as cmdline:
            assert cmdline.read() == b"sleep\0infinity\0"
    finally:
        keeper.kill()
        keeper.wait()


# -- the host end over a socket that speaks the engine's stream framing ---------------------


def engine_frames(stream: int, data: bytes) -> bytes:
    return struct.pack(">BxxxI", stream, len(data)) + data


@pytest.fixture
def wired() -> Iterator[tuple[ResidentChannel, socket.socket, Codec]]:
    ours, theirs = socket.socketpair()
    channel = ResidentChannel(ours, ours, host_codec(KEY), "c" * 64)
    yield channel, theirs, server_codec()
    channel.close()
    theirs.close()


def trickle(sock: socket.socket, data: bytes) -> None:
    """Send one byte at a time: frames must be reassembled whatever the chunking."""
    for i in range(len(data)):
        sock.sendall(data[i : i + 1])


def test_responses_reach_their_request_through_split_engine_frames(
    wired: tuple[ResidentChannel, socket.socket, Codec],
) -> None:
    channel, server_end, server = wired
    first = channel.call({"op": "run"})
    second = channel.call({"op": "exec"})
    frame_b = server.seal({"id": second.id, "op": "out"}, b"for-b")
    frame_a = server.seal({"id": first.id, "op": "done", "code": 3})
    stream = engine_frames(1, frame_b[:7]) + engine_frames(2, b"a warning\n")
    stream += engine_frames(1, frame_b[7:] + frame_a)
    trickle(server_end, stream)
    deadline = time.monotonic() + 5
    assert second.next(deadline) == ({"id": second.id, "op": "out"}, b"for-b")
    assert first.next(deadline) == ({"id": first.id, "op": "done", "code": 3}, b"")
    assert "a warning" in channel.stderr_tail


def test_the_requests_the_host_sends_are_sealed_in_order(
    wired: tuple[ResidentChannel, socket.socket, Codec],
) -> None:
    channel, server_end, server = wired
    request = channel.call({"op": "untar", "dest": "/w"})
    request.send("data", b"chunk")
    request.send("end")
    server_end.settimeout(5)
    buf = bytearray()

    def read_exact(size: int) -> bytes:
        while len(buf) < size:
            buf.extend(server_end.recv(65536))
        out = bytes(buf[:size])
        del buf[:size]
        return out

    assert server.open(read_exact) == ({"op": "untar", "dest": "/w", "id": request.id}, b"")
    assert server.open(read_exact) == ({"id": request.id, "op": "data"}, b"chunk")
    assert server.open(read_exact)[0]["op"] == "end"


def test_a_forged_frame_ends_the_channel_and_wakes_every_waiter(
    wired: tuple[ResidentChannel, socket.socket, Codec],
) -> None:
    channel, server_end, _ = wired
    waiting = channel.call({"op": "exec"})
    forged = host_codec(b"z" * 32)  # not the channel's key
    server_end.sendall(engine_frames(1, forged.seal({"id": waiting.id, "op": "exit", "code": 0})))
    with pytest.raises(ChannelClosed, match="seal"):
        waiting.next(time.monotonic() + 5)
    assert not channel.alive
    with pytest.raises(ChannelClosed):
        channel.call({"op": "ping"})


def test_the_stream_ending_wakes_waiters_and_close_joins_the_reader(
    wired: tuple[ResidentChannel, socket.socket, Codec],
) -> None:
    channel, server_end, _ = wired
    waiting = channel.call({"op": "exec"})
    server_end.shutdown(socket.SHUT_WR)
    with pytest.raises(ChannelClosed, match="ended"):
        waiting.next(time.monotonic() + 5)
    channel.close()
    assert not [t for t in threading.enumerate() if t.name.startswith("sandbox-channel-ccc")]


def test_a_silent_server_times_out_rather_than_hanging(
    wired: tuple[ResidentChannel, socket.socket, Codec],
) -> None:
    channel, _, _ = wired
    started = time.monotonic()
    assert channel.call({"op": "ping"}).next(started + 0.2) is None
    assert time.monotonic() - started < 2


# -- the server itself, on real pipes -------------------------------------------------------


ANSWER_WAIT_S = 10.0


class Served:
    """A `Server` on a pipe pair in this process, driven as the host would."""

    def __init__(self) -> None:
        self.to_server_r, self.to_server_w = os.pipe()
        self.to_host_r, self.to_host_w = os.pipe()
        self.host = host_codec(KEY)
        self.server = Server(server_codec(), self.to_host_w)
        read_exact = self._reader(self.to_server_r)
        self.thread = threading.Thread(target=self._serve, args=(read_exact,), daemon=True)
        self.thread.start()
        self.read_host = self._reader(self.to_host_r, ANSWER_WAIT_S)

    def _serve(self, read_exact: Callable[[int], bytes]) -> None:
        try:
            self.server.serve(read_exact)
        except (EOFError, FrameError):
            return

    @staticmethod
    def _reader(fd: int, wait_s: float | None = None) -> Callable[[int], bytes]:
        """Exact reads of `fd`; with `wait_s`, a server silent that long fails the test."""

        def read_exact(size: int) -> bytes:
            buf = b""
            while len(buf) < size:
                if wait_s is not None and not select.select([fd], [], [], wait_s)[0]:
                    raise AssertionError(f"the server said nothing for {wait_s} s")
                chunk = os.read(fd, size - len(buf))
                if not chunk:
                    raise EOFError
                buf += chunk
            return buf

        return read_exact

    def send(self, header: dict[str, Any], payload: bytes = b"") -> None:
        os.write(self.to_server_w, self.host.seal(header, payload))

    def until(self, op: str) -> list[tuple[dict[str, Any], bytes]]:
        got = []
        while True:
            header, payload = self.host.open(self.read_host)
            got.append((header, payload))
            if header["op"] in (op, "error"):
                return got

    def close(self) -> None:
        os.close(self.to_server_w)
        self.thread.join(timeout=5)
        for fd in (self.to_server_r, self.to_host_r, self.to_host_w):
            os.close(fd)


@pytest.fixture
def served() -> Iterator[Served]:
    box = Served()
    yield box
    box.close()


NO_SWEEP = {"argv": ["true"], "env": {}, "cwd": "/"}


def test_the_server_streams_a_command_and_reports_its_status(served: Served) -> None:
    served.send(
        {
            "id": 1,
            "op": "exec",
            "argv": ["/bin/sh", "-c", "echo out; echo err >&2; exit 3"],
            "env": {},
            "cwd": "/",
            "timeout": 30,
            "sweep": NO_SWEEP,
        }
    )
    frames = served.until("exit")
    output = b"".join(payload for header, payload in frames if header["op"] == "out")
    assert sorted(output.split()) == [b"err", b"out"]
    assert frames[-1][0] == {
        "id": 1,
        "op": "exit",
        "code": 3,
        "timed_out": False,
        "stuck": False,
        "limits": [],  # said only for a command killed at its timeout
    }


def test_the_server_gives_commands_fresh_stdio_and_their_own_session(served: Served) -> None:
    script = "test -t 0 && echo tty; read x && echo read; ps -o sid= -p $$; echo $$"
    served.send(
        {"id": 2, "op": "exec", "argv": ["/bin/sh", "-c", script], "env": {}, "cwd": "/",
         "timeout": 30, "sweep": NO_SWEEP}
    )  # fmt: skip
    frames = served.until("exit")
    lines = b"".join(p for h, p in frames if h["op"] == "out").decode().split()
    assert "tty" not in lines and "read" not in lines
    assert lines[0] == lines[1]  # the shell leads its own session


def test_the_server_kills_a_command_tree_at_its_timeout(served: Served) -> None:
    started = time.monotonic()
    served.send(
        {"id": 3, "op": "exec", "argv": ["/bin/sh", "-c", "sleep 60 & sleep 60"], "env": {},
         "cwd": "/", "timeout": 0.5, "sweep": NO_SWEEP}
    )  # fmt: skip
    header = served.until("exit")[-1][0]
    assert header["timed_out"] is True and header["stuck"] is False
    assert time.monotonic() - started < 5


def test_the_server_runs_scripts_with_stdin_and_reports_unstartable_ones(served: Served) -> None:
    served.send({"id": 4, "op": "run", "argv": ["cat"], "env": {}, "cwd": "/"}, b"fed")
    header, payload = served.until("done")[-1]
    assert header["code"] == 0 and payload == b"fed"
    served.send({"id": 5, "op": "run", "argv": ["/nonexistent/x"], "env": {}, "cwd": "/"})
    header, _ = served.until("done")[-1]
    assert header["op"] == "error" and "could not be started" in header["message"]


def tar_of(*members: tuple[tarfile.TarInfo, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for info, data in members:
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if info.isreg() else None)
    return buf.getvalue()


def member(name: str, kind: bytes = tarfile.REGTYPE, mode: int = 0o644, link: str = "") -> Any:
    info = tarfile.TarInfo(name)
    info.type, info.mode, info.linkname = kind, mode, link
    return info


def untar(served: Served, rid: int, dest: Path, archive: bytes) -> dict[str, Any]:
    served.send({"id": rid, "op": "untar", "dest": str(dest)})
    for i in range(0, len(archive), 1000):
        served.send({"id": rid, "op": "data"}, archive[i : i + 1000])
    served.send({"id": rid, "op": "end"})
    return served.until("done")[-1][0]


def test_the_server_unpacks_a_copy_dropping_set_id_bits_and_special_files(
    served: Served, tmp_path: Path
) -> None:
    archive = tar_of(
        (member("dir", tarfile.DIRTYPE, 0o555), b""),
        (member("dir/tool", mode=0o4755), b"#!/bin/sh\n"),
        (member("fifo", tarfile.FIFOTYPE), b""),
        (member("link", tarfile.SYMTYPE, link="dir/tool"), b""),
    )
    assert untar(served, 6, tmp_path, archive)["op"] == "done"
    assert (tmp_path / "dir" / "tool").stat().st_mode & 0o7777 == 0o755
    assert (tmp_path / "dir").stat().st_mode & 0o777 == 0o555
    assert not (tmp_path / "fifo").exists()
    assert (tmp_path / "link").read_bytes() == b"#!/bin/sh\n"
    (tmp_path / "dir").chmod(0o755)


@pytest.mark.parametrize(
    "members",
    [
        [(member("../escape"), b"x")],
        [(member("out", tarfile.SYMTYPE, link="/"), b""), (member("out/escape"), b"x")],
        [(member("hard", tarfile.LNKTYPE, link="../../etc/passwd"), b"")],
    ],
    ids=["dotdot", "through-symlink", "hardlink-out"],
)
def test_the_server_refuses_a_copy_that_leaves_its_destination(
    served: Served, tmp_path: Path, members: list[tuple[tarfile.TarInfo, bytes]]
) -> None:
    dest = tmp_path / "dest"
    dest.mkdir()
    header = untar(served, 7, dest, tar_of(*members))
    assert header["op"] == "error" and "refusing" in header["message"]
    assert not (tmp_path / "escape").exists()


def test_a_copy_its_handler_did_not_expect_is_answered_and_the_server_reads_on(
    served: Served,
) -> None:
    # No destination: the handler's own KeyError. Its feed is drained before the answer,
    # or the frames beyond the feed's bound (64) would stop the reading loop for every
    # request. (100 frames still fit the pipe: a server that stops reading fails the test
    # at the answer's wait rather than hanging it on a write.)
    served.send({"id": 8, "op": "untar"})
    for _ in range(100):
        served.send({"id": 8, "op": "data"}, b"\0" * 512)
    served.send({"id": 8, "op": "end"})
    header = served.until("done")[-1][0]
    assert header["op"] == "error" and header["id"] == 8
    assert "KeyError" in header["message"] and "dest" in header["message"]
    served.send({"id": 9, "op": "ping"})
    assert served.until("pong")[-1][0]["op"] == "pong"


@pytest.mark.parametrize("op", ["exec", "run", "spawn"])
def test_a_request_its_handler_did_not_expect_is_answered_rather_than_left_to_time_out(
    served: Served, op: str
) -> None:
    served.send({"id": 10, "op": op, "env": {}, "cwd": "/", "timeout": 5})  # no argv, no sweep
    header = served.until("done")[-1][0]
    assert (header["id"], header["op"]) == (10, "error")
    assert header["message"].startswith(f"the {op} request failed: KeyError")
    served.send({"id": 11, "op": "ping"})
    assert served.until("pong")[-1][0]["op"] == "pong"


def test_limit_counts_read_the_cgroup_v2_and_v1_forms_as_the_wrapper_does(tmp_path: Path) -> None:
    v2_pids = tmp_path / "pids.events"
    v2_pids.write_text("max 7\nmax.imposed 0\n")
    v1_oom = tmp_path / "memory.oom_control"
    v1_oom.write_text("oom_kill_disable 1\nunder_oom 0\noom_kill 3\n")
    no_key = tmp_path / "memory.events"
    no_key.write_text("low 0\nhigh 0\nmax 9\noom 2\n")  # no oom_kill line: read on
    not_ascii = tmp_path / "garbled"
    not_ascii.write_bytes(b"max \xff\n")
    counters = {
        "pids": ("max", (str(not_ascii), str(tmp_path / "missing"), str(v2_pids))),
        "memory": ("oom_kill", (str(no_key), str(v1_oom))),
        "none": ("max", (str(tmp_path / "missing"),)),
    }
    assert limit_counts(counters) == {"pids": 7, "memory": 3, "none": 0}
