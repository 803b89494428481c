# shellcheck shell=bash
# Reads a workspace file: $1 resolver source, $2 path, $3 size limit.
p=$(python3 -I -c "$1" /workspace "$2" read) || exit $?
if [[ -d $p ]]; then echo "$2 is a directory, not a file" >&2; exit 4; fi
if [[ ! -f $p ]]; then echo "$2 is not a regular file" >&2; exit 4; fi
size=$(stat -c %s -- "$p") || exit 4
if ((size > $3)); then
    echo "$2 is $size bytes, more than the $3 bytes a file read may return" >&2
    exit 4
fi
exec cat -- "$p"
