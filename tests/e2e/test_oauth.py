"""GitHub sign-in to the live view, over real HTTP: the server under uvicorn, GitHub's OAuth
pages (`FakeGitHubWeb`) and its REST API (`FakeGitHub`, checked against the OpenAPI
description) on loopback. A GitHub user sees the missions of repositories they can read and
nothing else; the dashboard token still sees everything."""

from __future__ import annotations

import base64
import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx
import pytest
from itsdangerous import URLSafeSerializer

from loopwright.app import signin
from loopwright.app.api import (
    GITHUB_COOKIE,
    SESSION_COOKIE,
    GitHubSessions,
    github_session_value,
)
from loopwright.app.server import create_app, serve_in_thread
from loopwright.config import Settings
from loopwright.store.repository import Store
from tests.e2e.conftest import FAST
from tests.e2e.scripted_mission import create_mission
from tests.fakes.github import FakeGitHub
from tests.fakes.github_web import FakeGitHubWeb

TOKEN = "dashboard-token-0123456789"
CLIENT_ID = "Iv1.0123456789abcdef"
CLIENT_SECRET = "0123456789abcdef0123456789abcdef01234567"
READABLE = "acme/Shop-Web"
"""Mixed case: the store matches names exactly, as GitHub spells them."""
HIDDEN = "acme/payroll"


@dataclass
class OAuthServer:
    url: str
    store: Store
    settings: Settings
    github: FakeGitHub
    web: FakeGitHubWeb
    readable: str
    hidden: str

    def sign_in(self, login: str = "alice", next: str = "/") -> httpx.Client:
        """A browser that goes through GitHub's sign-in and approves."""
        self.web.approve_as = login
        client = httpx.Client(base_url=self.url, timeout=10)
        start = client.get("/auth/github", params={"next": next})
        assert start.status_code == 302
        authorize = start.headers["location"]
        assert authorize.startswith(f"{self.web.url}/login/oauth/authorize?")
        back = httpx.get(authorize, timeout=10)
        assert back.status_code == 302
        done = client.get(back.headers["location"])
        assert done.status_code == 303, done.text
        assert done.headers["location"] == next
        return client

    def token_sign_in(self) -> httpx.Client:
        """A browser that signs in at `/login` with the dashboard token."""
        client = httpx.Client(base_url=self.url, timeout=10)
        done = client.post("/login", data={"token": TOKEN, "next": "/"})
        assert done.status_code == 303, done.text
        assert SESSION_COOKIE in client.cookies
        return client

    def revoked(self) -> int:
        with self.store.engine.connect() as connection:
            return int(connection.exec_driver_sql("SELECT count(*) FROM revoked_sessions").scalar())


@pytest.fixture
def oauth_server(tmp_path: Path) -> Iterator[OAuthServer]:
    with FakeGitHub(4242) as github, FakeGitHubWeb(github, CLIENT_ID, CLIENT_SECRET) as web:
        github.add_installation(17, "acme")
        github.add_repo(READABLE)
        github.add_repo(HIDDEN)
        github.set_permission(READABLE, "alice", "read")
        github.set_permission(HIDDEN, "bob", "write")
        settings = Settings.from_env(
            {
                "LOOPWRIGHT_DATA_DIR": str(tmp_path / "data"),
                "LOOPWRIGHT_DASHBOARD_TOKEN": TOKEN,
                "LOOPWRIGHT_GITHUB_API_URL": github.url,
                "LOOPWRIGHT_GITHUB_WEB_URL": web.url,
                "LOOPWRIGHT_GITHUB_CLIENT_ID": CLIENT_ID,
                "LOOPWRIGHT_GITHUB_CLIENT_SECRET": CLIENT_SECRET,
            }
        )
        app = create_app(settings, mode="local", timing=FAST)
        with serve_in_thread(app) as url:
            store = app.state.store
            yield OAuthServer(
                url,
                store,
                settings,
                github,
                web,
                readable=create_mission(store, repo=READABLE, sha="a1a1a1a1"),
                hidden=create_mission(store, repo=HIDDEN, sha="b2b2b2b2"),
            )
        github.assert_no_rejections()
        web.assert_no_rejections()


