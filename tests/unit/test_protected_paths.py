"""Protected paths in the tool layer: normalised, symlink-resolved, on local and Docker sandboxes.

SECURITY check 43: `./.github/...`, `a/../.github/...`, a directory symlink into `.github`,
a symlink chain, a file symlink to a workflow, CODEOWNERS in its three locations and
Loopwright's own config are refused for write_file, edit_file and run_command writes, with a
message the model can act on, and the files never change.

Matching is case-sensitive (git and GitHub are): `.GITHUB/workflows/x.yml` is not a workflow
GitHub runs, so it is an ordinary file here.
"""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from loopwright.agent.policy import WriteTarget, check_writes, write_targets
from loopwright.agent.tools import Toolbox
from loopwright.config import SandboxLimits, Settings
from loopwright.protected_paths import DEFAULT_PROTECTED_PATHS, is_protected, protected_by
from loopwright.sandbox.base import Sandbox
from loopwright.sandbox.local import LocalProvider

CI_YML = "on: push\njobs: {}\n"

# --------------------------------------------------------------------------------------------
# Pure matching
# --------------------------------------------------------------------------------------------

MATCHES = [
    ("./.github/workflows/x.yml", ".github/workflows/**"),
    ("a/../.github/workflows/x.yml", ".github/workflows/**"),
    (".github/./workflows/x.yml", ".github/workflows/**"),
    (".github//workflows//x.yml", ".github/workflows/**"),
    ("../../.github/workflows/x.yml", ".github/workflows/**"),
    (".github/workflows", ".github/workflows/**"),
    (".github/actions/build/action.yml", ".github/actions/**"),
    ("CODEOWNERS", "CODEOWNERS"),
    (".github/CODEOWNERS", ".github/CODEOWNERS"),
    ("docs/CODEOWNERS", "docs/CODEOWNERS"),
    (".loopwright.yml", ".loopwright.yml"),
    (".github/loopwright.yml", ".github/loopwright.yml"),
    (".GITHUB/workflows/x.yml", None),
    (".github/Workflows/x.yml", None),
    (".github/dependabot.yml", None),
    ("github/workflows/x.yml", None),
    ("src/app.py", None),
    (".", None),
    ("", None),
]


@pytest.mark.parametrize(("path", "pattern"), MATCHES, ids=[p or "<empty>" for p, _ in MATCHES])
def test_protected_by_names_the_pattern(path: str, pattern: str | None) -> None:
    assert protected_by(path, DEFAULT_PROTECTED_PATHS) == pattern
    assert is_protected(path, DEFAULT_PROTECTED_PATHS) is (pattern is not None)


def test_negated_pattern_exempts_and_comments_are_ignored() -> None:
    patterns = ["# workflows", ".github/workflows/**", "  ", "!.github/workflows/gen.yml"]
    assert protected_by(".github/workflows/ci.yml", patterns) == ".github/workflows/**"
    assert protected_by(".github/workflows/gen.yml", patterns) is None


WRITES = [
    ("echo x > .github/workflows/ci.yml", [".github/workflows/ci.yml"]),
    ("echo x >> ./CODEOWNERS 2>&1", ["CODEOWNERS"]),
    ("cmd &> out.log; cmd >| b; cmd 1<> c; cmd >&d", ["out.log", "b", "c", "d"]),
    ("cmd >&2 2>&1 </etc/passwd", []),
    ("echo x | tee -a a b", ["a", "b"]),
    ("cp -r src dst", ["dst", "dst/src"]),
    ("cp -t dir a b", ["dir", "dir/a", "dir/b"]),
    ("mv a b", ["a", "b", "b/a"]),
    ("cd sub && touch x", ["sub/x"]),
    ("cd sub; cd ..; touch x", ["x"]),
    ("cd /workspace/sub && touch x", ["sub/x"]),
    ("touch /tmp/x ../y ~/z $HOME/w", []),
    ("bash -c 'rm -f a'", ["a"]),
    ("timeout 5 env A=1 truncate -s 0 f", ["f"]),
    ("echo $(touch inner)", ["inner"]),
    ("sed -i s/a/b/ f g", ["f", "g"]),
    ("sed -e s/a/b/ -i f", ["f"]),
    ("sed s/a/b/ f", []),
    ("perl -pi -e 's/a/b/' f", ["f"]),
    ("dd if=/dev/zero of=f count=1", ["f"]),
    ("chmod -R 755 d", ["d"]),
    ("install -m 644 a b", ["b", "b/a"]),
    ("cat a b > c", ["c"]),
    ("python -m pytest -q", []),
]


