"""Signing in to the live view: the dashboard token's login form, GitHub's OAuth web flow
(start, callback, the user and repository lookup) and logout.

A session cookie holds only what was checked here and a random session id (signed, HttpOnly,
SameSite=Lax); logout revokes that id in the store (and forgets a repository list kept there),
so every server process on the store refuses it. The GitHub user token lives only for the
callback and is sent to the configured API alone: nothing of it is stored.
"""

from __future__ import annotations

import base64
import datetime
import hmac
import secrets
import time
from dataclasses import dataclass
from typing import Annotated, Any
from urllib.parse import urlencode

import anyio
import httpx
from githubkit import GitHub, OAuthAppAuthStrategy
from githubkit.exception import AuthExpiredError, GitHubException, RequestFailed
from litestar import MediaType, Request, Response, get, post
from litestar.datastructures import Cookie
from litestar.di import NamedDependency
from litestar.exceptions import NotAuthorizedException, NotFoundException
from litestar.params import FromQuery, QueryParameter, URLEncodedBody
from litestar.response import Redirect, Template
from litestar.status_codes import (
    HTTP_303_SEE_OTHER,
    HTTP_400_BAD_REQUEST,
    HTTP_401_UNAUTHORIZED,
    HTTP_502_BAD_GATEWAY,
)

from loopwright.app.api import (
    GITHUB_COOKIE,
    GITHUB_SESSION_MAX_AGE_S,
    SESSION_COOKIE,
    SESSION_MAX_AGE_S,
    GitHubSessions,
    dashboard_session,
    github_session,
    github_session_value,
    session_value,
)
from loopwright.app.views import SECURITY_HEADERS, page_context
from loopwright.config import Settings
from loopwright.store.repository import Store


def _safe_next(target: str | None) -> str:
    """Only paths on this server: no scheme, no host, no `//evil` or `/\\evil`."""
    if not target or not target.startswith("/") or target.startswith(("//", "/\\")):
        return "/"
    return target


@get("/login", sync_to_thread=False, response_headers=SECURITY_HEADERS, include_in_schema=False)
def login_form(
    settings: NamedDependency[Settings], next: FromQuery[str | None] = None
) -> Template | Redirect:
    if settings.dashboard_token is None and not settings.github.oauth_enabled:
        return Redirect(_safe_next(next))
    return Template(
        template_name="login.html", context={**page_context(settings), "next": _safe_next(next)}
    )


@dataclass
class LoginForm:
    token: str = ""
    next: str = "/"


@post("/login", sync_to_thread=False, response_headers=SECURITY_HEADERS, include_in_schema=False)
def login(
    request: Request[Any, Any, Any],
    settings: NamedDependency[Settings],
    data: URLEncodedBody[LoginForm],
) -> Response[Any]:
    """Trade the dashboard token for a session cookie (HttpOnly, SameSite=Lax, 7 days)."""
    token = settings.dashboard_token
    target = _safe_next(data.next)
    if token is None:
        return Redirect(target, status_code=HTTP_303_SEE_OTHER)
    if not hmac.compare_digest(data.token.encode(), token.encode()):
        return Template(
            template_name="login.html",
            context={**page_context(settings), "next": target, "error": "That token is not right."},
            status_code=HTTP_401_UNAUTHORIZED,
        )
    expires = int(time.time()) + SESSION_MAX_AGE_S
    secure = _secure(request, settings)
    return Redirect(
        target,
        status_code=HTTP_303_SEE_OTHER,
        cookies=[
            Cookie(
                key=SESSION_COOKIE,
                value=session_value(token, expires),
                max_age=SESSION_MAX_AGE_S,
                httponly=True,
                secure=secure,
                # Lax, not Strict: the links on check runs and pull requests are cross-site
                # navigations and must arrive logged in. Every route that changes anything
                # is a POST, which Lax keeps from other sites.
                samesite="lax",
                path="/",
            )
        ],
    )


@post("/logout", sync_to_thread=True, include_in_schema=False)
def logout(
    request: Request[Any, Any, Any],
    settings: NamedDependency[Settings],
    store: NamedDependency[Store],
) -> Redirect:
    """End the browser's sessions: their ids are recorded as revoked in the store, so a
    copy of either cookie is refused from now on by every server process, and the browser
    is told to forget them. Cookies that are not valid sessions are only cleared."""
    now = time.time()
    token = settings.dashboard_token
    dashboard = request.cookies.get(SESSION_COOKIE)
    if token is not None and dashboard:
        signed = dashboard_session(token, dashboard, now)
        if signed is not None:
            store.revoke_session(signed.id, _expiry(signed.expires))
    github = request.cookies.get(GITHUB_COOKIE)
    if settings.github.oauth_enabled and github:
        session = github_session(settings, github, now)
        if session is not None:
            store.revoke_session(session.id, _expiry(session.expires))
            sessions: GitHubSessions = request.app.state.github_sessions
            sessions.drop(session.id)
    response = Redirect("/login", status_code=HTTP_303_SEE_OTHER)
    response.delete_cookie(SESSION_COOKIE, path="/")
    response.delete_cookie(GITHUB_COOKIE, path="/")
    return response