def first_list(client: httpx.Client) -> list[dict[str, Any]]:
    with client.stream("GET", "/missions/stream") as answer:
        assert answer.status_code == 200
        for line in answer.iter_lines():
            if line.startswith("data: ["):
                rows: list[dict[str, Any]] = json.loads(line[6:])
                return rows
    raise AssertionError("the missions stream sent no list")


def cookie_payload(value: str) -> dict[str, Any]:
    """What the cookie carries, read without checking its signature (as anyone could)."""
    _, payload = URLSafeSerializer("").loads_unsafe(value)
    assert isinstance(payload, dict)
    return payload


def test_a_github_user_sees_only_missions_of_repositories_they_can_read(oauth_server):
    server = oauth_server
    client = server.sign_in("alice", next=f"/missions/{server.readable}")

    assert [m["id"] for m in client.get("/api/missions").json()] == [server.readable]
    assert client.get("/api/missions", params={"repo": HIDDEN}).json() == []
    page = client.get("/")
    assert page.status_code == 200
    assert server.readable in page.text and server.hidden not in page.text
    assert HIDDEN not in page.text
    assert [r["id"] for r in first_list(client)] == [server.readable]

    assert client.get(f"/missions/{server.readable}").status_code == 200
    with client.stream("GET", f"/missions/{server.readable}/events") as answer:
        assert answer.status_code == 200
    for path in (
        f"/missions/{server.hidden}",
        f"/missions/{server.hidden}/events",
        f"/missions/{server.hidden}/screenshot.png",
        f"/api/missions/{server.hidden}",
        f"/api/missions/{server.hidden}/events",
    ):
        assert client.get(path).status_code == 404, path
    # Cost totals span every repository: the dashboard token only.
    assert client.get("/costs").status_code == 403
    assert client.get("/api/costs").status_code == 403

    cookie = client.cookies[GITHUB_COOKIE]
    payload = cookie_payload(cookie)
    assert payload["login"] == "alice"
    assert payload["repos"] == [READABLE]
    assert 0 < payload["exp"] - time.time() <= 8 * 3600
    assert server.web.issued and all(token not in cookie for token in server.web.issued)
    [repos_call] = server.github.requests_for("repos/list-for-authenticated-user")
    assert repos_call.query["per_page"] == ["100"]
    # The user's token (GitHub takes either scheme), not the App's or an installation's.
    scheme, _, credential = repos_call.headers["authorization"].partition(" ")
    assert scheme.lower() in ("token", "bearer") and credential.startswith("ghu_")


def test_a_wrong_or_missing_state_is_rejected_before_the_code_is_used(oauth_server):
    server = oauth_server
    server.web.approve_as = "alice"
    client = httpx.Client(base_url=server.url, timeout=10)
    start = client.get("/auth/github")
    back = httpx.get(start.headers["location"], timeout=10)
    callback = urlsplit(back.headers["location"])
    query = {k: v[0] for k, v in parse_qs(callback.query).items()}

    forged = client.get(f"{callback.path}?{urlencode({**query, 'state': 'attacker-state'})}")
    assert forged.status_code == 400
    assert "not started from this browser" in forged.text
    # A browser that never started a sign-in (the login CSRF case) is refused too.
    fresh = httpx.get(f"{server.url}{callback.path}?{callback.query}", timeout=10)
    assert fresh.status_code == 400
    assert GITHUB_COOKIE not in client.cookies and GITHUB_COOKIE not in fresh.cookies
    assert server.web.issued == []
    assert client.get("/api/missions").status_code == 401


def test_a_user_who_declines_is_not_signed_in(oauth_server):
    server = oauth_server
    server.web.approve_as = None
    client = httpx.Client(base_url=server.url, timeout=10)
    back = httpx.get(client.get("/auth/github").headers["location"], timeout=10)
    answer = client.get(back.headers["location"])
    assert answer.status_code == 401
    assert GITHUB_COOKIE not in client.cookies


