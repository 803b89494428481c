"""The live view's pages: missions list, one mission, costs, and the login form.

Pages are server-rendered Jinja (autoescaped); the mission page and the list keep
themselves current with a little plain JavaScript reading the SSE streams. Everything that
comes from events is untrusted text: templates escape it and the scripts only ever set
`textContent`. The Content-Security-Policy allows scripts and styles from this server only.
"""

from __future__ import annotations

import base64
import hmac
import secrets
import time
from dataclasses import dataclass
from typing import Annotated, Any
from urllib.parse import urlencode, urlsplit

from githubkit import GitHub, OAuthAppAuthStrategy
from githubkit import Response as GitHubResponse
from githubkit.exception import AuthExpiredError, GitHubException, RequestFailed
from githubkit_schemas.latest.models import Repository
from litestar import MediaType, Request, Response, get, post
from litestar.datastructures import Cookie, ResponseHeader
from litestar.di import NamedDependency
from litestar.exceptions import NotAuthorizedException, NotFoundException
from litestar.params import FromPath, FromQuery, QueryParameter, URLEncodedBody
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
    Viewer,
    github_session_value,
    require_full_access,
    require_token,
    session_value,
    visible_mission,
    visible_missions,
)
from loopwright.app.cancel import csrf_token
from loopwright.app.params import valid_repo
from loopwright.app.stream import mission_summary
from loopwright.config import Settings
from loopwright.events import STAGES
from loopwright.store.models import ACTIVE_STATUSES, MISSION_STATUSES
from loopwright.store.repository import Store

SECURITY_HEADERS = [
    ResponseHeader(
        name="Content-Security-Policy",
        value="default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
        "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
    ),
    ResponseHeader(name="X-Content-Type-Options", value="nosniff"),
    ResponseHeader(name="Referrer-Policy", value="same-origin"),
]
TIER_COLORS = ("#2f9e77", "#d9a21b", "#c2456b", "#6b5fd3", "#3d8bd9")


def _common(settings: Settings, viewer: Viewer | None = None) -> dict[str, Any]:
    return {
        "login_required": settings.dashboard_token is not None or settings.github.oauth_enabled,
        "token_login": settings.dashboard_token is not None,
        "github_login": settings.github.oauth_enabled,
        "sees_costs": viewer is None or viewer.sees_everything,
        "viewer_login": viewer.login if viewer is not None else None,
    }


@get("/", guards=[require_token], sync_to_thread=True, response_headers=SECURITY_HEADERS,
     include_in_schema=False)  # fmt: skip
def missions_page(
    store: NamedDependency[Store],
    settings: NamedDependency[Settings],
    viewer: NamedDependency[Viewer],
    status: FromQuery[str | None] = None,
    repo: FromQuery[str | None] = None,
) -> Template:
    """Every mission the viewer may see, newest first, filterable by status and repository;
    live."""
    status = status if status in MISSION_STATUSES else None
    repo = repo if repo and valid_repo(repo) else None
    now = time.time()
    missions = [mission_summary(m, now) for m in visible_missions(store, viewer, status, repo, 100)]
    repos = sorted(r["repo"] for r in store.costs_by_repo() if viewer.can_see(r["repo"]))
    return Template(
        template_name="missions.html",
        context={
            **_common(settings, viewer),
            "missions": missions,
            "statuses": sorted(MISSION_STATUSES),
            "repos": repos,
            "status": status or "",
            "repo": repo or "",
        },
    )


@get("/missions/{mission_id:str}", guards=[require_token], sync_to_thread=True,
     response_headers=SECURITY_HEADERS, include_in_schema=False)  # fmt: skip