@pytest.mark.parametrize(("command", "paths"), WRITES, ids=[c for c, _ in WRITES])
def test_write_targets(command: str, paths: list[str]) -> None:
    assert [t.path for t in write_targets(command) if not t.tree or t.path] == paths


def test_tree_and_glob_targets() -> None:
    targets = write_targets("rm -rf build/* .github")
    assert WriteTarget("build/*", tree=True, glob=True) in targets
    assert WriteTarget(".github", tree=True) in targets


REFUSED_COMMANDS = [
    "echo x > .github/workflows/ci.yml",
    "echo x >> ./.github/workflows/ci.yml",
    "echo x > a/../.github/workflows/ci.yml",
    "echo x | tee .github/workflows/new.yml",
    "tee -a CODEOWNERS < /dev/null",
    "cp src/app.py .github/workflows/",
    "cp src/app.py .github/workflows/x.yml",
    "mv src/app.py .github/workflows/ci.yml",
    "mv .github/workflows/ci.yml src/",
    "mv .github old-github",
    "rm -rf .github",
    "rm .github/workflows/ci.yml",
    "rm .github/*/ci.yml",
    "echo x > .github/work*/ci.yml",
    "sed -i s/push/pull_request/ .github/workflows/ci.yml",
    "cd .github/workflows && echo x > ci.yml",
    "cd .github; cd workflows; touch new.yml",
    "bash -c 'echo x > .github/workflows/ci.yml'",
    'sh -c "printf x > docs/CODEOWNERS"',
    "ln -s .github link && echo x > link/workflows/x.yml",
    "ln -s ../.github sub/link",
    "ln -s .github/workflows && echo x > workflows/ci.yml",
    "echo x > /workspace/.github/workflows/ci.yml",
    "chmod +x .github/workflows/ci.yml",
    "dd if=/dev/zero of=.github/workflows/ci.yml count=1",
    "truncate -s 0 CODEOWNERS",
    "timeout 5 cp src/app.py .loopwright.yml",
    "env X=1 install -m 644 src/app.py .github/workflows/x.yml",
    "echo $(echo x > .github/CODEOWNERS)",
    "cat <<EOF > .github/loopwright.yml\nnetwork: always\nEOF",
    "rsync -a src/ .github/actions/",
    "perl -pi -e 's/a/b/' .github/workflows/ci.yml",
    "find . -name '*.py' -exec cp {} .github/workflows/ \\;",
]


@pytest.mark.parametrize("command", REFUSED_COMMANDS)
def test_check_writes_refuses(command: str) -> None:
    refusal = check_writes(command, DEFAULT_PROTECTED_PATHS)
    assert refusal is not None
    assert refusal.rule == "protected_path"
    assert "was not run" in refusal.message
    assert "fix the code instead" in refusal.message


ALLOWED_COMMANDS = [
    "python -m pytest -q > out.txt 2>&1",
    "echo x > src/new.txt",
    "cat .github/workflows/ci.yml",
    "cp .github/workflows/ci.yml /tmp/ci.yml",
    "ls .github/workflows > listing.txt",
    "echo x > .github/ISSUE_TEMPLATE.md",
    "rm -rf build/*",
    "mv src/a.py src/b.py",
    "echo x > .GITHUB/workflows/x.yml",
    "grep -r CODEOWNERS . > hits.txt",
    "sed s/a/b/ .github/workflows/ci.yml > src/copy.yml",
]


@pytest.mark.parametrize("command", ALLOWED_COMMANDS)
def test_check_writes_allows(command: str) -> None:
    assert check_writes(command, DEFAULT_PROTECTED_PATHS) is None


