"""A repository or a model that makes paths the host cannot walk or resolve.

Git stores a path 1,200 directories deep, or one whose absolute form is longer than the
system takes; Python's copies, walks and removals of the first raise `RecursionError`, and
every call on the second `ENAMETOOLONG`, as `realpath` does on a chain of 1,500 symlinks.
The real CLI runs each case: the snapshot refuses such a repository with what to fix,
verification refuses such a patch with why, the file tools refuse such a path to the model,
nothing is left in the data directory, and the user's tree is untouched.
"""

from __future__ import annotations

import os
import shlex
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from loopwright.sandbox.hosttree import MAX_DEPTH, remove_tree
from tests.conftest import init_repo, step, tool
from tests.integration.test_adversarial import hostile_session, tree_digest
from tests.scenarios import EDIT, FIX_NEW, PLAN, model_env

LEVELS = 1_200


@pytest.fixture
def cleanup() -> Iterator[list[Path]]:
    """Deep trees the test made, removed by the test itself whatever fails: pytest's own
    clean-up of old temporary directories recurses and would trip over one left behind."""
    trees: list[Path] = []
    yield trees
    for tree in trees:
        remove_tree(tree)


def nest(root: Path, top: str) -> str:
    """A file `LEVELS` directories below `root/top`, made by coreutils; its relative path."""
    folder = "/".join([top, *["d"] * LEVELS])
    subprocess.run(["mkdir", "-p", "--", str(root / folder)], check=True)
    (root / folder / "leaf.txt").write_text("deep\n")
    return f"{folder}/leaf.txt"


@pytest.mark.parametrize("source", ["path", "url"])
def test_a_repository_nesting_a_path_too_deep_is_refused_with_what_to_fix(
    example_repo: Any, scripted: Any, run_cli: Any, tmp_path: Path, cleanup: list[Path],
    source: str,
) -> None:  # fmt: skip
    """Before, the snapshot raised `RecursionError` out of the mission. A clone (the URL
    case) holds the path too: it is removed with the mission's other trees."""
    repo = example_repo("python-invoice")
    cleanup += [repo / "vendor", tmp_path / "data"]
    nest(repo, "vendor")
    init_repo(repo)
    before = tree_digest(repo / "invoice")
    server = scripted(hostile_session())
    target = str(repo) if source == "path" else f"file://{repo}"
    run = run_cli("fix", target, "--sandbox", "local", env=model_env(server))
    assert run.exit_code == 2, run.stderr
    assert run.result["status"] == "error"
    assert run.result["message"] == (
        f"the repository holds vendor/d/d/…({LEVELS - 4} more)…/d/d/leaf.txt, a path nested "
        f"{LEVELS + 1} directories deep (the limit is {MAX_DEPTH}), which Loopwright cannot "
        "copy. Move or remove it (an untracked file can also be listed in .gitignore) and run "
        "again"
    )
    assert run.of_type("error")[-1]["kind"] == "WorkspaceError"
    assert run.of_type("done")
    mission = tmp_path / "data" / "missions" / run.result["mission"]
    assert (mission / "result.json").is_file()
    assert not (mission / "trees").exists()
    assert tree_digest(repo / "invoice") == before


@pytest.mark.parametrize("sandbox", ["local", pytest.param("docker", marks=pytest.mark.docker)])
def test_a_patch_writing_a_path_too_deep_is_refused_by_verification(
    example_repo: Any, scripted: Any, run_cli: Any, tmp_path: Path, cleanup: list[Path],
    sandbox: str,
) -> None:  # fmt: skip
    """The model fixes the bug and also makes a file 1,201 directories deep. Before,
    verification's copy of the tree raised `RecursionError` and the mission lost its result;
    now it is not verified, for that reason, and nothing is applied."""
    repo = example_repo("python-invoice")
    cleanup += [tmp_path / "data", repo / ".deep"]  # .deep: should a regression apply it
    before = tree_digest(repo)
    folder = "/".join([".deep", *["d"] * LEVELS])
    make = tool("run_command", command=f"mkdir -p {folder} && echo deep > {folder}/leaf.txt")
    server = scripted(hostile_session(make, fix=True))
    run = run_cli("fix", str(repo), "--sandbox", sandbox, env=model_env(server))
    assert run.exit_code == 1, run.stderr
    assert run.result["status"] == "unverified"
    assert run.result["message"] == (
        f"the patch writes .deep/d/d/…({LEVELS - 4} more)…/d/d/leaf.txt, a path nested "
        f"{LEVELS + 1} directories deep (the limit is {MAX_DEPTH}), which Loopwright cannot "
        "verify or deliver"
    )
    assert f"+++ b/{folder}/leaf.txt" in run.result["patch"]
    assert FIX_NEW in run.result["patch"]
    verify = [e for e in run.of_type("stage") if e["stage"] == "verify"]
    assert verify[-1]["status"] == "unverified"
    assert not run.of_type("error")
    mission = tmp_path / "data" / "missions" / run.result["mission"]
    assert (mission / "patch.diff").read_text() == run.result["patch"]
    assert not (mission / "trees").exists()
    assert tree_digest(repo) == before
    assert not list(Path("/tmp").glob(f"loopwright-{run.result['mission'][:20]}*"))


