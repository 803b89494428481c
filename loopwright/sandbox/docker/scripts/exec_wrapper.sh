# shellcheck shell=bash
# The command wrapper, run as `bash -c 'eval "$LOOPWRIGHT_WRAPPER"'` after sweep.sh, with $1 the
# command, $2 and $3 the notes for the memory and the pids limit (the host's `_limit_note`), and
# $4... the tokens of the services open in this sandbox. Started by a `docker exec` of its
# own (no resident server), it has LOOPWRIGHT_LIMITS: a file where it leaves the counts it
# starts from, which `limits_since.sh` reads if the host kills it at its timeout.
limits_file=${LOOPWRIGHT_LIMITS:-}
unset LOOPWRIGHT_WRAPPER LOOPWRIGHT_LIMITS
exec 2>&1 </dev/null
# Leftovers of a file tool, or of a command whose wrapper was killed before it swept.
lw_sweep "$$" "${@:4}"
lw_counter oom_kill /sys/fs/cgroup/memory.events /sys/fs/cgroup/memory/memory.oom_control; oom_before=$LW_COUNT
lw_counter max /sys/fs/cgroup/pids.events /sys/fs/cgroup/pids/pids.events; pids_before=$LW_COUNT
if [[ -n $limits_file ]]; then
    printf '%s %s\n' "$oom_before" "$pids_before" > "$limits_file"
fi
/bin/bash -c "$1"
rc=$?
# Nothing the command started outlives it: background jobs, new sessions, daemons.
lw_sweep "$$" "${@:4}"
if [[ -n $limits_file ]]; then
    rm -f -- "$limits_file" # a fork: only once the sweep has freed the pids a bomb held
fi
lw_counter oom_kill /sys/fs/cgroup/memory.events /sys/fs/cgroup/memory/memory.oom_control
if ((LW_COUNT > oom_before)); then
    printf '%s' "$2"
fi
lw_counter max /sys/fs/cgroup/pids.events /sys/fs/cgroup/pids/pids.events
if ((LW_COUNT > pids_before)); then
    printf '%s' "$3"
fi
exit $rc
