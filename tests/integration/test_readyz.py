"""`/readyz` against a real Redis and PostgreSQL: ready while the store and the queue
answer, 503 naming the one that does not (and never its password); `/healthz` answers
either way, since the process itself is alive."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from litestar.testing import TestClient

from loopwright.app.server import create_app
from loopwright.config import Settings
from tests.services import free_port

PASSWORD = "s3cret-queue-pw"


def _client(tmp_path: Path, **env: str) -> TestClient:  # type: ignore[type-arg]
    settings = Settings.from_env({"LOOPWRIGHT_DATA_DIR": str(tmp_path / "data"), **env})
    return TestClient(create_app(settings, mode="local"))


def _with_password(url: str, port: int | None = None) -> str:
    parts = urlsplit(url)
    netloc = f"{parts.username or ''}:{PASSWORD}@{parts.hostname}:{port or parts.port}"
    return urlunsplit(parts._replace(netloc=netloc))


def test_ready_without_a_queue_when_the_store_answers(tmp_path: Path) -> None:
    with _client(tmp_path) as client:
        answer = client.get("/readyz")
    assert answer.status_code == 200
    assert answer.json() == {"status": "ready", "checks": {"store": {"ok": True}}}


def test_redis_up_then_stopped(tmp_path: Path, redis_service) -> None:
    with _client(tmp_path, LOOPWRIGHT_QUEUE_URL=redis_service.url) as client:
        up = client.get("/readyz")
        assert up.status_code == 200, up.text
        assert up.json()["checks"]["queue"] == {
            "ok": True,
            "at": f"redis://127.0.0.1:{redis_service.port}",
        }
        redis_service.stop()
        down = client.get("/readyz")
        assert client.get("/healthz").status_code == 200
    assert down.status_code == 503
    body = down.json()
    assert body["status"] == "unready"
    assert body["failed"] == ["queue"]
    assert body["checks"]["store"] == {"ok": True}
    queue = body["checks"]["queue"]
    assert queue["ok"] is False
    assert "ConnectionError" in queue["error"], queue


def test_a_failed_check_never_shows_the_password(tmp_path: Path, redis_service) -> None:
    url = _with_password(redis_service.url)
    redis_service.stop()
    with _client(tmp_path, LOOPWRIGHT_QUEUE_URL=url) as client:
        down = client.get("/readyz")
    assert down.status_code == 503
    assert down.json()["failed"] == ["queue"]
    assert PASSWORD not in down.text


def test_postgres_queue_up_and_unreachable(tmp_path: Path, postgres_url: str) -> None:
    # The test cluster trusts loopback, so the password is accepted and ignored.
    up_url = _with_password(postgres_url)
    with _client(tmp_path, LOOPWRIGHT_QUEUE_URL=up_url, LOOPWRIGHT_DATABASE_URL=up_url) as client:
        up = client.get("/readyz")
    assert up.status_code == 200, up.text
    assert set(up.json()["checks"]) == {"store", "queue"}
    assert PASSWORD not in up.text
    gone = _with_password(postgres_url, port=free_port())
    with _client(tmp_path, LOOPWRIGHT_QUEUE_URL=gone, LOOPWRIGHT_DATABASE_URL=up_url) as client:
        down = client.get("/readyz")
    assert down.status_code == 503
    assert down.json()["failed"] == ["queue"]
    assert "OperationalError" in down.json()["checks"]["queue"]["error"]
    assert PASSWORD not in down.text


def test_an_exposed_server_tells_an_anonymous_probe_only_which_check_failed(
    tmp_path: Path, redis_service
) -> None:
    """With the dashboard token set, the where and the why of a failure are for the token's
    holder (and the log); a load balancer still gets its 503 and the failed check's name."""
    token = "readyz-token-0123456789"
    redis_service.stop()
    with _client(
        tmp_path, LOOPWRIGHT_QUEUE_URL=redis_service.url, LOOPWRIGHT_DASHBOARD_TOKEN=token
    ) as client:
        anonymous = client.get("/readyz")
        holder = client.get("/readyz", headers={"Authorization": f"Bearer {token}"})
    assert anonymous.status_code == holder.status_code == 503
    assert anonymous.json() == {
        "status": "unready",
        "checks": {"store": {"ok": True}, "queue": {"ok": False}},
        "failed": ["queue"],
    }
    assert "127.0.0.1" not in anonymous.text
    queue = holder.json()["checks"]["queue"]
    assert queue["at"] == f"redis://127.0.0.1:{redis_service.port}"
    assert "ConnectionError" in queue["error"]
