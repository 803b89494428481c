# shellcheck shell=bash
# Prepares a write: $1 resolver source, $2 path. Prints the existing file's mode (or an
# empty line) and then the resolved path, and creates the parent directories.
p=$(python3 -I -c "$1" /workspace "$2" write) || exit $?
if [[ -d $p ]]; then echo "$2 is a directory" >&2; exit 4; fi
mkdir -p -- "$(dirname -- "$p")" || exit 4
if [[ -f $p ]]; then stat -c %a -- "$p"; else echo; fi
printf %s "$p"
