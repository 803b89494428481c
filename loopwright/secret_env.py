"""Keeps secrets out of the environment block this process was started with.

Commands of the local sandbox run as the same user as Loopwright and could read
`/proc/<loopwright pid>/environ`, which always shows the environment the process started
with, whatever it later removes from `os.environ`. So when secrets arrive in the
environment, the process re-executes itself without them and reads them back from a
pipe: afterwards they exist only in memory, in the mapping `restart_without_secrets`
returns. They never go back into `os.environ` either: every process started on the host
without an explicit environment (Playwright's driver and Chromium, the local model server,
pip) inherits `os.environ` in a start-up block of its own, which a command of the local
sandbox could read just the same.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence

HANDOFF_VARIABLE = "LOOPWRIGHT_SECRETS_FD"
SECRET_VARIABLES = (
    "LOOPWRIGHT_MODEL_API_KEY",
    "LOOPWRIGHT_GITHUB_PRIVATE_KEY",
    "LOOPWRIGHT_WEBHOOK_SECRET",
    "LOOPWRIGHT_DASHBOARD_TOKEN",
    "LOOPWRIGHT_DATABASE_URL",
    "LOOPWRIGHT_QUEUE_URL",
    "LOOPWRIGHT_GITHUB_CLIENT_SECRET",
    "GITHUB_TOKEN",
    "GH_TOKEN",
    "INPUT_GITHUB_TOKEN",
    "INPUT_MODEL_API_KEY",
    "ACTIONS_RUNTIME_TOKEN",
    "ACTIONS_ID_TOKEN_REQUEST_TOKEN",
    "ACTIONS_ID_TOKEN_REQUEST_URL",
)
_PIPE_LIMIT = 60_000  # a pipe buffer holds 64 KiB; no real secret comes close


class HandoffError(Exception):
    """The hand-off pipe named in the environment could not be read."""


def restart_without_secrets(
    argv: Sequence[str], names: Sequence[str] = SECRET_VARIABLES
) -> dict[str, str]:
    """The full environment, secrets included, for the rest of this process to read its
    settings from; `os.environ` is left without the secrets.

    If secrets are in this process's start-up environment, re-executes `argv` without them
    (and does not return); in the re-executed process, reads them back from the pipe.
    """
    env = dict(os.environ)
    handoff = env.pop(HANDOFF_VARIABLE, None)
    handed: dict[str, str] = {}
    if handoff is not None:
        try:
            with os.fdopen(int(handoff), "r", encoding="utf-8") as pipe:
                handed = json.loads(pipe.read() or "{}")
        except (OSError, ValueError) as exc:
            raise HandoffError(f"{HANDOFF_VARIABLE} is not a readable pipe: {exc}") from None
        if not isinstance(handed, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in handed.items()
        ):
            raise HandoffError(f"{HANDOFF_VARIABLE} names a pipe that holds no secrets")
        # Only the name of the (now closed) pipe leaves os.environ: the secrets were never in
        # it, and stay only in the mapping returned.
        os.environ.pop(HANDOFF_VARIABLE, None)
    # Secrets in the start-up environment are handed over even when the hand-off variable
    # is there too (set by whoever started this process, not by a restart of ours).
    held = {name: env[name] for name in names if env.get(name)}
    if not held:
        return {**env, **handed}
    clean = {k: v for k, v in env.items() if k not in held}
    data = json.dumps({**handed, **held}).encode()
    if len(data) > _PIPE_LIMIT:
        raise HandoffError("the secrets in the environment are implausibly large")
    read_end, write_end = os.pipe()
    os.write(write_end, data)
    os.close(write_end)
    os.set_inheritable(read_end, True)
    clean[HANDOFF_VARIABLE] = str(read_end)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(argv[0], list(argv), clean)  # noqa: S606 - our own interpreter, our own module