def _expiry(epoch: int) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(epoch, datetime.UTC)


def _secure(request: Request[Any, Any, Any], settings: Settings) -> bool:
    public = settings.github.public_url or ""
    return request.url.scheme == "https" or public.startswith("https://")


# -- GitHub sign-in (the App's OAuth web flow) ---------------------------------------------

OAUTH_STATE_COOKIE = "loopwright_oauth_state"
OAUTH_STATE_MAX_AGE_S = 600
MAX_REPO_PAGES = 20
"""`/user/repos` pages of 100 read at sign-in; a user with more sees the first 2000."""
GITHUB_TIMEOUT_S = 10.0


class SignInFailed(Exception):
    """GitHub refused the sign-in or could not be reached; the message is shown to the user."""


def _callback_url(request: Request[Any, Any, Any], settings: Settings) -> str:
    base = settings.github.public_url or str(request.base_url).rstrip("/")
    return f"{base}/auth/github/callback"


@get("/auth/github", sync_to_thread=False, include_in_schema=False)
def github_sign_in(
    request: Request[Any, Any, Any],
    settings: NamedDependency[Settings],
    next: FromQuery[str | None] = None,
) -> Redirect:
    """Send the browser to GitHub's authorize page. `state` is random and also kept in a
    short-lived HttpOnly cookie: the callback only accepts the state this browser was given,
    so another site cannot log a victim into its own account (login CSRF)."""
    gh = settings.github
    if not gh.oauth_enabled:
        raise NotFoundException(
            "GitHub sign-in is off; set LOOPWRIGHT_GITHUB_CLIENT_ID and "
            "LOOPWRIGHT_GITHUB_CLIENT_SECRET"
        )
    state = secrets.token_urlsafe(32)
    target = base64.urlsafe_b64encode(_safe_next(next).encode()).decode().rstrip("=")
    query = urlencode(
        {
            "client_id": gh.client_id,
            "redirect_uri": _callback_url(request, settings),
            "state": state,
        }
    )
    return Redirect(
        f"{gh.web_url}/login/oauth/authorize?{query}",
        cookies=[
            Cookie(
                key=OAUTH_STATE_COOKIE,
                value=f"{state}.{target}",
                max_age=OAUTH_STATE_MAX_AGE_S,
                httponly=True,
                secure=_secure(request, settings),
                # GitHub's redirect back is a cross-site top-level GET: Lax still sends it.
                samesite="lax",
                path="/auth/github",
            )
        ],
    )


@get("/auth/github/callback", include_in_schema=False)
async def github_callback(
    request: Request[Any, Any, Any],
    settings: NamedDependency[Settings],
    code: FromQuery[str] = "",
    oauth_state: Annotated[str, QueryParameter(name="state")] = "",
) -> Response[Any]:
    """Check `state`, trade the code for a user token, read who the user is and which
    repositories they can read, and sign them in with a session cookie holding only that
    (signed, HttpOnly, 8 hours; a list too long for it is kept in the store). The user
    token is dropped here, never stored."""
    if not settings.github.oauth_enabled:
        raise NotFoundException("GitHub sign-in is off")
    expected, _, target_b64 = request.cookies.get(OAUTH_STATE_COOKIE, "").partition(".")
    given = oauth_state.encode()
    if not (given and expected and hmac.compare_digest(given, expected.encode())):
        return _sign_in_error(
            settings,
            "This sign-in was not started from this browser, or it took longer than 10 "
            "minutes. Sign in again.",
            HTTP_400_BAD_REQUEST,
        )
    try:
        target = _safe_next(
            base64.urlsafe_b64decode(target_b64 + "=" * (-len(target_b64) % 4)).decode()
        )
    except ValueError:
        target = "/"
    if not code:
        return _sign_in_error(
            settings, "GitHub did not approve the sign-in.", HTTP_401_UNAUTHORIZED
        )
    try:
        login, repos = await github_identity(settings, code, _callback_url(request, settings))
    except SignInFailed as exc:
        return _sign_in_error(settings, str(exc), HTTP_502_BAD_GATEWAY)
    sessions: GitHubSessions = request.app.state.github_sessions
    expires = int(time.time()) + GITHUB_SESSION_MAX_AGE_S
    value = await anyio.to_thread.run_sync(
        github_session_value, settings, sessions, login, repos, expires
    )
    response = Redirect(
        target,
        status_code=HTTP_303_SEE_OTHER,
        cookies=[
            Cookie(
                key=GITHUB_COOKIE,
                value=value,
                max_age=GITHUB_SESSION_MAX_AGE_S,
                httponly=True,
                secure=_secure(request, settings),
                samesite="lax",
                path="/",
            )
        ],
    )
    response.delete_cookie(OAUTH_STATE_COOKIE, path="/auth/github")
    return response


