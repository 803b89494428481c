"""Host-side handling of a mission's trees: the clean snapshot, patches in and out.

The host never runs git inside a tree the model wrote. It snapshots the repository into a
fresh repository of its own, sandboxes get copies of that snapshot, the patch is produced
by git *inside* the sandbox, and the host applies it to another clean copy of its own.
Every host git call goes through `loopwright.git`, whose configuration no tree can extend.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from loopwright import git as host_git
from loopwright.sandbox.base import MAX_FILE_BYTES, FileToolError, Sandbox, SandboxError
from loopwright.sandbox.hosttree import path_problem

# Options for git *inside* a sandbox: the tree there is disposable, but the export still
# must not run anything the model configured. The identity spares git its default one,
# `user@$(hostname -f)`: once the setup network is cut, Docker leaves a resolver in the
# container's resolv.conf that never answers, so that lookup of the container's own name
# (for the reflog entry `git reset` writes) waited out two 5 s timeouts on every export.
SANDBOX_GIT = [
    "-c", "core.hooksPath=/dev/null",
    "-c", "core.fsmonitor=false",
    "-c", "core.pager=cat",
    "-c", "user.name=Loopwright",
    "-c", "user.email=loopwright@sandbox.invalid",
    *(item for key, value in host_git.PATCH_FORMAT for item in ("-c", f"{key}={value}")),
]  # fmt: skip

# Installed dependencies and caches never belong in a patch.
SANDBOX_EXCLUDES = (
    ".venv/", "venv/", "node_modules/", "__pycache__/", "*.pyc", ".pytest_cache/",
    ".mypy_cache/", ".ruff_cache/", ".tox/", ".loopwright/", ".coverage", "coverage/",
)  # fmt: skip

REPORT_DIR = ".loopwright"
PATCH_FILE = ".loopwright/patch.diff"
MAX_PATCH_BYTES = MAX_FILE_BYTES
"""The largest change, as a binary diff, that a mission verifies, stores and delivers."""
_PATCH_SIZE = re.compile(r"(?m)^loopwright-patch-bytes=([0-9]+)$")
_GITLINK_LINE = re.compile(
    r"(?m)^(?:new file mode|deleted file mode|old mode|new mode) 160000$"
    r"|^index [0-9a-f]+\.\.[0-9a-f]+ 160000$"
)


class WorkspaceError(Exception):
    """The repository could not be prepared or a patch could not be applied."""


def git(args: list[str], cwd: Path, *, check: bool = True, input: str | None = None) -> str:
    """Run host git in `cwd` under Loopwright's own configuration; return its output."""
    try:
        proc = host_git.run(args, cwd, input=input)
    except host_git.GitUsageError as exc:
        raise WorkspaceError(str(exc)) from None
    if check and proc.returncode != 0:
        raise WorkspaceError(host_git.failure(args, proc))
    return proc.stdout


def is_git_url(source: str) -> bool:
    return source.startswith(("http://", "https://", "git://", "ssh://", "git@", "file://"))


