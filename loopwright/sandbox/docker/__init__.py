"""The Docker sandbox: one hardened, disposable container per mission.

Each container runs the sandbox image as uid 10001 with every capability dropped, a read-only
root, bounded tmpfs mounts and pids/memory/CPU limits; its /workspace is a size-bounded tmpfs
volume holding a copy of the repository, and commands and file tools run inside it.

`provider` creates sandboxes (with `pool`, the warm pool, and `reaper`, which removes those
of missions and processes that are gone); `container` is one sandbox, `relay` carries a
verification service's port to the host, `network` is the setup bridge and its firewall,
`engine` holds the engine client and the labels, and `scripts/` the shell and Python that
run inside the container.
"""