def _sign_in_error(settings: Settings, message: str, status: int) -> Response[Any]:
    response = Template(
        template_name="login.html",
        context={**page_context(settings), "next": "/", "error": message},
        status_code=status,
        headers={h.name: h.value or "" for h in SECURITY_HEADERS},
    )
    response.delete_cookie(OAUTH_STATE_COOKIE, path="/auth/github")
    return response


async def github_identity(
    settings: Settings, code: str, redirect_uri: str
) -> tuple[str, list[str]]:
    """The user's login and the `owner/name` of every repository they can read (as far as
    GitHub shows them to the App), using a user token that lives only in this call."""
    gh = settings.github
    api = gh.api_url.rstrip("/")
    try:
        # githubkit's web flow: the App (client ID and secret) trades the code for a user
        # token at `login/oauth/access_token` on its base URL's host, which is github.com for
        # api.github.com, so the web host is its base URL here. The exchange opens and
        # closes the client itself.
        app = GitHub(
            OAuthAppAuthStrategy(gh.client_id or "", gh.client_secret or ""),
            base_url=gh.web_url,
            timeout=GITHUB_TIMEOUT_S,
        )
        user_token = await app.auth.as_web_user(code, redirect_uri).async_exchange_token(app)
    except (AuthExpiredError, RequestFailed) as exc:
        # GitHub answers a refused code with 200 and an `error` field, which githubkit
        # raises with the answer attached; other refusals are HTTP errors.
        detail = exc.args[1] if len(exc.args) > 1 and isinstance(exc.args[1], dict) else {}
        reason = detail.get("error") or (
            exc.response.status_code if isinstance(exc, RequestFailed) else None
        )
        raise SignInFailed(
            f"GitHub did not accept the sign-in ({reason or 'no token'}); "
            "if it repeats, check LOOPWRIGHT_GITHUB_CLIENT_ID and "
            "LOOPWRIGHT_GITHUB_CLIENT_SECRET against the App's settings page."
        ) from None
    except (GitHubException, ValueError) as exc:
        raise SignInFailed(
            f"GitHub could not be asked who you are ({type(exc).__name__}); try again."
        ) from None

    repos: list[str] = []
    try:
        async with GitHub(user_token, base_url=api, timeout=GITHUB_TIMEOUT_S) as user:
            login = (await user.rest.users.async_get_authenticated()).parsed_data.login
            # Page by number on the configured API rather than by following `Link` URLs:
            # githubkit's paginator parses the next link before handing over the page, so a
            # link that is not a URL at all would lose a page that was read fine, and the
            # token must never go to a host the link names. The link only says whether
            # there is more, and one that leaves the API ends the listing here.
            for page in range(1, MAX_REPO_PAGES + 1):
                answer = await user.rest.repos.async_list_for_authenticated_user(
                    per_page=100, page=page
                )
                repos.extend(repo.full_name for repo in answer.parsed_data)
                following = answer.raw_response.links.get("next", {}).get("url")
                if not following or not following.startswith(f"{api}/"):
                    break
    except (GitHubException, httpx.InvalidURL, ValueError, KeyError, TypeError) as exc:
        raise SignInFailed(
            f"GitHub could not be asked who you are ({type(exc).__name__}); try again."
        ) from None
    return login, repos


def unauthorized(request: Request[Any, Any, Any], exc: NotAuthorizedException) -> Response[Any]:
    """401 everywhere; a browser asking for a page gets the login form with it."""
    wants_page = "text/html" in request.headers.get("accept", "") and not (
        request.url.path.startswith("/api/") or request.url.path.endswith(("/events", "/stream"))
    )
    if wants_page and request.method == "GET":
        settings: Settings = request.app.state.settings
        target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        return Template(
            template_name="login.html",
            context={**page_context(settings), "next": _safe_next(target)},
            status_code=HTTP_401_UNAUTHORIZED,
            headers={h.name: h.value or "" for h in SECURITY_HEADERS},
        )
    return Response(
        {"status_code": HTTP_401_UNAUTHORIZED, "detail": exc.detail},
        status_code=HTTP_401_UNAUTHORIZED,
        media_type=MediaType.JSON,
        headers={"WWW-Authenticate": 'Bearer realm="loopwright"'},
    )