def mission_page(
    request: Request[Any, Any, Any],
    store: NamedDependency[Store],
    settings: NamedDependency[Settings],
    viewer: NamedDependency[Viewer],
    mission_id: FromPath[str],
) -> Template:
    """One mission: pipeline, plan, timeline, verification, screenshot and outcome, filled
    in from the event stream (which replays the log first, so finished missions work)."""
    mission = visible_mission(store, viewer, mission_id)
    summary = mission_summary(mission)
    # Missions the App runs can be cancelled from here; the token binds the POST to this page.
    cancellable = request.app.state.mode == "app"
    return Template(
        template_name="mission.html",
        context={
            **_common(settings, viewer),
            "mission": summary,
            "head_sha": mission.head_sha,
            "check_url": _check_run_url(settings, mission.repo, mission.check_run_id),
            "repo_url": _repo_url(settings, mission.repo, mission.trigger),
            "stages": STAGES,
            "tiers": settings.tier_names,
            "csrf": csrf_token(settings, request) if cancellable else "",
            "active": mission.status in ACTIVE_STATUSES,
        },
    )


@get("/costs", guards=[require_full_access], sync_to_thread=True,
     response_headers=SECURITY_HEADERS, include_in_schema=False)  # fmt: skip
def costs_page(store: NamedDependency[Store], settings: NamedDependency[Settings]) -> Template:
    """Spend and tokens per tier, repository and day, and where missions finished.

    Totals span every repository, so a GitHub session (which sees only some) gets a 403;
    the dashboard token is needed.
    """
    order = {name: n for n, name in enumerate(settings.tier_names)}
    tiers = sorted(store.costs_by_tier(), key=lambda t: (order.get(t["tier"], 99), t["tier"]))
    for n, tier in enumerate(tiers):
        tier["color"] = TIER_COLORS[n % len(TIER_COLORS)]
        tier["tokens"] = tier["prompt_tokens"] + tier["completion_tokens"]
    repos = store.costs_by_repo()
    days = store.costs_by_day()[-30:]
    for row in [*repos, *days]:
        row["tokens"] = row["prompt_tokens"] + row["completion_tokens"]
    total_cost = sum(t["cost_usd"] for t in tiers)
    total_tokens = sum(t["tokens"] for t in tiers)
    finished = sum(t["finished"] for t in tiers)
    cheapest = tiers[0] if tiers else None
    return Template(
        template_name="costs.html",
        context={
            **_common(settings),
            "tiers": tiers,
            "repos": [{**r, **_bar(r["cost_usd"], repos)} for r in repos],
            "tier_bars": [{**t, **_bar(t["cost_usd"], tiers)} for t in tiers],
            "day_chart": day_chart(days),
            "share": _share_segments(tiers),
            "total_cost": total_cost,
            "total_tokens": total_tokens,
            "missions": sum(r["missions"] for r in repos),
            "finished": finished,
            "cheapest": cheapest,
        },
    )


def _bar(value: float, rows: list[dict[str, Any]]) -> dict[str, float]:
    top = max((float(r["cost_usd"]) for r in rows), default=0.0)
    return {"pct": round(100 * value / top, 2) if top > 0 else 0.0}


def _share_segments(tiers: list[dict[str, Any]]) -> list[dict[str, Any]]:
    segments, x = [], 0.0
    for tier in tiers:
        width = round(100 * float(tier["share"]), 2)
        segments.append({"tier": tier["tier"], "color": tier["color"], "x": x, "width": width,
                         "share": tier["share"], "finished": tier["finished"]})  # fmt: skip
        x += width
    return segments


@dataclass(frozen=True)
class DayBar:
    x: float
    y: float
    width: float
    height: float
    label: str
    cost: float
    tokens: int
    missions: int


