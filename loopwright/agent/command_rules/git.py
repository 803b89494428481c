"""The rule for git: `push` and remote edits (`remote add/set-url/rename/remove`,
`config remote.*`/`url.*` writes) are refused, because delivering the patch is Loopwright's
job, done from the host's own clean clone. `fetch`, `pull` and `clone` are allowed: the
sandbox has no network while the model drives it (they fail fast and harmlessly) and they
cannot change what is delivered, so refusing them would only add noise."""

from __future__ import annotations

from loopwright.agent.command_rules.common import Outcome, after_options
from loopwright.agent.shell import Command

_REMOTE_EDITS = frozenset({"add", "set-url", "rename", "remove", "rm"})
_CONFIG_READS = frozenset(
    {"--get", "--get-all", "--get-regexp", "--get-urlmatch", "--list", "-l", "get", "list"}
)
_CONFIG_WRITES = frozenset(
    {"--unset", "--unset-all", "--add", "--replace-all", "--remove-section", "--rename-section",
     "set", "unset", "remove-section", "rename-section"}
)  # fmt: skip


def git(args: list[str], command: Command) -> Outcome:
    values = frozenset({"--git-dir", "--work-tree", "--namespace", "--config-env"})
    rest = after_options(args, "Cc", values)
    if not rest:
        return None
    sub, tail = rest[0], rest[1:]
    if sub in ("push", "send-pack") or (sub == "subtree" and "push" in tail):
        return "git_remote"
    if sub == "remote":
        positional = [arg for arg in tail if not arg.startswith("-")]
        return "git_remote" if positional and positional[0] in _REMOTE_EDITS else None
    if sub == "config" and not any(arg in _CONFIG_READS for arg in tail):
        keys = [arg for arg in tail if not arg.startswith("-")]
        touches_remote = any(key.lower().startswith(("remote.", "url.")) for key in keys)
        writes = len(keys) >= 2 or any(arg in _CONFIG_WRITES for arg in tail)
        return "git_remote" if touches_remote and writes else None
    return None
