# shellcheck shell=bash
# The sweep on its own, run after sweep.sh: $1... the tokens of the services to spare.
lw_sweep "$$" "$@"
