"""Bad query values on the API get a 400 that names what is allowed; nothing reaches the store."""

from __future__ import annotations

import pytest
from litestar.testing import TestClient

from loopwright.app.server import create_app
from loopwright.config import Settings
from loopwright.store.models import MISSION_STATUSES


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    data = tmp_path_factory.mktemp("data")
    app = create_app(Settings.from_env({"LOOPWRIGHT_DATA_DIR": str(data)}), mode="local")
    with TestClient(app) as client:
        yield client


@pytest.mark.parametrize("path", ["/api/missions?status=bogus", "/missions/stream?status=bogus"])
def test_an_unknown_status_names_every_allowed_status(client, path):
    answer = client.get(path)
    assert answer.status_code == 400
    detail = answer.json()["detail"]
    assert all(status in detail for status in MISSION_STATUSES), detail


@pytest.mark.parametrize(
    ("path", "named"),
    [
        ("/api/missions?repo=not a repo", "owner/name"),
        ("/api/missions?limit=many", "limit"),
        ("/api/missions/abc123/events?after=soon", "after"),
    ],
)
def test_other_bad_values_say_which_parameter(client, path, named):
    answer = client.get(path)
    assert answer.status_code == 400
    assert named in answer.text


def test_good_filters_still_answer(client):
    assert client.get("/api/missions?status=verified&repo=acme/shop&limit=5").json() == []