def test_an_attempt_writing_a_path_too_deep_fails_and_the_next_one_is_verified(
    example_repo: Any, scripted: Any, run_cli: Any, tmp_path: Path, cleanup: list[Path]
) -> None:
    """With independent attempts, such a patch does not pass its attempt (the reason says
    why), the path is undone, and the next attempt's fix alone is verified."""
    repo = example_repo("python-invoice")
    cleanup += [tmp_path / "data", repo / ".deep"]  # .deep: should a regression apply it
    folder = "/".join([".deep", *["d"] * LEVELS])
    make = tool("run_command", command=f"mkdir -p {folder} && echo deep > {folder}/leaf.txt")
    tests = tool("run_command", command="python -m pytest -q")
    finish = tool("finish", summary="done")
    server = scripted(
        [step(PLAN), step(EDIT), step(make), step(finish), step(EDIT), step(tests), step(finish)]
    )
    env = model_env(server, LOOPWRIGHT_ATTEMPTS="nano=2", LOOPWRIGHT_ATTEMPT_STEPS="6")
    run = run_cli("fix", str(repo), "--sandbox", "local", env=env)
    assert run.exit_code == 0, run.stderr
    assert run.result["status"] == "verified"
    attempts = [(e["attempt"], e["status"]) for e in run.of_type("attempt")]
    assert attempts == [(1, "started"), (1, "failed"), (2, "started"), (2, "passed")]
    assert run.of_type("attempt")[1]["reason"] == (
        f"the patch writes .deep/d/d/…({LEVELS - 4} more)…/d/d/leaf.txt, a path nested "
        f"{LEVELS + 1} directories deep (the limit is {MAX_DEPTH}), which Loopwright cannot "
        "verify or deliver"
    )
    assert ".deep" not in run.result["patch"] and FIX_NEW in run.result["patch"]
    assert FIX_NEW in (repo / "invoice/totals.py").read_text()
    assert not list(Path("/tmp").glob(f"loopwright-{run.result['mission'][:20]}*"))


def long_path(total: int = 4060) -> str:
    """A path 17 directories deep (within the depth limit) of `total` bytes: its absolute
    path anywhere on the host is over the system's 4,096 bytes."""
    parts = ["n" * 240] * 16
    used = sum(len(p) + 1 for p in parts) + len("leaf.txt")
    return "/".join([*parts, "m" * (total - used - 1)]) + "/leaf.txt"