# --------------------------------------------------------------------------------------------
# Through the Toolbox, on a real local and a real Docker sandbox
# --------------------------------------------------------------------------------------------


def _tree(root: Path) -> Path:
    (root / ".github" / "workflows").mkdir(parents=True)
    (root / ".github" / "workflows" / "ci.yml").write_text(CI_YML)
    (root / ".github" / "CODEOWNERS").write_text("* @owner\n")
    (root / "CODEOWNERS").write_text("* @owner\n")
    (root / ".loopwright.yml").write_text("network: none\n")
    (root / "src").mkdir()
    (root / "src" / "app.py").write_text("def add(a, b):\n    return a + b\n")
    (root / "nested").mkdir()
    (root / "docs").symlink_to(".github")  # a directory symlink into .github
    (root / "hop").symlink_to(".github/workflows")  # a chain: chain -> hop -> workflows
    (root / "chain").symlink_to("hop")
    (root / "ok.txt").symlink_to(".github/workflows/ci.yml")  # a file symlink
    (root / "nested" / "up").symlink_to("../.github")  # relative, from a subdirectory
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return root


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _tree(tmp_path_factory.mktemp("protected"))


@pytest.fixture(scope="module")
def docker_provider(docker_ready: None) -> Iterator[object]:
    from loopwright.sandbox.docker.provider import DockerProvider

    settings = Settings(
        sandbox_limits=SandboxLimits(memory_mb=256, pids=128, cpus=1.0, output_cap_bytes=65536),
        network="none",
        sandbox_image=os.environ.get("LOOPWRIGHT_SANDBOX_IMAGE") or "loopwright-sandbox:latest",
    )
    provider = DockerProvider(settings)
    yield provider
    provider.close()


@pytest.fixture(params=["local", pytest.param("docker", marks=pytest.mark.docker)])
def box(request: pytest.FixtureRequest, tree: Path, tmp_path: Path) -> Iterator[Sandbox]:
    if request.param == "docker":
        provider = request.getfixturevalue("docker_provider")
        sandbox: Sandbox = provider.create(f"test-{uuid.uuid4().hex[:8]}", tree, network=False)
    else:
        local = LocalProvider(SandboxLimits(output_cap_bytes=65536), base_dir=tmp_path / "boxes")
        sandbox = local.create("mission-protected", tree, network=False)
    try:
        yield sandbox
    finally:
        sandbox.close()


DIGEST = (
    "find . -path ./.git -prune -o -printf '%p %y %l\\n' | LC_ALL=C sort; "
    "find . -path ./.git -prune -o -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum"
)


def _digest(sandbox: Sandbox) -> str:
    result = sandbox.exec(DIGEST, timeout_s=30)
    assert result.exit_code == 0, result.output
    return result.output


def _toolbox(sandbox: Sandbox) -> Toolbox:
    return Toolbox(sandbox, command_timeout_s=30, protected_paths=DEFAULT_PROTECTED_PATHS)


WRITE_ATTACKS = [
    ("./.github/workflows/x.yml", None),
    ("a/../.github/workflows/x.yml", None),
    (".github/./workflows/ci.yml", None),
    (".github//workflows/ci.yml", None),
    ("docs/workflows/x.yml", ".github/workflows/x.yml"),
    ("docs/workflows/ci.yml", ".github/workflows/ci.yml"),
    ("chain/x.yml", ".github/workflows/x.yml"),
    ("ok.txt", ".github/workflows/ci.yml"),
    ("nested/up/workflows/ci.yml", ".github/workflows/ci.yml"),
    ("CODEOWNERS", None),
    ("./.github/CODEOWNERS", None),
    ("docs/CODEOWNERS", None),
    (".loopwright.yml", None),
    ("src/../.loopwright.yml", None),
    ("docs/loopwright.yml", ".github/loopwright.yml"),
]


