"""Creates local sandboxes: a private directory per sandbox holding a copy of the tree, and
an environment built from an allow-list."""

from __future__ import annotations

import os
import re
import shutil
import sys
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path

from loopwright.config import SandboxLimits
from loopwright.sandbox.base import SandboxError
from loopwright.sandbox.hosttree import MAX_DEPTH, remove_tree
from loopwright.sandbox.isolation import choose_isolation, make_undumpable
from loopwright.sandbox.local.sandbox import LocalSandbox


class LocalProvider:
    """Creates `LocalSandbox`es under `base_dir` (default: the system temporary directory)."""

    kind = "local"

    def __init__(
        self,
        limits: SandboxLimits,
        *,
        base_dir: Path | None = None,
        extra_env: Mapping[str, str] | None = None,
        path: str | None = None,
    ) -> None:
        """`extra_env` is added to every command's environment; `path` is its PATH.

        PATH defaults to the host's, read once here: it is needed to find toolchains and is
        the only variable taken from the host environment.
        """
        self._limits = limits
        self._base_dir = base_dir
        self._extra_env = dict(extra_env or {})
        self._path = path if path is not None else os.environ.get("PATH", os.defpath)
        self._open: list[LocalSandbox] = []
        self.undumpable = make_undumpable()
        self.isolation = choose_isolation(self._path, base_dir)
        self._notice: Callable[[str], None] | None = _print_notice if self.isolation.note else None

    def reap_abandoned(self) -> list[str]:
        """Nothing to reap: a local sandbox is a directory its own process removes on close,
        and an exited process's directory is an ordinary temporary one. Returns no ids."""
        return []

    def create(self, mission_id: str, tree: Path, *, network: bool) -> LocalSandbox:
        """A new sandbox holding a copy of `tree`; `network` is ignored (no isolation)."""
        if not tree.is_dir():
            raise SandboxError(f"cannot create a sandbox from {tree}: it is not a directory")
        if self._base_dir is not None:
            self._base_dir.mkdir(parents=True, exist_ok=True)
        label = re.sub(r"[^A-Za-z0-9_.-]", "_", mission_id)[:40]
        root = Path(tempfile.mkdtemp(prefix=f"loopwright-{label}-", dir=self._base_dir))
        try:
            (root / "home").mkdir()
            (root / "tmp").mkdir()
            # symlinks=True copies links as links, so none is followed out of the tree.
            shutil.copytree(tree, root / "workspace", symlinks=True)
            if self.isolation.run_as == "user":
                _chown_tree(root, self.isolation.uid, self.isolation.gid)
        except (OSError, shutil.Error) as exc:
            remove_tree(root)
            raise SandboxError(f"could not copy {tree} into a local sandbox: {exc}") from exc
        except RecursionError:
            remove_tree(root)
            raise SandboxError(
                f"could not copy {tree} into a local sandbox: a path in it is nested deeper "
                f"than the copy can walk (no snapshot holds one deeper than {MAX_DEPTH})"
            ) from None
        except BaseException:
            remove_tree(root)  # an interrupt leaves no copy behind either
            raise
        if self._notice is not None:
            # Once per provider: where commands cannot run as the unprivileged user.
            self._notice(self.isolation.note)
            self._notice = None
        sandbox = LocalSandbox(
            mission_id,
            root,
            env=self._environment(root),
            output_cap_bytes=self._limits.output_cap_bytes,
            isolation=self.isolation,
        )
        self._open = [s for s in self._open if not s.closed]
        self._open.append(sandbox)
        return sandbox

    def _environment(self, root: Path) -> dict[str, str]:
        # Built from an allow-list, never from os.environ: the host's model key, GITHUB_TOKEN
        # and ACTIONS_* variables must not reach commands the model chooses.
        env = {
            "PATH": self._path,
            "HOME": str(root / "home"),
            "TMPDIR": str(root / "tmp"),
            "LANG": "C.UTF-8",
            "LC_ALL": "C.UTF-8",
            "TERM": "dumb",
            "CI": "true",
            "PYTHONDONTWRITEBYTECODE": "1",
        }
        env.update(self._extra_env)
        return env

    def close(self) -> None:
        """Remove any sandbox this provider created that is still open: every one, even
        after one fails; `SandboxError` then names each that could not be removed."""
        problems = []
        for sandbox in self._open:
            try:
                sandbox.close()
            except SandboxError as exc:
                problems.append(str(exc))
        self._open.clear()
        if problems:
            raise SandboxError("; ".join(problems))


def _print_notice(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _chown_tree(root: Path, uid: int, gid: int) -> None:
    os.chown(root, uid, gid)
    for dirpath, dirnames, filenames in os.walk(root):  # does not follow symlinks
        for name in (*dirnames, *filenames):
            os.chown(os.path.join(dirpath, name), uid, gid, follow_symlinks=False)