def write_relative(root: Path, rel: str) -> None:
    """Write the file `rel` under `root` one directory at a time, through descriptors: its
    absolute path is too long for any call that takes one."""
    *folders, name = rel.split("/")
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for folder in folders:
            os.mkdir(folder, dir_fd=fd)
            inner = os.open(folder, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = inner
        leaf = os.open(name, os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
        os.write(leaf, b"long\n")
        os.close(leaf)
    finally:
        os.close(fd)


def test_a_repository_holding_a_path_too_long_for_the_host_is_refused(
    example_repo: Any, scripted: Any, run_cli: Any, tmp_path: Path, cleanup: list[Path]
) -> None:
    """Git lists it; before, the snapshot's first look at it raised `ENAMETOOLONG` out of
    the mission, which ended without a `done` event."""
    repo = example_repo("python-invoice")
    cleanup += [repo / ("n" * 240), tmp_path / "data"]
    write_relative(repo, long_path())
    init_repo(repo)
    server = scripted(hostile_session())
    run = run_cli("fix", str(repo), "--sandbox", "local", env=model_env(server))
    assert run.exit_code == 2, run.stderr
    assert run.result["status"] == "error"
    assert (
        "a path of 4060 bytes (the limit is 2048), which Loopwright cannot copy. Move"
        in (run.result["message"])
    )
    assert run.of_type("done")
    assert not server.requests


def test_a_patch_writing_a_path_too_long_for_the_host_is_refused_by_verification(
    example_repo: Any, scripted: Any, run_cli: Any, tmp_path: Path, cleanup: list[Path]
) -> None:
    repo = example_repo("python-invoice")
    cleanup += [tmp_path / "data", repo / ("n" * 240)]
    folder = long_path().rsplit("/", 1)[0]
    make = tool("run_command", command=f"mkdir -p {folder} && cd {folder} && echo x > leaf.txt")
    server = scripted(hostile_session(make, fix=True))
    run = run_cli("fix", str(repo), "--sandbox", "local", env=model_env(server))
    assert run.exit_code == 1, run.stderr
    assert run.result["status"] == "unverified"
    assert run.result["message"].startswith("the patch writes nnnnnnnnnnnnnnnnnnnn…")
    assert run.result["message"].endswith(
        "a path of 4060 bytes (the limit is 2048), which Loopwright cannot verify or deliver"
    )
    assert run.of_type("done")
    assert not (repo / ("n" * 240)).exists()


CHAIN = (
    "import os\n"
    "for i in range(1500): os.symlink(f'l{i + 1}', f'.chain/l{i}')\n"
    "open('.chain/l1500', 'w').write('x')\n"
)
LINK_CHAIN = tool("run_command", command="mkdir -p .chain && python3 -c " + shlex.quote(CHAIN))
LINK_LOOP = tool("run_command", command="ln -s loop loop")
NOTHING = tool("run_command", command="true")
LOOP_REFUSAL = "goes through a loop of symlinks, or through more links than can be followed"
LONG_REFUSAL = "is too long for the file system (a name over 255 bytes, or a path over 4,096"


@pytest.mark.parametrize(
    ("setup", "call", "refusal"),
    [
        (LINK_CHAIN, tool("read_file", path=".chain/l0"), LOOP_REFUSAL),
        (LINK_CHAIN, tool("write_file", path=".chain/l0", content="y"), LOOP_REFUSAL),
        (LINK_CHAIN, tool("edit_file", path=".chain/l0", old="x", new="y"), LOOP_REFUSAL),
        # Not resolved, so not judged: the kernel follows no more than 40 links either.
        (LINK_CHAIN, tool("run_command", command="echo y > .chain/l0"), "Too many levels of"),
        (LINK_LOOP, tool("read_file", path="loop"), LOOP_REFUSAL),
        (LINK_LOOP, tool("write_file", path="loop/x", content="y"), LOOP_REFUSAL),
        (NOTHING, tool("read_file", path="x" * 300), LONG_REFUSAL),
        # A write this long is refused before, for its depth (test_hostile_tool_input).
        (NOTHING, tool("read_file", path="a/" * 2100 + "f"), LONG_REFUSAL),
    ],
    ids=["chain-read", "chain-write", "chain-edit", "chain-command", "loop-read", "loop-write",
         "long-name", "long-path"],
)  # fmt: skip
def test_a_path_the_system_cannot_resolve_is_a_refusal_the_model_reads(
    example_repo: Any, scripted: Any, run_cli: Any, tmp_path: Path, cleanup: list[Path],
    setup: dict[str, Any], call: dict[str, Any], refusal: str,
) -> None:  # fmt: skip
    """A chain of 1,500 symlinks (Python's `realpath` recurses once a link), a link to
    itself, a name or a path too long for the file system: the tool refuses, saying why,
    and the mission goes on to verify the fix (a command writing through the chain runs
    and fails). Before, `RecursionError` or `OSError` escaped the tool and ended the mission
    without a message or a `done` event."""
    repo = example_repo("python-invoice")
    cleanup.append(tmp_path / "data")
    server = scripted(hostile_session(setup, call, fix=True))
    run = run_cli("fix", str(repo), "--sandbox", "local", env=model_env(server))
    refused = run.of_type("tool_result")[2]  # after the plan's and the setup's
    assert refused["tool"] == call["name"]
    assert refused["status"] == ("failed" if call["name"] == "run_command" else "refused")
    assert refusal in refused["output"]
    assert run.result["status"] == "verified", run.result["message"]


@pytest.mark.docker
@pytest.mark.parametrize(
    ("setup", "call", "refusal"),
    [
        (LINK_CHAIN, tool("read_file", path=".chain/l0"), LOOP_REFUSAL),
        (LINK_LOOP, tool("write_file", path="loop/x", content="y"), LOOP_REFUSAL),
        (NOTHING, tool("read_file", path="x" * 300), LONG_REFUSAL),
    ],
    ids=["chain-read", "loop-write", "long-name"],
)
def test_the_container_refuses_the_same_paths_with_the_same_words(
    example_repo: Any, scripted: Any, run_cli: Any, tmp_path: Path, cleanup: list[Path],
    setup: dict[str, Any], call: dict[str, Any], refusal: str,
) -> None:  # fmt: skip
    """The same rules, run by the container's Python (`scripts/resolve_path.py`)."""
    repo = example_repo("python-invoice")
    cleanup.append(tmp_path / "data")
    server = scripted(hostile_session(setup, call, fix=True))
    run = run_cli("fix", str(repo), "--sandbox", "docker", env=model_env(server))
    refused = run.of_type("tool_result")[2]
    assert (refused["tool"], refused["status"]) == (call["name"], "refused")
    assert refusal in refused["output"]
    assert run.result["status"] == "verified", run.result["message"]