def test_forged_edited_or_expired_cookies_are_refused(oauth_server):
    server = oauth_server
    cookie = server.sign_in("alice").cookies[GITHUB_COOKIE]
    body, _, mac = cookie.rpartition(".")
    payload = cookie_payload(cookie)
    widened = {**payload, "repos": [READABLE, HIDDEN]}
    edited_body = base64.urlsafe_b64encode(json.dumps(widened).encode()).decode().rstrip("=")
    other_key = Settings(
        github=Settings().github.__class__(client_id="x", client_secret="not-the-secret")
    )
    expired = github_session_value(
        server.settings,
        GitHubSessions(server.store),
        "alice",
        [READABLE, HIDDEN],
        int(time.time()) - 1,
    )
    refused = {
        "edited": f"{edited_body}.{mac}",
        "other key": github_session_value(
            other_key,
            GitHubSessions(server.store),
            "alice",
            [READABLE, HIDDEN],
            int(time.time()) + 60,
        ),
        "expired": expired,
        "no mac": body,
        "garbage": "x.y",
    }
    for name, value in refused.items():
        client = httpx.Client(base_url=server.url, timeout=10, cookies={GITHUB_COOKIE: value})
        assert client.get("/api/missions").status_code == 401, name
        assert client.get(f"/missions/{server.hidden}").status_code == 401, name


def test_the_dashboard_token_still_sees_everything(oauth_server):
    server = oauth_server
    bearer = {"Authorization": f"Bearer {TOKEN}"}
    ids = {m["id"] for m in httpx.get(f"{server.url}/api/missions", headers=bearer).json()}
    assert ids == {server.readable, server.hidden}
    assert httpx.get(f"{server.url}/missions/{server.hidden}", headers=bearer).status_code == 200
    assert httpx.get(f"{server.url}/api/costs", headers=bearer).status_code == 200
    assert httpx.get(f"{server.url}/api/missions").status_code == 401
    login = httpx.get(f"{server.url}/login")
    assert "Sign in with GitHub" in login.text and 'name="token"' in login.text


def test_logout_ends_the_github_session(oauth_server):
    client = oauth_server.sign_in("alice")
    assert client.get("/api/missions").status_code == 200
    assert client.post("/logout").status_code == 303
    assert GITHUB_COOKIE not in client.cookies
    assert client.get("/api/missions").status_code == 401


def test_a_long_repository_list_stays_on_the_server(oauth_server):
    server = oauth_server
    names = [f"acme/service-{n:03d}" for n in range(230)]
    for name in names:
        server.github.add_repo(name)
        server.github.set_permission(name, "carol", "triage")
    deep = create_mission(server.store, repo=names[-1], sha="c3c3c3c3")
    client = server.sign_in("carol")
    cookie = client.cookies[GITHUB_COOKIE]
    assert len(cookie) < 1000 and "repos" not in cookie_payload(cookie)
    assert [m["id"] for m in client.get("/api/missions").json()] == [deep]
    # 230 repositories at 100 a page: three pages, following the Link header.
    assert len(server.github.requests_for("repos/list-for-authenticated-user")) == 3


def test_sign_in_reads_at_most_max_repo_pages(oauth_server, monkeypatch):
    server = oauth_server
    monkeypatch.setattr(signin, "MAX_REPO_PAGES", 2)
    names = [f"acme/service-{n:03d}" for n in range(230)]
    for name in names:
        server.github.add_repo(name)
        server.github.set_permission(name, "carol", "triage")
    # GitHub lists by name here: the first 200 are read, the last 30 are not.
    early = create_mission(server.store, repo=names[0], sha="d4d4d4d4")
    late = create_mission(server.store, repo=names[-1], sha="e5e5e5e5")
    client = server.sign_in("carol")
    assert len(server.github.requests_for("repos/list-for-authenticated-user")) == 2
    assert [m["id"] for m in client.get("/api/missions").json()] == [early]
    assert client.get(f"/missions/{late}").status_code in (403, 404)


