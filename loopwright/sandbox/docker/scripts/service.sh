# shellcheck shell=bash
# A verification service: $1 the command, $2 the log file (its exit status goes to $2.exit).
mkdir -p -- "${2%/*}" && exec >"$2" 2>&1 </dev/null
/bin/bash -c "$1"
echo $? > "$2.exit"
