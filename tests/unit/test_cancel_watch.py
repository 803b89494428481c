"""The App's cancel watcher keeps polling through a store outage, says so once in the log,
and still delivers a cancel request once the store answers again."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

from structlog.testing import capture_logs

from loopwright.app.runner import watch_for_cancel
from loopwright.request import MissionRequest
from loopwright.store import Store, migrate
from loopwright.store.missions import claimed


def request() -> MissionRequest:
    return MissionRequest(
        repo="acme/app",
        clone_url="https://github.com/acme/app.git",
        head_sha=f"{1:040x}",
        head_ref="main",
        check_name="tests",
        trigger="check_run",
    )


def wait_for(predicate, timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return predicate()


def test_a_cancel_arrives_after_the_store_failed_for_a_while(tmp_path: Path) -> None:
    db = tmp_path / "loopwright.db"
    url = f"sqlite:///{db}"
    migrate(url)
    with Store(url) as store:
        mission, _ = store.create_mission(request())
        store.mark_running(mission.id)
        with capture_logs() as logs, watch_for_cancel(store, mission.id, poll_s=0.01) as cancel:
            # The table goes away under the watcher: every poll now fails in the database.
            with sqlite3.connect(db) as raw:
                raw.execute("ALTER TABLE missions RENAME TO missions_away")
            assert wait_for(lambda: any(e["event"] == "cancel_poll_failed" for e in logs))
            assert not cancel.cancelled
            with sqlite3.connect(db) as raw:
                raw.execute("ALTER TABLE missions_away RENAME TO missions")
            assert store.request_cancel(mission.id, "Cancelled by @ann.") == "requested"
            assert wait_for(lambda: cancel.cancelled)
            assert cancel.summary == "Cancelled by @ann."
        failed = [e for e in logs if e["event"] == "cancel_poll_failed"]
        assert len(failed) == 1, failed  # once per outage, not once per poll
        assert failed[0]["mission"] == mission.id
        assert "OperationalError" in failed[0]["error"]
        assert any(e["event"] == "cancel_poll_recovered" for e in logs)


def test_a_run_another_worker_took_over_is_stopped_at_its_next_stage(tmp_path: Path) -> None:
    """A worker taken as lost runs on; its watcher notices that the mission's run is no
    longer its claim and stops it the way a cancel does, so it delivers nothing."""
    url = f"sqlite:///{tmp_path / 'loopwright.db'}"
    migrate(url)
    with Store(url) as store:
        mission, _ = store.create_mission(request())
        claim = store.claim(mission.id, runner="host-a:1:1")
        assert claim is not None
        with claimed(claim), watch_for_cancel(store, mission.id, poll_s=0.01) as cancel:
            time.sleep(0.1)
            assert not cancel.cancelled  # its own run: nothing to stop
            assert store.take_over_lost(mission.id, "host-a:1:1", "queued", "lost")
            assert store.claim(mission.id, runner="host-b:2:2") is not None
            assert wait_for(lambda: cancel.cancelled)
        assert "no longer owns" in (cancel.summary or "")
        # B's run was not touched, and a cancel request for it is B's, not A's to see.
        assert store.cancel_requested(mission.id) is None
