# shellcheck shell=bash
# Run after sweep.sh (for lw_counter) once the host killed a command at its timeout, on the
# `docker exec` path: the wrapper, killed with it, could not say which limits the command
# hit. $1 is the file where the wrapper left the counts it started from; prints the name of
# each limit hit since (`memory`, `pids`), one a line. Nothing for a file that is missing,
# not a regular file, or not two numbers: the command could have replaced it (with a FIFO,
# a link to /dev/zero, a large file), which only costs the notes. The host waits a bounded
# time for this script as well: a service the sweep spared could still swap the file.
[[ -f $1 && ! -L $1 ]] || exit 0
read -r -n 64 oom_before pids_before < "$1" 2>/dev/null || exit 0
rm -f -- "$1"
[[ $oom_before =~ ^[0-9]{1,18}$ && $pids_before =~ ^[0-9]{1,18}$ ]] || exit 0
lw_counter oom_kill /sys/fs/cgroup/memory.events /sys/fs/cgroup/memory/memory.oom_control
if ((LW_COUNT > oom_before)); then
    echo memory
fi
lw_counter max /sys/fs/cgroup/pids.events /sys/fs/cgroup/pids/pids.events
if ((LW_COUNT > pids_before)); then
    echo pids
fi
