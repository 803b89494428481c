"""The live view's pages: missions list, one mission and costs.

Pages are server-rendered Jinja (autoescaped); the mission page and the list keep
themselves current with a little plain JavaScript reading the SSE streams. Everything that
comes from events is untrusted text: templates escape it and the scripts only ever set
`textContent`. The Content-Security-Policy allows scripts and styles from this server only.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from litestar import Request, get
from litestar.datastructures import ResponseHeader
from litestar.di import NamedDependency
from litestar.params import FromPath, FromQuery
from litestar.response import Template

from loopwright.app.api import (
    Viewer,
    queue_positions_of,
    require_full_access,
    require_token,
    visible_mission,
    visible_missions,
)
from loopwright.app.cancel import csrf_token
from loopwright.app.pair import takes_guidance
from loopwright.app.params import valid_repo
from loopwright.app.stream import StreamTiming, mission_summary
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


def page_context(settings: Settings, viewer: Viewer | None = None) -> dict[str, Any]:
    """What every page's layout needs: which sign-ins are offered and who is signed in."""
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
    found = visible_missions(store, viewer, status, repo, 100)
    positions = queue_positions_of(store, found)
    missions = [mission_summary(m, now, positions) for m in found]
    repos = sorted(r["repo"] for r in store.costs_by_repo() if viewer.can_see(r["repo"]))
    return Template(
        template_name="missions.html",
        context={
            **page_context(settings, viewer),
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
    timing: NamedDependency[StreamTiming],
    mission_id: FromPath[str],
) -> Template:
    """One mission: pipeline, plan, timeline, verification, screenshot and outcome, filled
    in from the event stream (which replays the log first, so finished missions work)."""
    mission = visible_mission(store, viewer, mission_id)
    summary = mission_summary(mission, positions=queue_positions_of(store, [mission]))
    # Missions the App runs can be cancelled from here; the token binds the POST to this page.
    cancellable = request.app.state.mode == "app"
    return Template(
        template_name="mission.html",
        context={
            **page_context(settings, viewer),
            "mission": summary,
            "head_sha": mission.head_sha,
            "check_url": _check_run_url(settings, mission.repo, mission.check_run_id),
            "repo_url": _repo_url(settings, mission.repo, mission.trigger),
            "stages": STAGES,
            "tiers": settings.tier_names,
            "csrf": csrf_token(settings, request) if cancellable else "",
            "active": mission.status in ACTIVE_STATUSES,
            # Send guidance is offered only while the pair-mode loop reads it.
            "takes_guidance": takes_guidance(mission),
            # A queued mission's page reads its place in the queue this often.
            "queue_poll_ms": max(int(timing.poll_s * 1000), 250),
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
            **page_context(settings),
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