@pytest.mark.parametrize(("path", "resolved"), WRITE_ATTACKS, ids=[p for p, _ in WRITE_ATTACKS])
def test_write_file_refuses_protected_paths(box: Sandbox, path: str, resolved: str | None) -> None:
    before = _digest(box)
    outcome = _toolbox(box).run("write_file", json.dumps({"path": path, "content": "pwned\n"}))
    assert outcome.status == "refused", outcome.observation
    assert outcome.observation.startswith(f"Refused: {path!r}")
    assert "is a protected path" in outcome.observation
    assert "fix the code instead" in outcome.observation
    if resolved is not None:
        assert f"resolves through a symlink to {resolved}" in outcome.observation
    assert _digest(box) == before


@pytest.mark.parametrize("path", ["ok.txt", "docs/workflows/ci.yml", "chain/ci.yml"])
def test_edit_file_refuses_through_symlinks(box: Sandbox, path: str) -> None:
    before = _digest(box)
    outcome = _toolbox(box).run(
        "edit_file", json.dumps({"path": path, "old": "on: push", "new": "on: pull_request"})
    )
    assert outcome.status == "refused", outcome.observation
    assert "protected path" in outcome.observation
    assert _digest(box) == before


def test_ordinary_writes_still_work(box: Sandbox) -> None:
    """The control: the same toolbox writes normal files, and `.GITHUB` is a normal path."""
    toolbox = _toolbox(box)
    before = _digest(box)
    for path in ("src/new.py", ".GITHUB/workflows/x.yml", ".github/ISSUE_TEMPLATE.md"):
        outcome = toolbox.run("write_file", json.dumps({"path": path, "content": "ok\n"}))
        assert outcome.status == "ok", outcome.observation
        assert box.read_file(path) == b"ok\n"
    assert _digest(box) != before
    assert box.read_file(".github/workflows/ci.yml") == CI_YML.encode()


COMMAND_ATTACKS = [
    "echo pwned > .github/workflows/ci.yml",
    "echo pwned > docs/workflows/ci.yml",
    "echo pwned > ok.txt",
    "echo pwned >> chain/ci.yml",
    "cp src/app.py docs/workflows/",
    "cp src/app.py chain/",
    "mv src/app.py nested/up/workflows/ci.yml",
    "cd docs && echo pwned > CODEOWNERS",
    "cd nested && echo pwned > up/workflows/ci.yml",
    "echo pwned | tee docs/loopwright.yml",
    "rm -rf docs/workflows",
    "rm -rf hop",
    "sed -i s/push/pull_request/ ok.txt",
    "truncate -s 0 docs/CODEOWNERS",
    "ln -s .github/workflows w && echo pwned > w/ci.yml",
    "bash -c 'echo pwned > ./.github/workflows/ci.yml'",
    "chmod 777 ok.txt",
]


@pytest.mark.parametrize("command", COMMAND_ATTACKS)
def test_run_command_refuses_protected_writes(box: Sandbox, command: str) -> None:
    before = _digest(box)
    outcome = _toolbox(box).run("run_command", json.dumps({"command": command}))
    assert outcome.status == "refused", outcome.observation
    assert outcome.observation.startswith("Refused (protected_path):")
    assert "protected-path pattern" in outcome.observation
    assert _digest(box) == before


def test_run_command_names_the_symlink_target(box: Sandbox) -> None:
    outcome = _toolbox(box).run("run_command", json.dumps({"command": "echo x > ok.txt"}))
    assert "resolves through a symlink to .github/workflows/ci.yml" in outcome.observation


def test_run_command_control_writes_ordinary_files(box: Sandbox) -> None:
    before = _digest(box)
    outcome = _toolbox(box).run(
        "run_command",
        json.dumps({"command": "echo ok > src/out.txt && cat .github/workflows/ci.yml > o.txt"}),
    )
    assert outcome.status == "ok", outcome.observation
    assert box.read_file("o.txt") == CI_YML.encode()
    assert _digest(box) != before


def test_resolve_path_follows_links_inside_the_sandbox(box: Sandbox) -> None:
    assert box.resolve_path("docs/workflows/new.yml") == ".github/workflows/new.yml"
    assert box.resolve_path("chain/x/y") == ".github/workflows/x/y"
    assert box.resolve_path("./src//app.py") == "src/app.py"
    assert box.resolve_path("nested/up") == ".github"
