"""Signed session cookies: the dashboard token's and a GitHub sign-in's. A cookie is
accepted only unedited, unexpired, signed with the current secret, carrying a session id and
not signed out (the store, on a real SQLite file, says which ids are)."""

from __future__ import annotations

import datetime
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from itsdangerous import URLSafeSerializer

from loopwright.app.api import (
    GitHubSessions,
    dashboard_session,
    github_session,
    github_session_value,
    github_viewer,
    session_value,
    valid_session,
)
from loopwright.config import GitHubAppSettings, Settings
from loopwright.store import Store, migrate

TOKEN = "dashboard-token-0123456789"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    url = f"sqlite:///{tmp_path / 'loopwright.db'}"
    migrate(url)
    with Store(url) as store:
        yield store


def at(epoch: int) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(epoch, datetime.UTC)


def github_settings(secret: str = "client-secret-0123456789") -> Settings:
    return Settings(github=GitHubAppSettings(client_id="Iv1.x", client_secret=secret))


def test_a_dashboard_session_is_accepted_until_it_expires(store: Store) -> None:
    now = time.time()
    value = session_value(TOKEN, int(now) + 60)
    assert TOKEN not in value
    assert valid_session(TOKEN, value, store, now=now)
    assert not valid_session(TOKEN, value, store, now=now + 61)


def test_every_dashboard_session_has_its_own_id_and_a_revoked_one_is_refused(
    store: Store,
) -> None:
    expires = int(time.time()) + 60
    first, second = session_value(TOKEN, expires), session_value(TOKEN, expires)
    signed_first, signed_second = dashboard_session(TOKEN, first), dashboard_session(TOKEN, second)
    assert signed_first is not None and signed_second is not None
    assert signed_first.id != signed_second.id and len(signed_first.id) >= 32
    store.revoke_session(signed_first.id, at(signed_first.expires))
    assert not valid_session(TOKEN, first, store)
    assert valid_session(TOKEN, second, store)


def test_a_dashboard_session_that_was_edited_or_signed_otherwise_is_refused(
    store: Store,
) -> None:
    now = time.time()
    good = session_value(TOKEN, int(now) + 60)
    payload, _, signature = good.rpartition(".")
    expired = session_value(TOKEN, int(now) - 1)
    # The expiry of an expired cookie moved forward, keeping its signature.
    extended = URLSafeSerializer("").dumps({"exp": int(now) + 3600}).rpartition(".")[0]
    # Signed with the token, but from before cookies carried a session id.
    without_id = URLSafeSerializer(TOKEN, salt="loopwright-session").dumps({"exp": int(now) + 60})
    assert URLSafeSerializer(TOKEN, salt="loopwright-session").loads(without_id)
    refused = {
        "without a session id": without_id,
        "other token": session_value("another-token", int(now) + 60),
        "expired": expired,
        "extended": f"{extended}.{expired.rpartition('.')[2]}",
        "signature flipped": f"{payload}.{signature[::-1]}",
        "no signature": payload,
        "garbage": "1.x",
        "empty": "",
    }
    for name, value in refused.items():
        assert not valid_session(TOKEN, value, store, now=now), name


def test_a_github_session_carries_the_login_and_repositories(store: Store) -> None:
    settings = github_settings()
    value = github_session_value(
        settings, GitHubSessions(store), "alice", ["acme/Web", "acme/api"], int(time.time()) + 60
    )
    viewer = github_viewer(settings, GitHubSessions(store), store, value)
    assert viewer is not None
    assert viewer.login == "alice"
    assert viewer.repos == frozenset({"acme/web", "acme/api"})
    assert viewer.names == ("acme/api", "acme/Web")


def test_a_revoked_github_session_is_refused_and_another_of_the_same_user_is_not(
    store: Store,
) -> None:
    settings = github_settings()
    sessions = GitHubSessions(store)
    later = int(time.time()) + 60
    first = github_session_value(settings, sessions, "alice", ["acme/web"], later)
    second = github_session_value(settings, sessions, "alice", ["acme/web"], later)
    signed = github_session(settings, first)
    assert signed is not None and signed.login == "alice" and signed.repos == ("acme/web",)
    store.revoke_session(signed.id, at(signed.expires))
    assert github_viewer(settings, sessions, store, first) is None
    viewer = github_viewer(settings, sessions, store, second)
    assert viewer is not None and viewer.login == "alice"


def test_a_github_session_edited_expired_or_signed_otherwise_is_refused(store: Store) -> None:
    settings = github_settings()
    sessions = GitHubSessions(store)
    later = int(time.time()) + 60
    good = github_session_value(settings, sessions, "alice", ["acme/web"], later)
    _, signature = good.rsplit(".", 1)
    widened = URLSafeSerializer("").dumps(
        {"login": "alice", "exp": later, "repos": ["acme/web", "acme/payroll"]}
    )
    refused = {
        "widened": f"{widened.rsplit('.', 1)[0]}.{signature}",
        "other secret": github_session_value(
            github_settings("rotated-secret"), sessions, "alice", ["acme/web"], later
        ),
        "expired": github_session_value(
            settings, sessions, "alice", ["acme/web"], int(time.time()) - 1
        ),
        "no signature": good.rsplit(".", 1)[0],
        "garbage": "x.y",
        # Signed with the secret, but from before cookies carried a session id.
        "without a session id": URLSafeSerializer(
            "client-secret-0123456789", salt="loopwright-github-session"
        ).dumps({"login": "alice", "exp": later, "repos": ["acme/web"]}),
    }
    assert github_viewer(settings, sessions, store, good) is not None
    for name, value in refused.items():
        assert github_viewer(settings, sessions, store, value) is None, name


def test_a_long_repository_list_is_kept_on_the_server_under_the_session_id(
    store: Store, tmp_path: Path
) -> None:
    store_url = f"sqlite:///{tmp_path / 'loopwright.db'}"
    settings = github_settings()
    sessions = GitHubSessions(store)
    names = [f"acme/service-{n:03d}" for n in range(300)]
    value = github_session_value(settings, sessions, "carol", names, int(time.time()) + 60)
    payload = URLSafeSerializer("").loads_unsafe(value)[1]
    assert len(value) < 500 and "repos" not in payload
    assert sessions.get(payload["sid"]) == tuple(names)
    viewer = github_viewer(settings, sessions, store, value)
    assert viewer is not None and viewer.repos == frozenset(names)
    # Another process (or a restart) on the same database reads the list from the store.
    with Store(store_url) as other_process:
        elsewhere = github_viewer(settings, GitHubSessions(other_process), other_process, value)
        assert elsewhere is not None and elsewhere.repos == frozenset(names)
        GitHubSessions(other_process).drop(payload["sid"])
    assert sessions.get(payload["sid"]) is None
    assert github_viewer(settings, sessions, store, value) is None
