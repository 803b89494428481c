"""GitHub's web OAuth endpoints for an App's user sign-in: a real HTTP server on loopback.

`GET /login/oauth/authorize` plays a user who approves at once: it redirects back to
`redirect_uri` with a one-time `code` and the caller's `state`. `POST
/login/oauth/access_token` trades that code (with the client ID and secret) for a user token
that a `FakeGitHub` accepts for `/user` and `/user/repos`; like GitHub it takes the
parameters form-encoded or as JSON. These are web pages, not REST
operations, so they live here rather than in the OpenAPI-checked fake. Anything else, and any
request that breaks the flow's rules, is recorded in `rejected`.
"""

from __future__ import annotations

import json
import secrets
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

from tests.fakes.github import FakeGitHub

CODE_TTL_S = 600


@dataclass
class _Grant:
    login: str
    client_id: str
    redirect_uri: str
    expires_at: float


class FakeGitHubWeb:
    """github.com's `/login/oauth/*` for one App, issuing tokens that `api` accepts."""

    def __init__(self, api: FakeGitHub, client_id: str, client_secret: str) -> None:
        self.api = api
        self.client_id = client_id
        self.client_secret = client_secret
        self.approve_as: str | None = None
        """The user who signs in and approves; None answers `access_denied`."""
        self.rejected: list[str] = []
        self.issued: list[str] = []
        """User tokens handed out, in order."""
        self._grants: dict[str, _Grant] = {}
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> FakeGitHubWeb:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def assert_no_rejections(self) -> None:
        if self.rejected:
            raise AssertionError("the fake GitHub web rejected:\n" + "\n".join(self.rejected))

    def _reject(self, reason: str) -> None:
        with self._lock:
            self.rejected.append(reason)

    def authorize(self, query: dict[str, list[str]]) -> tuple[int, dict[str, str], Any]:
        def one(name: str) -> str:
            return (query.get(name) or [""])[0]

        client_id, redirect_uri, state = one("client_id"), one("redirect_uri"), one("state")
        if client_id != self.client_id:
            self._reject(f"authorize: unknown client_id {client_id!r}")
            return 404, {}, {"error": "Not Found"}
        if not redirect_uri.startswith(("http://", "https://")):
            self._reject(f"authorize: redirect_uri {redirect_uri!r}")
            return 400, {}, {"error": "redirect_uri_mismatch"}
        if self.approve_as is None:
            answer = {"error": "access_denied", "state": state}
        else:
            code = secrets.token_hex(10)
            with self._lock:
                self._grants[code] = _Grant(
                    self.approve_as, client_id, redirect_uri, time.time() + CODE_TTL_S
                )
            answer = {"code": code, "state": state}
        sep = "&" if "?" in redirect_uri else "?"
        return 302, {"Location": f"{redirect_uri}{sep}{urlencode(answer)}"}, None

    def access_token(self, form: dict[str, list[str]]) -> tuple[int, dict[str, str], Any]:
        def one(name: str) -> str:
            return (form.get(name) or [""])[0]

        if one("client_id") != self.client_id or one("client_secret") != self.client_secret:
            self._reject("access_token: wrong client_id or client_secret")
            return 200, {}, {"error": "incorrect_client_credentials"}
        with self._lock:
            grant = self._grants.pop(one("code"), None)
        if grant is None or grant.expires_at < time.time() or grant.client_id != one("client_id"):
            return 200, {}, {"error": "bad_verification_code"}
        if one("redirect_uri") and one("redirect_uri") != grant.redirect_uri:
            self._reject("access_token: redirect_uri differs from the authorize request")
            return 200, {}, {"error": "redirect_uri_mismatch"}
        token = self.api.issue_user_token(grant.login)
        self.issued.append(token)
        return 200, {}, {"access_token": token, "token_type": "bearer", "scope": ""}

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        web = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return

            def _answer(self, status: int, headers: dict[str, str], body: Any) -> None:
                payload = b"" if body is None else json.dumps(body).encode()
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Type", "application/json; charset=utf-8")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def do_GET(self) -> None:
                split = urlsplit(self.path)
                if split.path != "/login/oauth/authorize":
                    web._reject(f"GET {split.path}: not a GitHub OAuth page")
                    return self._answer(404, {}, {"error": "Not Found"})
                self._answer(*web.authorize(parse_qs(split.query)))

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length).decode() if length else ""
                path = urlsplit(self.path).path
                if path != "/login/oauth/access_token":
                    web._reject(f"POST {path}: not a GitHub OAuth endpoint")
                    return self._answer(404, {}, {"error": "Not Found"})
                if "application/json" not in (self.headers.get("Accept") or ""):
                    # GitHub would answer form-encoded; the server must ask for JSON.
                    web._reject("access_token: without Accept: application/json")
                    return self._answer(406, {}, {"error": "not_acceptable"})
                # GitHub takes the parameters form-encoded or as a JSON object.
                if "application/json" in (self.headers.get("Content-Type") or ""):
                    try:
                        fields = json.loads(raw)
                    except ValueError:
                        fields = None
                    if not isinstance(fields, dict):
                        web._reject("access_token: a JSON body that is not an object")
                        return self._answer(400, {}, {"error": "Problems parsing JSON"})
                    form = {str(k): [str(v)] for k, v in fields.items()}
                else:
                    form = parse_qs(raw)
                self._answer(*web.access_token(form))

        return Handler
