# shellcheck shell=bash
# Runs as root (uid 0, no capabilities) in a pool container: prints at most 4 KiB of the
# file $2 in the claim directory $1, or nothing. Only what root wrote there is read: the
# directory and the file must be root's own and not symbolic links, the file a regular one.
# (A restart empties /tmp; the sandbox user may then make a directory of that name and put
# a link to /dev/zero, a FIFO or a forged claim in it.) The directory is not writable by
# anyone else, so nothing can be swapped in between the checks and the read.
dir=$1 file=$1/$2
[[ -d $dir && ! -L $dir && -O $dir && -f $file && ! -L $file && -O $file ]] || exit 0
exec timeout 5 head -c 4096 -- "$file"
