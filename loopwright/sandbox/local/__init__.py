"""A sandbox that is a temporary directory on the host, for development and tests.

The local backend has NO container isolation: commands use the host's network and
filesystem. What it does keep is everything that does not need a container: a scrubbed
environment (no host secrets), a private HOME and TMPDIR, the file tools' path rules, and a
launcher per command that is a child subreaper, so every process the command starts (in a
new session or not) is killed when it ends or times out. Loopwright's own process is made
non-dumpable, so commands cannot read its environment, memory or open files through /proc;
when Loopwright runs as root, commands run as the unprivileged sandbox user (uid 10001,
owning the workspace copy), or, where that user cannot reach the workspace or the
toolchain, as root without any capability.

`provider` creates sandboxes and builds their environment; `sandbox` is one sandbox (its
commands, file tools, services and cleanup); `processes` runs a command's process tree:
reading its output, and killing all of it when it ends or times out.
"""

from loopwright.sandbox.local.provider import LocalProvider
from loopwright.sandbox.local.sandbox import LocalSandbox

__all__ = ["LocalProvider", "LocalSandbox"]