def day_chart(days: list[dict[str, Any]], width: int = 1200, height: int = 220) -> dict[str, Any]:
    """Geometry for the spend-per-day bar chart (an inline SVG; no script, no library)."""
    top = max((float(d["cost_usd"]) for d in days), default=0.0)
    plot_h = height - 36
    slot = width / max(len(days), 1)
    bars = []
    for n, d in enumerate(days):
        h = plot_h * float(d["cost_usd"]) / top if top > 0 else 0.0
        bars.append(
            DayBar(
                x=round(n * slot + slot * 0.15, 2),
                y=round(8 + plot_h - h, 2),
                width=round(slot * 0.7, 2),
                height=round(max(h, 1.0 if d["missions"] else 0.0), 2),
                label=str(d["day"])[5:],
                cost=float(d["cost_usd"]),
                tokens=int(d["tokens"]),
                missions=int(d["missions"]),
            )
        )
    label_every = max(1, len(days) // 8)
    return {"width": width, "height": height, "bars": bars, "top": top,
            "baseline": 8 + plot_h, "label_every": label_every}  # fmt: skip


def _web_url(settings: Settings) -> str:
    api = settings.github.api_url.rstrip("/")
    host = urlsplit(api).netloc
    if host == "api.github.com":
        return "https://github.com"
    return api.removesuffix("/api/v3")


def _repo_url(settings: Settings, repo: str, trigger: str) -> str | None:
    if trigger == "cli" or repo.count("/") != 1:
        return None
    return f"{_web_url(settings)}/{repo}"


def _check_run_url(settings: Settings, repo: str, check_run_id: int | None) -> str | None:
    if check_run_id is None or repo.count("/") != 1:
        return None
    return f"{_web_url(settings)}/{repo}/runs/{check_run_id}"


# -- access ------------------------------------------------------------------------------


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
        template_name="login.html", context={**_common(settings), "next": _safe_next(next)}
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
            context={**_common(settings), "next": target, "error": "That token is not right."},
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


@post("/logout", sync_to_thread=False, include_in_schema=False)
def logout() -> Redirect:
    response = Redirect("/login", status_code=HTTP_303_SEE_OTHER)
    response.delete_cookie(SESSION_COOKIE, path="/")
    response.delete_cookie(GITHUB_COOKIE, path="/")
    return response


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


class _ListingEnded(Exception):
    """Raised from a page of `/user/repos` that must be the last one read."""


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
    (signed, HttpOnly, 8 hours). The user token is dropped here, never stored."""
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
    response = Redirect(
        target,
        status_code=HTTP_303_SEE_OTHER,
        cookies=[
            Cookie(
                key=GITHUB_COOKIE,
                value=github_session_value(settings, sessions, login, repos, expires),
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
        context={**_common(settings), "next": "/", "error": message},
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

    pages = 0
    stop_at: int | None = None
    repos: list[str] = []

    def names(page: GitHubResponse[list[Repository]]) -> list[str]:
        """One page's repository names. Past `MAX_REPO_PAGES`, or when the next link leaves
        the configured API (the token goes nowhere else), this page is the last read."""
        nonlocal pages, stop_at
        if stop_at is not None:
            raise _ListingEnded  # only an empty last page gets here
        pages += 1
        found = [repo.full_name for repo in page.parsed_data]
        following = page.raw_response.links.get("next", {}).get("url")
        if pages >= MAX_REPO_PAGES or (following and not following.startswith(f"{api}/")):
            stop_at = len(repos) + len(found)
            if not found:
                raise _ListingEnded
        return found

    try:
        async with GitHub(user_token, base_url=api, timeout=GITHUB_TIMEOUT_S) as user:
            login = (await user.rest.users.async_get_authenticated()).parsed_data.login
            listing = user.rest.paginate(
                user.rest.repos.async_list_for_authenticated_user, map_func=names, per_page=100
            )
            try:
                async for name in listing:
                    repos.append(name)
                    # The paginator asks for the next page only once this one is used up.
                    if stop_at is not None and len(repos) >= stop_at:
                        break
            except _ListingEnded:
                pass
    except (GitHubException, ValueError, KeyError, TypeError) as exc:
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
            context={**_common(settings), "next": _safe_next(target)},
            status_code=HTTP_401_UNAUTHORIZED,
            headers={h.name: h.value or "" for h in SECURITY_HEADERS},
        )
    return Response(
        {"status_code": HTTP_401_UNAUTHORIZED, "detail": exc.detail},
        status_code=HTTP_401_UNAUTHORIZED,
        media_type=MediaType.JSON,
        headers={"WWW-Authenticate": 'Bearer realm="loopwright"'},
    )
