"""`loopwright serve` takes what is alive after its start-up out of the garbage collector's
generations, so a full collection in the middle of a burst of deliveries does not walk
every module, route and SQLAlchemy structure again; it gives them back when it stops."""

from __future__ import annotations

import gc
from pathlib import Path

from litestar.testing import TestClient

from loopwright.app.server import create_app
from loopwright.config import Settings


def test_start_up_objects_are_frozen_while_a_serve_app_runs(tmp_path: Path) -> None:
    settings = Settings.from_env({"LOOPWRIGHT_DATA_DIR": str(tmp_path / "data")})
    gc.unfreeze()  # another server of this test process may be running
    assert gc.get_freeze_count() == 0
    with TestClient(create_app(settings, mode="local", freeze_heap=True)) as client:
        assert client.get("/healthz").status_code == 200
        frozen = gc.get_freeze_count()
        assert frozen > 10_000, frozen  # the interpreter's modules at least
    assert gc.get_freeze_count() == 0
    with TestClient(create_app(settings, mode="local")) as client:  # the default: no freeze
        assert client.get("/healthz").status_code == 200
        assert gc.get_freeze_count() == 0
