"""The patch a mission exports, on both sandboxes.

A change whose diff is larger than Loopwright verifies, stores and delivers
(`MAX_PATCH_BYTES`) ends its mission `unverified`, saying what to do. Before, a container's
export failed on the file-read limit and the mission ended in `error`, as if the
infrastructure had failed; the local sandbox stored and delivered any size.

Two exports of one tree are the same patch, whatever the model configured in the
sandbox's repository: pair mode reviews one export and delivery takes the next.
"""

from __future__ import annotations

import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from loopwright.config import SandboxLimits, Settings
from loopwright.sandbox.base import Sandbox
from loopwright.sandbox.local import LocalProvider
from loopwright.sandbox.workspace import (
    MAX_PATCH_BYTES,
    PatchTooLarge,
    export_patch,
    prepare_sandbox_repo,
    snapshot,
)
from tests.conftest import init_repo, read_events, step, tool
from tests.integration.test_adversarial import CHECK, hostile_session
from tests.integration.test_pair_terminal import pair_lines
from tests.scenarios import EDIT, FINISH, PLAN, model_env

SANDBOXES = [pytest.param("docker", marks=pytest.mark.docker), "local"]
LINE = 99
"""Characters of each line of the large file, before its newline."""
_OVER = MAX_PATCH_BYTES // (LINE + 2) + 100
TOO_LARGE = tool(
    "run_command",
    command=f"head -c {_OVER * LINE} /dev/zero | tr '\\0' x | fold -w {LINE} > vendor.txt",
)
"""A model's command that writes a file whose diff is about 10,010,000 bytes."""


def clean_base(tmp_path: Path) -> Path:
    """A snapshot of a one-file repository, as a mission's clean base."""
    source = tmp_path / "source"
    source.mkdir()
    (source / "README").write_text("a repository\n")
    init_repo(source)
    base = tmp_path / "base"
    snapshot(source, base)
    return base


@pytest.fixture(params=SANDBOXES)
def sandbox(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Sandbox, Path]]:
    base = clean_base(tmp_path)
    if request.param == "docker":
        request.getfixturevalue("docker_ready")
        from loopwright.sandbox.docker.provider import DockerProvider

        provider: Any = DockerProvider(Settings.from_env())
    else:
        provider = LocalProvider(SandboxLimits(), base_dir=tmp_path / "sandboxes")
    made = provider.create("patch-size", base, network=False)
    try:
        prepare_sandbox_repo(made, timeout_s=60)
        yield made, base
    finally:
        made.close()
        provider.close()


def _write_lines(sandbox: Sandbox, lines: int, last: int) -> None:
    """`vendor.txt`: `lines` lines of `LINE` x's, then one of `last` x's, by the sandbox's
    own shell (a file this size would not pass through the write tool)."""
    script = (
        f"head -c {lines * LINE} /dev/zero | tr '\\0' x | fold -w {LINE} > vendor.txt && "
        f"head -c {last} /dev/zero | tr '\\0' x >> vendor.txt && echo >> vendor.txt"
    )
    result = sandbox.exec(script, timeout_s=60)
    assert result.ok, result.output


def test_a_diff_of_exactly_the_limit_is_exported_and_one_byte_more_is_refused(
    sandbox: tuple[Sandbox, Path],
) -> None:
    made, base = sandbox
    lines = MAX_PATCH_BYTES // (LINE + 2) - 10
    _write_lines(made, lines, 0)
    # Each byte added to the last line adds one to the diff: fill it to the limit exactly.
    short = MAX_PATCH_BYTES - len(export_patch(made, timeout_s=120, base=base).encode())
    assert 0 < short < 2000
    _write_lines(made, lines, short)
    patch = export_patch(made, timeout_s=120, base=base)
    assert len(patch.encode()) == MAX_PATCH_BYTES
    assert patch.startswith("diff --git a/vendor.txt b/vendor.txt\n")
    _write_lines(made, lines, short + 1)
    with pytest.raises(PatchTooLarge) as refused:
        export_patch(made, timeout_s=120, base=base)
    assert refused.value.size == MAX_PATCH_BYTES + 1
    assert str(refused.value) == (
        f"the change is a diff of {MAX_PATCH_BYTES + 1:,} bytes, more than the "
        f"{MAX_PATCH_BYTES:,} Loopwright verifies and delivers: leave generated, vendored "
        "and binary files out of the fix"
    )


def test_a_local_change_of_many_megabytes_is_refused_without_being_read(tmp_path: Path) -> None:
    """On the local backend git runs on the host: its diff goes to a file measured before
    anything is read, so a model that wrote a huge file costs the host no memory."""
    base = clean_base(tmp_path)
    provider = LocalProvider(SandboxLimits(), base_dir=tmp_path / "sandboxes")
    made = provider.create("patch-memory", base, network=False)
    try:
        prepare_sandbox_repo(made, timeout_s=60)
        wrote = made.exec("head -c 60000000 /dev/urandom > blob.bin", timeout_s=60)
        assert wrote.ok, wrote.output
        tracemalloc.start()
        try:
            with pytest.raises(PatchTooLarge) as refused:
                export_patch(made, timeout_s=300, base=base)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    finally:
        made.close()
        provider.close()
    # Random bytes do not compress: their base85 diff is larger than the file.
    assert refused.value.size > 60_000_000
    assert refused.value.paths == ("blob.bin",)
    assert peak < 5_000_000, f"the export held {peak:,} bytes"


