"""A mission whose patch changes a file that is not UTF-8 (a Latin-1 text file) is stored,
listed and shown like any other, and its patch is served byte for byte: `git apply` of what
`/api/missions/{id}/patch` answers makes the file the mission made."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from litestar.testing import TestClient

from loopwright.app.server import create_app
from loopwright.config import Settings
from loopwright.missions.result import MissionResult
from loopwright.request import MissionRequest
from loopwright.store.repository import Store

BEFORE = "menu\ncafe\n".encode("latin-1")
AFTER = "menu\ncafé crème\n".encode("latin-1")


def git(repo: Path, *args: str) -> bytes:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True).stdout


@pytest.fixture
def latin1_patch(tmp_path: Path) -> str:
    """git's diff of a Latin-1 file, read as a mission reads it (`surrogateescape`)."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / "menu.txt").write_bytes(BEFORE)
    git(repo, "add", "menu.txt")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "menu")
    (repo / "menu.txt").write_bytes(AFTER)
    diff = git(repo, "diff")
    assert b"caf\xe9 cr\xe8me" in diff
    git(repo, "checkout", "-q", "menu.txt")
    return diff.decode("utf-8", "surrogateescape")


def test_a_latin1_patch_is_listed_shown_and_served_as_git_made_it(tmp_path, latin1_patch):
    app = create_app(Settings.from_env({"LOOPWRIGHT_DATA_DIR": str(tmp_path / "data")}),
                     mode="local")  # fmt: skip
    with TestClient(app) as client:
        store: Store = app.state.store
        mission, _ = store.create_mission(
            MissionRequest(trigger="check_run", repo="acme/menu", clone_url="https://x/acme/menu",
                           head_sha="1" * 40, check_name="tests")
        )  # fmt: skip
        store.mark_running(mission.id)
        store.mark_finished(
            MissionResult(mission.id, "verified", summary="menu fixed", patch=latin1_patch)
        )
        for path in ["/api/missions", f"/api/missions/{mission.id}", f"/missions/{mission.id}"]:
            assert client.get(path).status_code == 200, path
        shown = client.get(f"/api/missions/{mission.id}")
        assert "caf\ufffd cr\ufffdme" in shown.json()["result"]["patch"]
        changes = client.get(f"/api/missions/{mission.id}/changes")
        assert changes.status_code == 200
        assert [f["path"] for f in changes.json()["files"]] == ["menu.txt"]
        served = client.get(f"/api/missions/{mission.id}/patch")
        utf8, _ = store.create_mission(
            MissionRequest(trigger="check_run", repo="acme/menu", clone_url="https://x/acme/menu",
                           head_sha="2" * 40, check_name="tests")
        )  # fmt: skip
        store.mark_running(utf8.id)
        store.mark_finished(MissionResult(utf8.id, "verified", patch="+caf\xe9\n"))
        plain = client.get(f"/api/missions/{utf8.id}/patch")
        assert plain.headers["content-type"] == "text/x-diff; charset=utf-8"  # said once
        assert plain.content == "+caf\xe9\n".encode()
    assert served.status_code == 200
    assert served.headers["content-type"] == "text/x-diff"  # no charset: the bytes are not UTF-8
    assert served.content == latin1_patch.encode("utf-8", "surrogateescape")
    (tmp_path / "served.diff").write_bytes(served.content)
    repo = tmp_path / "repo"
    git(repo, "apply", str(tmp_path / "served.diff"))
    assert (repo / "menu.txt").read_bytes() == AFTER
