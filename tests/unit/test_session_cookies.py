"""Signed session cookies: the dashboard token's and a GitHub sign-in's. A cookie is
accepted only unedited, unexpired and signed with the current secret."""

from __future__ import annotations

import time

from itsdangerous import URLSafeSerializer

from loopwright.app.api import (
    GitHubSessions,
    github_session_value,
    github_viewer,
    session_value,
    valid_session,
)
from loopwright.config import GitHubAppSettings, Settings

TOKEN = "dashboard-token-0123456789"


def github_settings(secret: str = "client-secret-0123456789") -> Settings:
    return Settings(github=GitHubAppSettings(client_id="Iv1.x", client_secret=secret))


def test_a_dashboard_session_is_accepted_until_it_expires() -> None:
    now = time.time()
    value = session_value(TOKEN, int(now) + 60)
    assert TOKEN not in value
    assert valid_session(TOKEN, value, now=now)
    assert not valid_session(TOKEN, value, now=now + 61)


def test_a_dashboard_session_that_was_edited_or_signed_otherwise_is_refused() -> None:
    now = time.time()
    good = session_value(TOKEN, int(now) + 60)
    payload, _, signature = good.rpartition(".")
    expired = session_value(TOKEN, int(now) - 1)
    # The expiry of an expired cookie moved forward, keeping its signature.
    extended = URLSafeSerializer("").dumps({"exp": int(now) + 3600}).rpartition(".")[0]
    refused = {
        "other token": session_value("another-token", int(now) + 60),
        "expired": expired,
        "extended": f"{extended}.{expired.rpartition('.')[2]}",
        "signature flipped": f"{payload}.{signature[::-1]}",
        "no signature": payload,
        "garbage": "1.x",
        "empty": "",
    }
    for name, value in refused.items():
        assert not valid_session(TOKEN, value, now=now), name


def test_a_github_session_carries_the_login_and_repositories() -> None:
    settings = github_settings()
    value = github_session_value(
        settings, GitHubSessions(), "alice", ["acme/Web", "acme/api"], int(time.time()) + 60
    )
    viewer = github_viewer(settings, GitHubSessions(), value)
    assert viewer is not None
    assert viewer.login == "alice"
    assert viewer.repos == frozenset({"acme/web", "acme/api"})
    assert viewer.names == ("acme/api", "acme/Web")


def test_a_github_session_edited_expired_or_signed_otherwise_is_refused() -> None:
    settings = github_settings()
    sessions = GitHubSessions()
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
    }
    for name, value in refused.items():
        assert github_viewer(settings, sessions, value) is None, name


def test_a_long_repository_list_is_kept_on_the_server() -> None:
    settings = github_settings()
    sessions = GitHubSessions()
    names = [f"acme/service-{n:03d}" for n in range(300)]
    value = github_session_value(settings, sessions, "carol", names, int(time.time()) + 60)
    assert len(value) < 500 and "repos" not in URLSafeSerializer("").loads_unsafe(value)[1]
    viewer = github_viewer(settings, sessions, value)
    assert viewer is not None and viewer.repos == frozenset(names)
    # Another process (or a restart) does not hold the list: signed in again.
    assert github_viewer(settings, GitHubSessions(), value) is None
