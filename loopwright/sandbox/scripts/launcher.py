"""The launcher every local sandbox command runs under.

Run as `python -I -S -c` with this file's text (the standard library only); argv: run-as
mode, uid, gid, the program's absolute path, then the command's argv. It is a child
subreaper, so whatever the command starts stays its descendant even after a double fork or
`setsid`, and it is non-dumpable, so a command of the same user cannot ptrace it. When the
command's main process ends, or the launcher gets SIGTERM (the timeout), it kills every
descendant, reaps them, and exits with the command's status (128+N for signal N). When the
command runs as capability-less root, the launcher moves to the sandbox uid keeping only
CAP_KILL, so the command cannot kill it.
"""

import ctypes
import os
import signal
import sys
import time
from types import FrameType

libc = ctypes.CDLL(None, use_errno=True)
libc.prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
libc.prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE
libc.prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG: Loopwright gone, stop too
mode, uid, gid = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
program, argv = sys.argv[4], sys.argv[5:]
me = os.getpid()


class Stop(Exception):
    pass


def stop(signum: int, frame: FrameType | None) -> None:
    raise Stop


def drop() -> None:
    if mode == "user":
        os.setgroups([])
        os.setresgid(gid, gid, gid)
        os.setresuid(uid, uid, uid)
    elif mode == "nocaps":
        with open("/proc/sys/kernel/cap_last_cap") as f:
            last = int(f.read())
        for cap in range(last + 1):
            libc.prctl(24, cap, 0, 0, 0)  # PR_CAPBSET_DROP
        header = (ctypes.c_uint32 * 2)(0x20080522, 0)
        if libc.capset(header, (ctypes.c_uint32 * 6)()) != 0:
            raise OSError(ctypes.get_errno(), "capset failed")
    if libc.prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS
        raise OSError(ctypes.get_errno(), "no_new_privs failed")


def ppid_of(pid: int | str) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return int(f.read().rsplit(b")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def kill_descendants() -> None:
    for _ in range(2000):
        try:
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
        except ChildProcessError:
            return  # no child left, so no descendant either
        parents = {}
        for name in os.listdir("/proc"):
            if name.isdigit():
                parent = ppid_of(name)
                if parent is not None:
                    parents[int(name)] = parent
        tree = {me}
        grew = True
        while grew:
            grew = False
            for pid, parent in parents.items():
                if parent in tree and pid not in tree:
                    tree.add(pid)
                    grew = True
        tree.discard(me)
        pinned = []
        for pid in tree:
            try:
                fd = os.pidfd_open(pid)
            except OSError:
                continue
            # The pidfd pins the process: it is still ours if its parent is.
            if ppid_of(pid) in tree or ppid_of(pid) == me:
                pinned.append(fd)
            else:
                os.close(fd)
        # Freeze them all first, so none runs again to see another die (a shell whose
        # `sleep` is killed would go on to its next command).
        for sig in (signal.SIGSTOP, signal.SIGKILL):
            for fd in pinned:
                try:
                    signal.pidfd_send_signal(fd, sig)
                except OSError:
                    pass
        for fd in pinned:
            os.close(fd)
        time.sleep(0.002)


def guard() -> None:
    # Another uid than the command's, with only CAP_KILL: beyond the reach of its signals.
    libc.prctl(8, 1, 0, 0, 0)  # PR_SET_KEEPCAPS
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
    kill = 1 << 5  # CAP_KILL
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)
    if libc.capset(header, (ctypes.c_uint32 * 6)(kill, kill, 0, 0, 0, 0)) != 0:
        raise OSError(ctypes.get_errno(), "capset failed")
    libc.prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE (setuid reset both of these)
    libc.prctl(1, signal.SIGTERM, 0, 0, 0)


signal.signal(signal.SIGTERM, stop)
signal.signal(signal.SIGHUP, stop)
if os.getppid() == 1:
    sys.exit(125)
ready_r, ready_w = os.pipe()
child = os.fork()
if child == 0:
    try:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGHUP, signal.SIG_DFL)
        os.close(ready_w)
        if os.read(ready_r, 1) != b"1":
            os._exit(125)
        os.close(ready_r)
        drop()
        os.execv(program, argv)  # an absolute path: no PATH search after the drop
    except BaseException as exc:
        os.write(2, f"[sandbox] could not start the command: {exc}\n".encode())
    os._exit(126)
code = 125
try:
    # Whatever happens from here on (a stop at any moment included), the descendants die.
    os.close(ready_r)
    if mode == "nocaps":
        guard()
    os.write(ready_w, b"1")
    os.close(ready_w)
    while True:
        pid, status = os.waitpid(-1, 0)
        if pid == child:
            code = os.waitstatus_to_exitcode(status)
            code = 128 - code if code < 0 else code
            break
except (Stop, ChildProcessError):
    pass
except BaseException as exc:
    os.write(2, f"[sandbox] the command launcher failed: {exc}\n".encode())
    code = 126
signal.signal(signal.SIGTERM, signal.SIG_IGN)
signal.signal(signal.SIGHUP, signal.SIG_IGN)
kill_descendants()
os._exit(code)
