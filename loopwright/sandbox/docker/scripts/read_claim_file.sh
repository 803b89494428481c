# shellcheck shell=bash
# Runs as root (uid 0, no capabilities) in a pool container: prints at most 4 KiB of the
# file $2 in the claim directory $1, or nothing. Only what root wrote there is read: the
# directory and the file must be root's own and not symbolic links, the file a regular one.
# (A restart empties /tmp; the sandbox user may then make a directory of that name and put
# a link to /dev/zero, a FIFO or a forged claim in it.) The directory is not writable by
# anyone else, so nothing can be swapped in between the checks and the read. Builtins only
# (the first line, at most 4 KiB): an image needs nothing but bash for it.
dir=$1 file=$1/$2
[[ -d $dir && ! -L $dir && -O $dir && -f $file && ! -L $file && -O $file ]] || exit 0
IFS= read -r -n 4096 line < "$file"
printf '%s' "$line"
