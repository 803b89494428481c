"""The App's REST edge: installation tokens scoped to one repository, handed out as
`RepoSession`s whose client applies GitHub's rate-limit rules (see `client`).

The names of `client` and `repo_session` that callers use are re-exported here.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import structlog
from githubkit import AppAuthStrategy, GitHub, TokenAuthStrategy
from githubkit.cache import MemCacheStrategy
from githubkit.exception import GitHubException, RequestFailed

from loopwright.github.client import GitHubError, github_client
from loopwright.github.ratelimit import WriteSpacer
from loopwright.github.repo_session import (
    PULL_COMMITS_LIMIT,
    CheckOutput,
    Conclusion,
    PullInfo,
    RepoSession,
    loopwright_authored,
)

__all__ = [
    "MISSION_PERMISSIONS",
    "PULL_COMMITS_LIMIT",
    "CheckOutput",
    "Conclusion",
    "GitHubApp",
    "GitHubError",
    "PullInfo",
    "RepoSession",
    "github_client",
    "loopwright_authored",
    "token_session",
]

# What one fix mission needs, and nothing more (SECURITY #14).
MISSION_PERMISSIONS = {
    "contents": "write",
    "pull_requests": "write",
    "checks": "write",
    "issues": "write",
    "metadata": "read",
}


class GitHubApp:
    """Authenticates as the App and hands out per-mission repository sessions."""

    def __init__(
        self,
        app_id: int | str,
        private_key: str,
        api_url: str,
        *,
        clock: Callable[[], float] = time.time,
        spacer: WriteSpacer | None = None,
    ) -> None:
        self.api_url = api_url.rstrip("/")
        self._app_id = app_id
        self._private_key = private_key
        self._clock = clock
        self._spacer = spacer or WriteSpacer()
        # githubkit's default cache is process-wide and keyed by app id; one per App keeps a
        # JWT from ever being reused with another key or endpoint.
        self._cache = MemCacheStrategy()

    @property
    def write_interval_s(self) -> float:
        """How far apart this App's writes to GitHub are, at least."""
        return self._spacer.interval_s

    def _client(self, auth: Any, log: structlog.stdlib.BoundLogger) -> GitHub[Any]:
        return github_client(
            auth, self.api_url, log=log, clock=self._clock, spacer=self._spacer, cache=self._cache
        )

    def session(
        self,
        installation_id: int,
        repo: str,
        *,
        permissions: dict[str, str] | None = None,
        log: structlog.stdlib.BoundLogger | None = None,
    ) -> RepoSession:
        """A session holding a token that works only on `repo` with `permissions`."""
        log = log or structlog.get_logger("loopwright.github").bind(repo=repo)
        owner, _, name = repo.partition("/")
        app = self._client(AppAuthStrategy(str(self._app_id), self._private_key), log)
        try:
            # githubkit types `permissions` as a TypedDict of literals; ours is plain data.
            scope: Any = {"repositories": [name], "permissions": permissions or MISSION_PERMISSIONS}
            response = app.rest.apps.create_installation_access_token(installation_id, data=scope)
        except RequestFailed as exc:
            status = exc.response.status_code
            hint = {
                401: "check LOOPWRIGHT_GITHUB_APP_ID and LOOPWRIGHT_GITHUB_PRIVATE_KEY: GitHub "
                "rejected the App's signed token",
                404: f"the App is not installed on {repo} (installation {installation_id})",
                422: f"the App lacks a permission it needs on {repo}; accept the permissions "
                "requested in deploy/github-app-manifest.json",
            }.get(status, f"GitHub answered {status}")
            raise GitHubError(f"could not get an installation token: {hint}") from None
        except GitHubException as exc:
            raise GitHubError(f"could not reach GitHub at {self.api_url}: {exc}") from None
        token = response.parsed_data.token
        return RepoSession(self._client(TokenAuthStrategy(token), log), owner, name, token)


def token_session(
    token: str,
    repo: str,
    api_url: str = "https://api.github.com",
    *,
    clock: Callable[[], float] = time.time,
    log: structlog.stdlib.BoundLogger | None = None,
) -> RepoSession:
    """A session from a token someone else issued (the Action's GITHUB_TOKEN), with the
    same retry, spacing and logging as the App's sessions."""
    log = log or structlog.get_logger("loopwright.github").bind(repo=repo)
    owner, _, name = repo.partition("/")
    client = github_client(TokenAuthStrategy(token), api_url, log=log, clock=clock)
    return RepoSession(client, owner, name, token)