class Bystander:
    """An HTTP server on another port, standing in for a host that is not the API: it
    answers every GET with an empty list and records the path and Authorization header."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str | None]] = []
        bystander = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                bystander.seen.append((self.path, self.headers.get("Authorization")))
                body = b"[]"
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def netloc(self) -> str:
        return f"127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> Bystander:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


OFF_API_LINKS: dict[str, Callable[[FakeGitHub, Bystander], str]] = {
    "another-host": lambda github, other: f"http://{other.netloc}",
    # Starts with the API's URL, but the authority goes on: `127.0.0.1:PORT` is userinfo
    # and the request would go to the other host.
    "look-alike-prefix": lambda github, other: f"{github.url}@{other.netloc}",
    "same-server-under-another-name": lambda github, other: github.url.replace(
        "127.0.0.1", "localhost"
    ),
    # Starts with the API's URL, but the port runs on into `PORT.evil`: not a URL httpx
    # can send at all.
    "look-alike-port": lambda github, other: f"{github.url}.evil",
}


@pytest.mark.parametrize("link", OFF_API_LINKS.values(), ids=OFF_API_LINKS.keys())
def test_sign_in_does_not_follow_a_next_link_off_the_api(oauth_server, link):
    """The user token goes to LOOPWRIGHT_GITHUB_API_URL only: a `Link: rel=next` elsewhere,
    however close it looks, ends the listing and the first page's repositories are kept."""
    server = oauth_server
    names = [f"acme/service-{n:03d}" for n in range(150)]
    for name in names:
        server.github.add_repo(name)
        server.github.set_permission(name, "carol", "triage")
    first_page = create_mission(server.store, repo=names[0], sha="f6f6f6f6")
    second_page = create_mission(server.store, repo=names[-1], sha="a7a7a7a7")
    with Bystander() as other:
        server.github.link_base = link(server.github, other)
        client = server.sign_in("carol")
        assert other.seen == []
    listed = server.github.requests_for("repos/list-for-authenticated-user")
    assert len(listed) == 1
    assert listed[0].headers.get("host", "").startswith("127.0.0.1:")
    assert [m["id"] for m in client.get("/api/missions").json()] == [first_page]
    assert client.get(f"/missions/{second_page}").status_code in (403, 404)


def test_without_a_client_id_github_sign_in_is_off(live_server):
    server = live_server(token=TOKEN)
    assert httpx.get(f"{server.url}/auth/github").status_code == 404
    assert "Sign in with GitHub" not in httpx.get(f"{server.url}/login").text


def test_a_github_session_cookie_copied_before_logout_is_refused_after_it(oauth_server):
    """Signing out must end the session, not only ask this browser to forget it: a copy
    of the cookie (a shared machine, a proxy log, malware) replayed after logout is still a
    signed, unexpired session that sees the user's repositories for up to 8 hours."""
    client = oauth_server.sign_in("alice")
    copied = client.cookies[GITHUB_COOKIE]
    assert client.post("/logout").status_code == 303
    replay = httpx.Client(base_url=oauth_server.url, timeout=10)
    replay.cookies.set(GITHUB_COOKIE, copied)
    assert replay.get("/api/missions").status_code == 401


def replay(url: str, name: str, value: str) -> httpx.Client:
    """Another browser (or an attacker) holding a copy of a session cookie."""
    client = httpx.Client(base_url=url, timeout=10)
    client.cookies.set(name, value)
    return client


def test_a_dashboard_session_cookie_copied_before_logout_is_refused_after_it(oauth_server):
    client = oauth_server.token_sign_in()
    copied = client.cookies[SESSION_COOKIE]
    assert replay(oauth_server.url, SESSION_COOKIE, copied).get("/api/costs").status_code == 200
    assert client.post("/logout").status_code == 303
    assert SESSION_COOKIE not in client.cookies
    stale = replay(oauth_server.url, SESSION_COOKIE, copied)
    assert stale.get("/api/missions").status_code == 401
    assert stale.get("/api/costs").status_code == 401
    # The bearer token itself is not a session: it still works.
    bearer = {"Authorization": f"Bearer {TOKEN}"}
    assert httpx.get(f"{oauth_server.url}/api/costs", headers=bearer).status_code == 200