def test_a_clean_filter_the_model_configured_never_shapes_the_patch(
    sandbox: tuple[Sandbox, Path],
) -> None:
    """A filter that answers differently on its first run made the review's export show
    one change and delivery's another; the patch now carries the working tree's bytes."""
    made, base = sandbox
    toggle = "if [ -e .loopwright/seen ]; then cat; else touch .loopwright/seen; echo benign; fi"
    setup = made.exec(
        f"git config filter.t.clean \"sh -c '{toggle}'\" && "
        "printf 'app.txt filter=t\\n' > .gitattributes && printf 'real\\n' > app.txt",
        timeout_s=30,
    )
    assert setup.ok, setup.output
    first = export_patch(made, timeout_s=60, base=base)
    second = export_patch(made, timeout_s=60, base=base)
    assert first == second
    assert "+real\n" in first and "benign" not in first
    assert "+app.txt filter=t\n" in first


@pytest.mark.parametrize("where", SANDBOXES)
def test_a_mission_whose_change_is_too_large_ends_unverified_saying_why(
    where: str, example_repo: Any, scripted: Any, run_cli: Any, request: pytest.FixtureRequest
) -> None:
    if where == "docker":
        request.getfixturevalue("docker_ready")
    repo = example_repo("python-invoice")
    server = scripted(hostile_session(TOO_LARGE, fix=True))
    run = run_cli("fix", str(repo), "--sandbox", where, env=model_env(server))
    assert run.exit_code == 1, run.stderr
    assert run.result["status"] == "unverified"
    message = run.result["message"]
    assert message.startswith("the change is a diff of 10,0"), message
    assert message.endswith(
        f"more than the {MAX_PATCH_BYTES:,} Loopwright verifies and delivers: leave "
        "generated, vendored and binary files out of the fix"
    )
    assert not run.result.get("patch")
    assert not (repo / "vendor.txt").exists()
    assert run.of_type("done")


def test_a_build_whose_files_are_too_large_ends_unverified_saying_why(
    tmp_path: Path, scripted: Any, run_cli: Any
) -> None:
    server = scripted([step(TOO_LARGE), step(tool("finish", summary="done"))])
    out = tmp_path / "app"
    run = run_cli(
        "build", "A calculator", "--out", str(out), "--sandbox", "local", env=model_env(server)
    )
    assert run.exit_code == 1, run.stderr
    assert run.result["status"] == "unverified"
    assert run.result["message"].startswith("the change is a diff of 10,0"), run.result["message"]
    assert not (out / "vendor.txt").exists()


def test_in_pair_mode_finish_refuses_a_change_too_large_until_it_is_cut(
    example_repo: Any, scripted: Any, tmp_path: Path
) -> None:
    """Pair mode reviews the whole change at `finish`. A change too large to export
    cannot be reviewed, so `finish` refuses it (before, the review was skipped and the
    finish recorded) and says why; once the model removes the file, the change is
    reviewed and verified."""
    repo = example_repo("python-invoice")
    cut = tool("run_command", command="rm vendor.txt")
    server = scripted(
        [step(PLAN), step(TOO_LARGE), step(EDIT), step(CHECK), step(FINISH), step(cut),
         step(FINISH)]
    )  # fmt: skip
    run, events_path = pair_lines(repo, server, tmp_path, "", timeout=180)
    assert run.returncode == 0, run.stderr
    events = read_events(events_path)
    assert not [e for e in events if e["type"] == "approval_requested"]
    finishes = [e for e in events if e["type"] == "tool_result" and e["tool"] == "finish"]
    assert [e["status"] for e in finishes] == ["refused", "ok"]
    assert finishes[0]["output"].startswith("Refused: not finished. The change is a diff of 10,0")
    assert "leave generated, vendored and binary files out of the fix." in finishes[0]["output"]
    (done,) = [e for e in events if e["type"] == "done"]
    assert done["status"] == "verified"
    assert not (repo / "vendor.txt").exists()


@pytest.mark.parametrize("where", SANDBOXES)
def test_an_attempt_whose_change_is_too_large_fails_and_the_next_starts_from_the_base(
    where: str, example_repo: Any, scripted: Any, run_cli: Any, request: pytest.FixtureRequest
) -> None:
    """With several attempts on a tier, a too-large change fails its attempt (and the
    file it wrote is put back) rather than ending the mission."""
    if where == "docker":
        request.getfixturevalue("docker_ready")
    repo = example_repo("python-invoice")
    server = scripted(
        [step(PLAN), step(TOO_LARGE), step(FINISH),  # attempt 1
         step(tool("run_command", command="test ! -e vendor.txt")), step(EDIT), step(CHECK),
         step(FINISH)]  # attempt 2
    )  # fmt: skip
    env = model_env(server, LOOPWRIGHT_ATTEMPTS="nano=2", LOOPWRIGHT_ATTEMPT_STEPS="6")
    run = run_cli("fix", str(repo), "--sandbox", where, env=env)
    assert run.exit_code == 0, run.stderr
    assert run.result["status"] == "verified", run.result["message"]
    ended = [e for e in run.of_type("attempt") if e["status"] != "started"]
    assert [(e["attempt"], e["status"]) for e in ended] == [(1, "failed"), (2, "passed")]
    assert ended[0]["reason"].startswith("the change is a diff of 10,0")
    vendor_gone = [e for e in run.of_type("tool_result") if e["tool"] == "run_command"][1]
    assert vendor_gone["exit_code"] == 0
    assert not (repo / "vendor.txt").exists()