def without_credentials(url: str) -> str:
    """The URL with any user:password@ removed, for messages and logs."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment))


def clone(url: str, dest: Path) -> Path:
    """Clone a repository on the host (no credentials: public or local servers)."""
    safe = without_credentials(url)
    dest.parent.mkdir(parents=True, exist_ok=True)
    args = ["clone", "--quiet", "--depth", "50", "--", url, str(dest)]
    try:
        proc = host_git.run(args, dest.parent, remote=url)
    except host_git.GitUsageError as exc:
        raise WorkspaceError(f"could not clone {safe}: {exc}") from None
    if proc.returncode != 0:
        detail = host_git.failure(args, proc, secrets=[urlsplit(url).password or ""])
        raise WorkspaceError(f"could not clone {safe}: {detail.replace(url, safe)}")
    return dest


def snapshot(source: Path, dest: Path) -> str:
    """Copy the working tree of the repository at `source` (tracked and untracked files
    that are not ignored) into `dest` as a fresh one-commit repository.

    Returns the source's HEAD commit, or "" for a repository without commits. A tree holding
    a path too deep or too long for the host (`hosttree.path_problem`) is refused before
    anything is copied.
    """
    if not source.is_dir():
        raise WorkspaceError(f"{source} is not a directory; pass a git repository path or URL")
    root = _repository_root(source)
    if root is None:
        raise WorkspaceError(f"{source} is not a git repository; run `git init` there first")
    listed = git(["ls-files", "-z", "--cached", "--others", "--exclude-standard"], root)
    head = git(["rev-parse", "--verify", "-q", "HEAD"], root, check=False).strip()
    paths = sorted(set(filter(None, listed.split("\0"))))
    problem = path_problem(paths)
    if problem is not None:
        raise WorkspaceError(
            f"the repository holds {problem}, which Loopwright cannot copy. Move or remove it "
            "(an untracked file can also be listed in .gitignore) and run again"
        )
    dest.mkdir(parents=True, exist_ok=False)
    for rel in paths:
        if rel.endswith("/") or _names_git_dir(rel):
            continue  # a nested repository or its metadata is never copied or acted on
        if not _inside(root, rel):
            continue  # an index entry beyond a symlink or with `..` names a file elsewhere
        src = root / rel
        target = dest / rel
        if src.is_symlink():
            target.parent.mkdir(parents=True, exist_ok=True)
            os.symlink(os.readlink(src), target)
        elif src.is_file():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, target)
        # Anything else is deleted in the working tree, or a gitlink: not copied.
    # No template: its sample hooks and description would be copied into every sandbox.
    git(["init", "--quiet", "--template="], dest)
    git(["add", "--all"], dest)
    git(["commit", "--quiet", "--allow-empty", "-m", "loopwright: base"], dest)
    return head


def copy_tree(base: Path, dest: Path) -> Path:
    shutil.copytree(base, dest, symlinks=True)
    return dest


def patched_copy(base: Path, dest: Path, patch: str) -> Path:
    """A new tree at `dest`: the files of the snapshot `base` with `patch` applied, all or
    nothing, without a repository of its own.

    One git process, in an empty repository written here by hand (`apply_patch` starts git
    twice more to find the root and make one). It must be empty: for a binary hunk whose
    result names an object git already has, git takes that object instead of the hunk's
    data, and the snapshot's own repository holds every file of the base tree. Delivery
    applies the same patch in an empty repository too, so both see the same bytes.
    """
    shutil.copytree(base, dest, symlinks=True, ignore=_top_level(base, ".git"))
    if not patch.strip():
        return dest
    with tempfile.TemporaryDirectory(prefix="loopwright-apply-") as tmp:
        where = ["--git-dir", str(_empty_git_dir(Path(tmp) / "git")), "--work-tree", str(dest)]
        git([*where, "apply", "--whitespace=nowarn", "-"], dest, input=patch)
    return dest


def _empty_git_dir(path: Path) -> Path:
    """A repository git accepts (`HEAD`, `objects`, `refs`) with no object and no
    configuration, made without starting git."""
    (path / "objects").mkdir(parents=True)
    (path / "refs").mkdir()
    (path / "HEAD").write_text("ref: refs/heads/main\n", encoding="utf-8")
    return path


def _top_level(root: Path, name: str) -> Callable[[str, list[str]], list[str]]:
    """A `copytree` filter that leaves out `root/name` and nothing deeper of that name."""
    top = os.path.normpath(root)
    return lambda folder, names: [name] if os.path.normpath(folder) == top else []


def apply_patch(tree: Path, patch: str) -> str:
    """Apply `patch` to the files of `tree`, all or nothing; return git's `--stat` summary.

    `tree` may be a user's working tree, whose own `.git/config` can define filter drivers
    (run by `apply` on every file it reads or writes) pointing at scripts the patch itself
    changes. So git sees `tree` only as the work tree of an empty repository of the host's
    own: no configuration of the tree's repository is read, and no driver is defined.
    """
    if not patch.strip():
        return ""
    # The patch's paths are relative to the top of the repository `tree` is in (the
    # snapshot's root), also when the user named a subdirectory.
    root = (_repository_root(tree) or tree).resolve()
    with tempfile.TemporaryDirectory(prefix="loopwright-apply-") as tmp:
        git_dir = _empty_git_dir(Path(tmp) / "git")
        where = ["--git-dir", str(git_dir), "--work-tree", str(root)]
        # One run: `apply` is atomic (a patch with a hunk that does not apply changes no
        # file), and `--apply` next to `--stat` applies as well as summarises.
        return git(
            [*where, "apply", "--stat", "--apply", "--whitespace=nowarn", "-"], root, input=patch
        )


def prepare_sandbox_repo(sandbox: Sandbox, timeout_s: float) -> None:
    """Keep installed dependencies and Loopwright's own files out of the sandbox's diff."""
    excludes = "\\n".join(SANDBOX_EXCLUDES)
    result = sandbox.exec(
        f"mkdir -p .git/info {REPORT_DIR} && printf '{excludes}\\n' >> .git/info/exclude",
        timeout_s=timeout_s,
    )
    if not result.ok:
        raise SandboxError(f"could not prepare the sandbox repository: {result.output.strip()}")


class PatchTooLarge(Exception):
    """The change's diff is larger than `MAX_PATCH_BYTES`; the message says what to do.
    `paths` are the paths it changes (what undoing it puts back)."""

    def __init__(self, size: int, paths: tuple[str, ...] = ()) -> None:
        super().__init__(
            f"the change is a diff of {size:,} bytes, more than the {MAX_PATCH_BYTES:,} "
            "Loopwright verifies and delivers: leave generated, vendored and binary files "
            "out of the fix"
        )
        self.size = size
        self.paths = paths


def export_patch(sandbox: Sandbox, timeout_s: float, *, base: Path) -> str:
    """The model's changes as a binary-safe unified diff against the clean `base` tree.

    In a container, git runs inside the disposable sandbox. The local backend has no such
    boundary, so there git runs on the host against a pristine copy of `base`'s own git
    directory with the agent's tree only as the work tree: nothing the agent wrote into
    its `.git` (hooks, fsmonitor, textconv or filter drivers) is ever read.

    Raises `PatchTooLarge` for a diff over `MAX_PATCH_BYTES` (from a container, before
    the host reads any of it).
    """
    from loopwright.sandbox.local import LocalSandbox

    if isinstance(sandbox, LocalSandbox):
        return without_gitlinks(_export_on_host(sandbox.workspace, base))
    opts = " ".join(SANDBOX_GIT)
    # A repository the agent nested in its tree (listed as `dir/`) is excluded before
    # `add`: git would record it as a gitlink, or fail on one without commits.
    nested = (
        f"git {opts} ls-files --others --exclude-standard "
        r"| sed -n -e 's/[][*?\\]/\\&/g' -e 's|^\(.*/\)$|/\1|p' >> .git/info/exclude"
    )
    # `$GIT_DIR/info/attributes` outranks every other attributes file: no clean filter
    # the model configured runs, so the patch is the working tree's bytes and two exports
    # of one tree agree (pair mode reviews one export; delivery takes the next).
    unfiltered = "printf '* -filter\\n' > .git/info/attributes"
    result = sandbox.exec(
        f"{nested} && {unfiltered} && git {opts} add --all && "
        f"git {opts} diff --cached --binary --no-color --no-ext-diff --no-textconv "
        f"--no-renames $(git rev-list --max-parents=0 HEAD | tail -n 1) > {PATCH_FILE} && "
        f"git {opts} reset --quiet && "
        f"printf '\\nloopwright-patch-bytes=%s\\n' \"$(wc -c < {PATCH_FILE})\"",
        timeout_s=timeout_s,
    )
    if not result.ok:
        raise SandboxError(f"could not export the patch: {result.output.strip()[-2000:]}")
    sizes = _PATCH_SIZE.findall(result.output)
    if sizes and int(sizes[-1]) > MAX_PATCH_BYTES:
        listed = sandbox.exec(
            f"git {opts} add --all && git {opts} diff --cached --name-only -z --no-renames "
            f"$(git rev-list --max-parents=0 HEAD | tail -n 1) > {PATCH_FILE} && "
            f"git {opts} reset --quiet",
            timeout_s=timeout_s,
        )
        try:
            names = sandbox.read_file(PATCH_FILE) if listed.ok else b""
        except FileToolError:
            names = b""
        raise PatchTooLarge(int(sizes[-1]), _names(names))
    try:
        patch = sandbox.read_file(PATCH_FILE).decode("utf-8", errors="surrogateescape")
    except FileToolError as exc:
        raise SandboxError(f"could not read the exported patch: {exc}") from exc
    return without_gitlinks(patch)


def without_gitlinks(patch: str) -> str:
    """`patch` without the entries that record a nested repository (mode 160000): the
    snapshot never holds one, and nothing of a repository the agent nested is delivered."""
    sections = re.split(r"(?m)^(?=diff --git )", patch)
    kept = [s for s in sections if not _GITLINK_LINE.search(s.split("\n--- ", 1)[0])]
    return "".join(kept)


def _export_on_host(work_tree: Path, base: Path) -> str:
    with tempfile.TemporaryDirectory(prefix="loopwright-export-") as tmp:
        git_dir = Path(tmp) / "git"
        shutil.copytree(base / ".git", git_dir, symlinks=True)
        info = git_dir / "info"
        info.mkdir(exist_ok=True)
        where = ["--git-dir", str(git_dir), "--work-tree", str(work_tree)]
        excludes = list(SANDBOX_EXCLUDES)
        (info / "exclude").write_text("\n".join(excludes) + "\n", encoding="utf-8")
        # A repository the agent nested in its tree is listed as `dir/`; it is excluded
        # before `add`, which would record it as a gitlink or fail on one without commits.
        others = git([*where, "ls-files", "-z", "--others", "--exclude-standard"], Path(tmp))
        excludes += ["/" + _glob_escape(rel) for rel in others.split("\0") if rel.endswith("/")]
        (info / "exclude").write_text("\n".join(excludes) + "\n", encoding="utf-8")
        git([*where, "add", "--all"], Path(tmp))
        # Into a file, measured before it is read: a change of gigabytes (a model that wrote
        # a huge file) never passes through this process's memory.
        out = Path(tmp) / "patch"
        diff = ["diff", "--cached", "--binary", "--no-color", "--no-renames", f"--output={out}"]
        git([*where, *diff, "HEAD"], Path(tmp))
        size = out.stat().st_size
        if size > MAX_PATCH_BYTES:
            names = git(
                [*where, "diff", "--cached", "--name-only", "-z", "--no-renames", "HEAD"],
                Path(tmp),
            )
            raise PatchTooLarge(size, _names(names.encode("utf-8", "surrogateescape")))
        return out.read_bytes().decode("utf-8", errors="surrogateescape")


def _names(listed: bytes) -> tuple[str, ...]:
    """The paths of a `-z` listing, sorted."""
    return tuple(sorted({n.decode("utf-8", "surrogateescape") for n in listed.split(b"\0") if n}))


def _names_git_dir(rel: str) -> bool:
    """A path through `.git`, or through a name git treats as one on some file system
    (`.git ` and `.git.`, the short name `git~1`, an NTFS stream `.git::$...`), which git
    refuses to add."""
    for part in rel.rstrip("/").split("/"):
        name = part.lower()
        if name.rstrip(" .") == ".git" or name == "git~1" or name.startswith(".git:"):
            return True
    return False


def _repository_root(path: Path) -> Path | None:
    """The top of the work tree of the repository `path` is in (None: in none).

    `core.worktree` can name any directory as the work tree; it is refused unless that
    directory's own repository is the same one, so only the directory that holds the
    repository is ever snapshotted or patched."""
    top = host_git.run(["rev-parse", "--show-toplevel", "--absolute-git-dir"], path)
    lines = top.stdout.strip().split("\n")
    if top.returncode != 0 or len(lines) < 2:
        return None
    root, git_dir = Path(lines[0]), Path(lines[1])
    again = git(["rev-parse", "--absolute-git-dir"], root, check=False).strip()
    if not again or Path(again).resolve() != git_dir.resolve():
        raise WorkspaceError(
            f"the repository at {path} sets its work tree to {root} (core.worktree), "
            "another directory; unset core.worktree or pass that directory's own repository"
        )
    return root


def _inside(root: Path, rel: str) -> bool:
    """`rel` names a file of `root` itself: no `..`, no absolute path, no symlink on the way."""
    parts = rel.split("/")
    if rel.startswith("/") or any(part in ("", ".", "..") for part in parts):
        return False
    parent = root
    for part in parts[:-1]:
        parent = parent / part
        if parent.is_symlink():
            return False
    return True


def _glob_escape(rel: str) -> str:
    return re.sub(r"([][*?\\])", r"\\\1", rel)


def tree_fingerprint(source: Path) -> str | None:
    """A hash of the files `snapshot` would copy from `source` (paths, contents, the
    executable bit, symlink targets): equal for equal working trees, whatever their history.
    None when `source` is no repository (the mission then says why)."""
    if not source.is_dir():
        return None
    root = _repository_root(source)
    if root is None:
        return None
    listed = git(["ls-files", "-z", "--cached", "--others", "--exclude-standard"], root)
    digest = hashlib.sha256()
    for rel in sorted(set(filter(None, listed.split("\0")))):
        if rel.endswith("/") or _names_git_dir(rel) or not _inside(root, rel):
            continue
        src = root / rel
        if src.is_symlink():
            kind, data = "link", os.fsencode(os.readlink(src))
        elif src.is_file():
            kind = "exec" if src.stat().st_mode & 0o100 else "file"
            data = src.read_bytes()
        else:
            continue
        # A name git lists with bytes that are not UTF-8 is hashed as those bytes.
        digest.update(f"{kind} {rel}\0{len(data)}\0".encode("utf-8", "surrogateescape"))
        digest.update(data)
    return "sha256:" + digest.hexdigest()