def test_signing_out_leaves_the_same_users_other_sessions_signed_in(oauth_server):
    server = oauth_server
    laptop, phone = server.sign_in("alice"), server.sign_in("alice")
    assert laptop.cookies[GITHUB_COOKIE] != phone.cookies[GITHUB_COOKIE]
    desk, kiosk = server.token_sign_in(), server.token_sign_in()
    assert laptop.post("/logout").status_code == 303
    assert kiosk.post("/logout").status_code == 303
    assert server.revoked() == 2
    assert [m["id"] for m in phone.get("/api/missions").json()] == [server.readable]
    assert desk.get("/api/costs").status_code == 200
    assert laptop.get("/api/missions").status_code == 401
    assert kiosk.get("/api/missions").status_code == 401


def test_a_signed_out_session_stays_refused_by_a_restarted_server(oauth_server):
    """The revocation is in the database, not in the process that handled the logout: a
    new server over the same store (a restart, or a second server) refuses the copies too,
    and still accepts a session that was not signed out."""
    server = oauth_server
    github = server.sign_in("alice")
    dashboard = server.token_sign_in()
    copied = {GITHUB_COOKIE: github.cookies[GITHUB_COOKIE]}
    copied[SESSION_COOKIE] = dashboard.cookies[SESSION_COOKIE]
    kept = server.sign_in("alice").cookies[GITHUB_COOKIE]
    assert github.post("/logout").status_code == 303
    assert dashboard.post("/logout").status_code == 303

    restarted = create_app(server.settings, mode="local", timing=FAST)
    with serve_in_thread(restarted) as url:
        for name, value in copied.items():
            assert replay(url, name, value).get("/api/missions").status_code == 401, name
        assert replay(url, GITHUB_COOKIE, kept).get("/api/missions").status_code == 200


def test_logout_without_a_valid_session_only_clears_the_cookies(oauth_server):
    server = oauth_server
    expired = github_session_value(
        server.settings, GitHubSessions(server.store), "alice", [READABLE], int(time.time()) - 1
    )
    for cookies in (
        {},
        {GITHUB_COOKIE: "x.y", SESSION_COOKIE: "garbage"},
        {GITHUB_COOKIE: expired},
    ):
        client = httpx.Client(base_url=server.url, timeout=10, cookies=cookies)
        answer = client.post("/logout")
        assert answer.status_code == 303 and answer.headers["location"] == "/login"
        cleared = answer.headers.get_list("set-cookie")
        assert any(c.startswith(f"{GITHUB_COOKIE}=") for c in cleared), cookies
        assert any(c.startswith(f"{SESSION_COOKIE}=") for c in cleared), cookies
    assert server.revoked() == 0


@pytest.mark.parametrize("path", ["/missions/stream", "/missions/{mission}/events"])
def test_an_open_stream_ends_once_its_session_is_signed_out(oauth_server, path):
    """Another tab holds a stream open on the same session; signing out ends it within the
    stream's auth check, and the copy of the cookie cannot open a new one."""
    client = oauth_server.token_sign_in()
    copied = client.cookies[SESSION_COOKIE]
    url = path.format(mission=oauth_server.readable)
    tab = replay(oauth_server.url, SESSION_COOKIE, copied)
    with tab.stream("GET", url, timeout=httpx.Timeout(10, read=30)) as stream:
        assert stream.status_code == 200
        lines = stream.iter_lines()
        assert next(lines) == ": loopwright"
        time.sleep(1.0)  # the stream runs past a first auth check while signed in
        assert client.post("/logout").status_code == 303
        signed_out = time.monotonic()
        for _ in lines:
            assert time.monotonic() - signed_out < 10, "the stream outlived the sign-out"
        ended_after = time.monotonic() - signed_out
    assert ended_after < 5
    assert replay(oauth_server.url, SESSION_COOKIE, copied).get(url).status_code == 401
