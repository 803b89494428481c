"""GitHub sign-in across server processes: two servers over one store (SQLite and
PostgreSQL), as behind a load balancer. A user signed in on one is signed in on the other,
signed out on either is signed out on both, and the database never holds a session id.

Over real HTTP: each server under uvicorn, GitHub's OAuth pages (`FakeGitHubWeb`) and its
REST API (`FakeGitHub`, checked against the OpenAPI description) on loopback."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from itsdangerous import URLSafeSerializer
from sqlalchemy import select

from loopwright.app import signin
from loopwright.app.api import GITHUB_COOKIE, GitHubSessions, github_session_value
from loopwright.app.server import create_app, serve_in_thread
from loopwright.app.stream import StreamTiming
from loopwright.config import Settings
from loopwright.request import MissionRequest
from loopwright.store import Store, migrate
from loopwright.store.models import Base
from tests.fakes.github import FakeGitHub
from tests.fakes.github_web import FakeGitHubWeb

CLIENT_ID = "Iv1.0123456789abcdef"
CLIENT_SECRET = "0123456789abcdef0123456789abcdef01234567"
MANY = [f"acme/service-{n:03d}" for n in range(230)]
"""More repositories than a cookie holds: the list is kept in the store."""
FEW = "acme/shop"
"""Alice's one repository: her cookie carries it, the store keeps no list for her."""
TIMING = StreamTiming(ping_s=1.0, poll_s=0.25, max_stream_s=60, retry_ms=200)


@dataclass
class Servers:
    a: str
    b: str
    store: Store
    settings: Settings
    web: FakeGitHubWeb
    deep: str
    """A mission on the last of `MANY`: only a session that holds the whole list sees it."""

    def sign_in(self, url: str, login: str) -> httpx.Client:
        """A browser that goes through GitHub's sign-in on the server at `url`."""
        self.web.approve_as = login
        client = httpx.Client(base_url=url, timeout=10)
        start = client.get("/auth/github")
        assert start.status_code == 302
        back = httpx.get(start.headers["location"], timeout=10)
        assert back.status_code == 302
        done = client.get(back.headers["location"])
        assert done.status_code == 303, done.text
        return client

    def kept_sessions(self) -> int:
        with self.store.engine.connect() as connection:
            return int(connection.exec_driver_sql("SELECT count(*) FROM sign_in_sessions").scalar())


def replay(url: str, cookie: str) -> httpx.Client:
    """Another browser holding a copy of a GitHub session cookie."""
    client = httpx.Client(base_url=url, timeout=10)
    client.cookies.set(GITHUB_COOKIE, cookie)
    return client


def session_id(cookie: str) -> str:
    _, payload = URLSafeSerializer("").loads_unsafe(cookie)
    assert isinstance(payload, dict)
    sid = payload["sid"]
    assert isinstance(sid, str) and len(sid) >= 32
    return sid


def every_stored_text(store: Store) -> list[str]:
    """Every string and JSON value in every table the models know, as text."""
    found: list[str] = []
    with store.engine.connect() as connection:
        for table in Base.metadata.sorted_tables:
            for row in connection.execute(select(table)):
                found.extend(str(value) for value in row if value is not None)
    return found


@pytest.fixture
def servers(store_url: str, tmp_path: Path) -> Iterator[Servers]:
    with FakeGitHub(4242) as github, FakeGitHubWeb(github, CLIENT_ID, CLIENT_SECRET) as web:
        github.add_installation(17, "acme")
        github.add_repo(FEW)
        github.set_permission(FEW, "alice", "read")
        for name in MANY:
            github.add_repo(name)
            github.set_permission(name, "carol", "triage")
        settings = Settings.from_env(
            {
                "LOOPWRIGHT_DATA_DIR": str(tmp_path / "data"),
                "LOOPWRIGHT_DATABASE_URL": store_url,
                "LOOPWRIGHT_GITHUB_API_URL": github.url,
                "LOOPWRIGHT_GITHUB_WEB_URL": web.url,
                "LOOPWRIGHT_GITHUB_CLIENT_ID": CLIENT_ID,
                "LOOPWRIGHT_GITHUB_CLIENT_SECRET": CLIENT_SECRET,
            }
        )
        first = create_app(settings, mode="local", timing=TIMING)
        second = create_app(settings, mode="local", timing=TIMING)
        with serve_in_thread(first) as a, serve_in_thread(second) as b, Store(store_url) as store:
            request = MissionRequest(
                trigger="check_run",
                repo=MANY[-1],
                clone_url=f"https://github.com/{MANY[-1]}.git",
                head_sha="c3c3c3c3",
                pr_number=7,
                installation_id=17,
            )
            mission, _ = store.create_mission(request)
            yield Servers(a, b, store, settings, web, deep=mission.id)
        github.assert_no_rejections()
        web.assert_no_rejections()


def test_a_session_signed_in_on_one_server_is_served_by_the_other_and_signed_out_on_both(
    servers: Servers,
) -> None:
    laptop = servers.sign_in(servers.a, "carol")
    cookie = laptop.cookies[GITHUB_COOKIE]
    sid = session_id(cookie)
    on_b = replay(servers.b, cookie)
    assert [m["id"] for m in on_b.get("/api/missions").json()] == [servers.deep]
    assert servers.kept_sessions() == 1
    assert [m["id"] for m in laptop.get("/api/missions").json()] == [servers.deep]
    # A reader of the database finds no session id to present as a cookie.
    assert not any(sid in text for text in every_stored_text(servers.store))

    assert on_b.post("/logout").status_code == 303
    assert servers.kept_sessions() == 0
    assert laptop.get("/api/missions").status_code == 401
    assert replay(servers.a, cookie).get("/api/missions").status_code == 401
    assert replay(servers.b, cookie).get("/api/missions").status_code == 401
    assert not any(sid in text for text in every_stored_text(servers.store))


def test_signing_out_on_another_server_leaves_no_session_id_in_the_database(
    servers: Servers,
) -> None:
    """Also for a session whose cookie carries its list: the sign-out is recorded under
    the SHA-256 of its id, which no one can turn back into a cookie."""
    alice = servers.sign_in(servers.a, "alice")
    cookie = alice.cookies[GITHUB_COOKIE]
    sid = session_id(cookie)
    assert servers.kept_sessions() == 0
    assert replay(servers.b, cookie).post("/logout").status_code == 303
    assert alice.get("/api/missions").status_code == 401
    assert replay(servers.b, cookie).get("/api/missions").status_code == 401
    stored = every_stored_text(servers.store)
    assert hashlib.sha256(sid.encode()).hexdigest() in stored
    assert not any(sid in text for text in stored)


def test_a_tampered_or_unknown_session_cookie_is_refused_by_every_server(
    servers: Servers, tmp_path: Path
) -> None:
    good = servers.sign_in(servers.a, "carol").cookies[GITHUB_COOKIE]
    for url in (servers.a, servers.b):
        assert replay(url, good).get("/api/missions").status_code == 200
    body, _, mac = good.rpartition(".")
    # Signed with the right secret, but its repository list was never kept in this store.
    elsewhere_url = f"sqlite:///{tmp_path / 'elsewhere.db'}"
    migrate(elsewhere_url)
    with Store(elsewhere_url) as elsewhere:
        unknown = github_session_value(
            servers.settings, GitHubSessions(elsewhere), "carol", MANY, int(time.time()) + 600
        )
    refused = {
        "signature flipped": f"{body}.{mac[::-1]}",
        "no signature": body,
        "garbage": "x.y",
        "unknown session": unknown,
    }
    for url in (servers.a, servers.b):
        for name, value in refused.items():
            assert replay(url, value).get("/api/missions").status_code == 401, name


def test_an_expired_session_is_refused_everywhere_and_swept_from_the_store(
    servers: Servers, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Long enough that signing in and the first replay fit inside it on a busy machine.
    max_age = 6
    monkeypatch.setattr(signin, "GITHUB_SESSION_MAX_AGE_S", max_age)
    cookie = servers.sign_in(servers.a, "carol").cookies[GITHUB_COOKIE]
    signed_in = time.time()  # the session's expiry was set before this
    assert replay(servers.b, cookie).get("/api/missions").status_code == 200
    time.sleep(max(0.0, signed_in + max_age + 1.1 - time.time()))
    assert replay(servers.a, cookie).get("/api/missions").status_code == 401
    assert replay(servers.b, cookie).get("/api/missions").status_code == 401
    # The next sign-in, on either server, deletes what has expired.
    monkeypatch.setattr(signin, "GITHUB_SESSION_MAX_AGE_S", 600)
    fresh = servers.sign_in(servers.b, "carol").cookies[GITHUB_COOKIE]
    assert servers.kept_sessions() == 1
    assert replay(servers.a, fresh).get("/api/missions").status_code == 200
