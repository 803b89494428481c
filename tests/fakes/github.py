"""A fake GitHub REST API: a real HTTP server on loopback that keeps state and speaks GitHub's wire.

Every request is routed and validated against GitHub's published OpenAPI description
(`tests/fakes/openapi.py`): an unknown method and path is a 404, a malformed parameter or
body a 422, and both are recorded in `rejected`; a real operation the fake does not implement
is a 501 naming its operationId. Authentication follows GitHub Apps: an RS256 JWT for `/app`
routes, installation tokens scoped to repositories and permissions for everything else, and
user tokens (from the App's OAuth sign-in, see `tests/fakes/github_web.py`) for `/user` and
`/user/repos`.
Responses are built from the description's schemas and checked against them before sending.
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import socket
import subprocess
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Literal
from urllib.parse import parse_qs, urlsplit

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.fakes.openapi import Description, Match, RequestInvalid, deep_merge, load_description

ROLES = ("none", "read", "triage", "write", "maintain", "admin")
_ACCESS = {"read": 1, "write": 2, "admin": 3}
_RATE_DOCS = "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api"
_SECONDARY_MESSAGE = (
    "You have exceeded a secondary rate limit. Please wait a few minutes before you try "
    "again. If you reach out to GitHub Support for help, please include the request ID {rid}."
)
_MAX_BODY = 65536


def generate_app_key() -> str:
    """A fresh 2048-bit RSA private key in the PKCS#1 PEM form GitHub hands out for Apps."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    ).decode()


def _now_iso(at: float | None = None) -> str:
    return datetime.fromtimestamp(at if at is not None else time.time(), UTC).strftime(
        "%Y-%m-%dT%H:%M:%SZ"
    )


def _mask(authorization: str) -> str:
    scheme, _, credential = authorization.partition(" ")
    if not credential:
        return "***" if authorization else ""
    cut = credential.find("_")
    prefix = credential[: cut + 1] if 0 < cut < 12 else credential[:3]
    return f"{scheme} {prefix}***"


@dataclass
class RecordedRequest:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    """Request headers, lower-cased names; Authorization keeps only its scheme and prefix."""
    body: Any
    delivery: str | None
    operation_id: str | None = None
    status: int = 0


@dataclass
class Rejection:
    method: str
    path: str
    status: int
    kind: Literal["unknown", "invalid", "unimplemented", "response", "error"]
    reason: str
    operation_id: str | None = None


@dataclass
class RateLimitInjection:
    """The next `times` requests matching `match` get a rate-limit answer instead."""

    match: str | None
    kind: Literal["primary", "secondary", "retry_after"]
    times: int
    status: int
    retry_after: int | None
    reset_in: int
    hits: int = 0

    def applies(self, method: str, template: str, operation_id: str) -> bool:
        if self.hits >= self.times:
            return False
        return self.match in (None, operation_id, f"{method} {template}")


@dataclass
class IssuedToken:
    token: str
    installation_id: int
    repository_ids: frozenset[int] | None
    """None: every repository of the installation."""
    permissions: dict[str, str]
    expires_at: float


@dataclass
class _Installation:
    id: int
    account: str
    repositories: set[str] | None
    permissions: dict[str, str]
    events: list[str]
    created_at: str


@dataclass
class _Issue:
    number: int
    id: int
    title: str
    body: str | None
    user: str
    state: str
    created_at: str
    updated_at: str
    closed_at: str | None = None
    pull: dict[str, Any] | None = None
    """For pull requests: head_ref, head_sha, head_repo, base_ref, draft, merged, ..."""


@dataclass
class _Repo:
    id: int
    owner: str
    name: str
    default_branch: str
    private: bool
    fork_of: str | None
    clone_url: str
    git_dir: Path | None
    created_at: str
    branches: dict[str, str] = field(default_factory=dict)
    files: dict[str, dict[str, bytes]] = field(default_factory=dict)
    commits: dict[str, dict[str, Any]] = field(default_factory=dict)
    roles: dict[str, str] = field(default_factory=dict)
    issues: dict[int, _Issue] = field(default_factory=dict)
    comments: dict[int, dict[str, Any]] = field(default_factory=dict)
    review_comments: dict[int, dict[str, Any]] = field(default_factory=dict)
    """Comments on a pull request's diff, by id: `number`, `path`, `line`, `body`, `user`,
    `reactions` (only what the implemented operations read)."""
    check_runs: dict[int, dict[str, Any]] = field(default_factory=dict)
    next_number: int = 1

    @property
    def full_name(self) -> str:
        return f"{self.owner}/{self.name}"


class ApiError(Exception):
    def __init__(
        self,
        status: int,
        message: str,
        errors: list[dict[str, Any]] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.errors = errors
        self.headers = headers or {}


@dataclass
class _Call:
    match: Match
    params: dict[str, Any]
    body: Any
    token: IssuedToken | None
    repo: _Repo | None = None
    user: str | None = None
    """The login behind a user token."""

    @property
    def op(self) -> str:
        return self.match.operation.operation_id


@dataclass
class _Reply:
    status: int
    body: Any
    headers: dict[str, str] = field(default_factory=dict)
    identity: str = "anonymous"
    """Whose rate limit the request counts against."""
    counted: bool = True


# What an installation token needs for each implemented repository operation. Comments and
# reactions on pull requests accept either `issues` or `pull_requests`, as on GitHub.
_NEEDS: dict[str, tuple[str, str]] = {
    "repos/get": ("metadata", "read"),
    "repos/get-collaborator-permission-level": ("metadata", "read"),
    "pulls/list": ("pull_requests", "read"),
    "pulls/get": ("pull_requests", "read"),
    "pulls/create": ("pull_requests", "write"),
    "pulls/update": ("pull_requests", "write"),
    "issues/get": ("issues", "read"),
    "issues/list-comments": ("issues", "read"),
    "issues/get-comment": ("issues", "read"),
    "issues/create-comment": ("issues", "write"),
    "issues/update-comment": ("issues", "write"),
    "reactions/create-for-issue-comment": ("issues", "write"),
    "reactions/create-for-pull-request-review-comment": ("pull_requests", "write"),
    "checks/create": ("checks", "write"),
    "checks/update": ("checks", "write"),
    "checks/get": ("checks", "read"),
    "checks/list-for-ref": ("checks", "read"),
    "repos/get-content": ("contents", "read"),
    "repos/get-branch": ("contents", "read"),
    "git/get-ref": ("contents", "read"),
    "repos/get-commit": ("contents", "read"),
    "git/get-commit": ("contents", "read"),
    # Iterating on Loopwright's own pull request.
    "pulls/list-commits": ("pull_requests", "read"),
}
# Operations whose inline response schema contradicts the component GitHub documents for the
# same object (list-installations declares `account` as allOf [user, enterprise], which no
# account satisfies); their items are checked against the component instead.
_ITEM_SCHEMA_OVERRIDES = {"apps/list-installations": "installation"}
_APP_OPERATIONS = frozenset(
    {
        "apps/get-authenticated",
        "apps/list-installations",
        "apps/get-installation",
        "apps/create-installation-access-token",
        "apps/get-repo-installation",
    }
)
_TOKEN_OPERATIONS = frozenset({"rate-limit/get", "apps/list-repos-accessible-to-installation"})
# What a user token (ghu_) from the App's OAuth sign-in may call here.
_USER_OPERATIONS = frozenset({"users/get-authenticated", "repos/list-for-authenticated-user"})


class FakeGitHub:
    """GitHub's REST API for one GitHub App, on `http://127.0.0.1:<port>`."""

    IMPLEMENTED: frozenset[str] = frozenset(
        {*_NEEDS, *_APP_OPERATIONS, *_TOKEN_OPERATIONS, *_USER_OPERATIONS}
    )

    def __init__(
        self,
        app_id: int,
        private_key_pem: str | None = None,
        *,
        app_slug: str = "loopwright",
        git_url: str | None = None,
        delivery_header: str = "X-Loopwright-Delivery",
        validate_responses: bool = True,
        description: Description | None = None,
    ) -> None:
        self.app_id = app_id
        self.app_slug = app_slug
        self.private_key_pem = private_key_pem or generate_app_key()
        private = serialization.load_pem_private_key(self.private_key_pem.encode(), None)
        self.public_key_pem = (
            private.public_key()
            .public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            )
            .decode()
        )
        self.git_url = git_url.rstrip("/") if git_url else None
        self.delivery_header = delivery_header
        self.validate_responses = validate_responses
        self.description = description or load_description()
        self.html_base = "https://github.com"
        self.link_base: str | None = None
        """Where the `Link` headers of list pages point; None: this server. Set it to see that
        a client does not follow a next link off the API it was configured with."""
        self.requests: list[RecordedRequest] = []
        self.rejected: list[Rejection] = []
        self.tokens: dict[str, IssuedToken] = {}
        self.user_tokens: dict[str, str] = {}
        """User token -> login."""
        self.injections: list[RateLimitInjection] = []
        self._installations: dict[int, _Installation] = {}
        self._repos: dict[str, _Repo] = {}
        self._users: dict[str, dict[str, Any]] = {}
        self._usage: dict[str, int] = {}
        self._window_reset = int(time.time()) + 3600
        self._next_id = 1000
        self._lock = threading.RLock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._started = False
        self._bot = self.add_user(f"{app_slug}[bot]", type="Bot")

    # ---- lifecycle -----------------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> FakeGitHub:
        if not self._started:
            self._thread.start()
            self._started = True
        return self

    def stop(self) -> None:
        if self._started:
            self._server.shutdown()
            self._started = False
        self._server.server_close()

    def __enter__(self) -> FakeGitHub:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ---- state set-up --------------------------------------------------------------------

    def add_user(self, login: str, *, type: str = "User") -> dict[str, Any]:
        with self._lock:
            user = self._users.get(login.lower())
            if user is None:
                user = {"login": login, "id": self._new_id(), "type": type}
                self._users[login.lower()] = user
            return user

    def add_installation(
        self,
        installation_id: int,
        account: str,
        *,
        repositories: list[str] | None = None,
        permissions: dict[str, str] | None = None,
        account_type: str = "Organization",
        events: list[str] | None = None,
    ) -> None:
        """`repositories` as `owner/name`; None means all of the account's repositories."""
        with self._lock:
            self.add_user(account, type=account_type)
            self._installations[installation_id] = _Installation(
                id=installation_id,
                account=account,
                repositories=None if repositories is None else {r.lower() for r in repositories},
                permissions={"metadata": "read"}
                | (
                    permissions
                    or {
                        "contents": "write",
                        "pull_requests": "write",
                        "checks": "write",
                        "issues": "write",
                        "actions": "read",
                    }
                ),
                events=events
                or ["check_run", "check_suite", "workflow_run", "issue_comment", "pull_request"],
                created_at=_now_iso(),
            )

    def add_repo(
        self,
        full_name: str,
        *,
        default_branch: str = "main",
        private: bool = True,
        fork_of: str | None = None,
        clone_url: str | None = None,
        git_dir: Path | None = None,
    ) -> int:
        """A repository; with `git_dir` (a bare repo) branches, commits and files come from git.

        Returns the repository id.
        """
        owner, _, name = full_name.partition("/")
        with self._lock:
            self.add_user(owner)
            if clone_url is None:
                base = self.git_url or self.html_base
                clone_url = f"{base}/{full_name}.git"
            repo = _Repo(
                id=self._new_id(),
                owner=owner,
                name=name,
                default_branch=default_branch,
                private=private,
                fork_of=fork_of,
                clone_url=clone_url,
                git_dir=git_dir,
                created_at=_now_iso(),
            )
            self._repos[full_name.lower()] = repo
            return repo.id

    def set_permission(self, repo: str, user: str, role: str) -> None:
        if role not in ROLES:
            raise ValueError(f"role must be one of {ROLES}, not {role!r}")
        with self._lock:
            self.add_user(user)
            self._repo(repo).roles[user.lower()] = role

    def set_branch(self, repo: str, branch: str, sha: str, *, message: str = "commit") -> None:
        with self._lock:
            state = self._repo(repo)
            parent = state.branches.get(branch)
            state.branches[branch] = sha
            state.commits.setdefault(
                sha, {"message": message, "parents": [parent] if parent else []}
            )

    def set_file(self, repo: str, branch: str, path: str, text: str | bytes) -> str:
        """Commit one file to `branch` (created if new); returns the new head SHA."""
        data = text.encode() if isinstance(text, str) else text
        with self._lock:
            state = self._repo(repo)
            files = state.files.setdefault(branch, {})
            if branch not in state.branches and state.git_dir is not None:
                head = self._git_rev(state, branch)
                if head:
                    state.branches[branch] = head
            files[path.strip("/")] = data
            parent = state.branches.get(branch)
            sha = hashlib.sha1(
                f"{parent}:{path}:".encode() + data + str(self._new_id()).encode()
            ).hexdigest()
            state.branches[branch] = sha
            state.commits[sha] = {
                "message": f"Update {path}",
                "parents": [parent] if parent else [],
            }
            return sha

    def add_pull(
        self,
        repo: str,
        *,
        head_ref: str,
        head_sha: str | None = None,
        base_ref: str | None = None,
        title: str = "A change",
        body: str | None = None,
        user: str = "octocat",
        head_repo: str | None = None,
        state: Literal["open", "closed"] = "open",
        merged: bool = False,
        draft: bool = False,
    ) -> int:
        """A pull request from `head_repo` (default: `repo`) `head_ref`; returns its number."""
        with self._lock:
            target = self._repo(repo)
            source = self._repo(head_repo) if head_repo else target
            sha = head_sha or self._branch_sha(source, head_ref)
            if sha is None:
                sha = self.set_file(source.full_name, head_ref, ".keep", head_ref)
            elif (
                head_sha and head_ref not in source.branches and not self._git_rev(source, head_ref)
            ):
                self.set_branch(source.full_name, head_ref, head_sha)
            return self._open_pull(
                target,
                source,
                head_ref=head_ref,
                head_sha=sha,
                base_ref=base_ref or target.default_branch,
                title=title,
                body=body,
                user=user,
                state=state,
                merged=merged,
                draft=draft,
            ).number

    def add_issue(
        self, repo: str, *, title: str, body: str | None = None, user: str = "octocat"
    ) -> int:
        with self._lock:
            return self._new_issue(self._repo(repo), title, body, user).number

    def add_comment(self, repo: str, number: int, body: str, *, user: str = "octocat") -> int:
        """A comment on issue or pull request `number`; returns the comment id."""
        with self._lock:
            state = self._repo(repo)
            if number not in state.issues:
                raise KeyError(f"{repo} has no issue or pull request #{number}")
            return self._new_comment(state, number, body, user)["id"]

    def add_review_comment(
        self, repo: str, number: int, body: str, *, path: str, line: int, user: str = "octocat"
    ) -> int:
        """A review comment on `line` of `path` in pull request `number`'s diff; its id."""
        with self._lock:
            state = self._repo(repo)
            issue = state.issues.get(number)
            if issue is None or issue.pull is None:
                raise KeyError(f"{repo} has no pull request #{number}")
            comment_id = self._new_id()
            state.review_comments[comment_id] = {
                "id": comment_id, "number": number, "path": path, "line": line,
                "body": body, "user": user, "reactions": [],
            }  # fmt: skip
            return comment_id

    def review_comment_reactions(self, repo: str, comment_id: int) -> list[str]:
        """The reactions on a review comment, as their `content` values, oldest first."""
        with self._lock:
            comment = self._repo(repo).review_comments[comment_id]
            return [r["content"] for r in comment["reactions"]]

    def add_check_run(
        self,
        repo: str,
        *,
        name: str,
        head_sha: str,
        status: str = "completed",
        conclusion: str | None = "failure",
        app_slug: str = "github-actions",
    ) -> int:
        """A check run made by another App (CI), as a webhook would describe it."""
        with self._lock:
            run = self._new_check_run(
                self._repo(repo),
                {"name": name, "head_sha": head_sha, "status": status, "conclusion": conclusion},
            )
            run["app_slug"] = app_slug
            return int(run["id"])

    def inject_rate_limit(
        self,
        match: str | None = None,
        *,
        kind: Literal["primary", "secondary", "retry_after"] = "primary",
        times: int = 1,
        status: int | None = None,
        retry_after: int | None = None,
        reset_in: int = 60,
    ) -> RateLimitInjection:
        """Answer the next `times` requests matching `match` with a rate limit.

        `match` is an operationId (`pulls/create`), `"METHOD /template"`
        (`"POST /repos/{owner}/{repo}/pulls"`) or None for any authenticated request.
        `primary`: 403 with `x-ratelimit-remaining: 0` and `x-ratelimit-reset` in `reset_in` s.
        `secondary`: 403 with GitHub's secondary-limit message (and `retry-after` if given).
        `retry_after`: 429 with `retry-after` (default 60 s).
        """
        if match is not None and match not in self.description.operations and " " not in match:
            raise ValueError(f"{match!r} is neither an operationId nor 'METHOD /template'")
        default_status = 429 if kind == "retry_after" else 403
        if kind == "retry_after" and retry_after is None:
            retry_after = 60
        injection = RateLimitInjection(
            match, kind, times, status or default_status, retry_after, reset_in
        )
        with self._lock:
            self.injections.append(injection)
        return injection

    def issue_user_token(self, login: str) -> str:
        """A user-to-server token (`ghu_`) acting as `login`, as the OAuth web flow issues."""
        with self._lock:
            self.add_user(login)
            token = "ghu_" + secrets.token_urlsafe(27).replace("-", "A").replace("_", "b")[:36]
            self.user_tokens[token] = login
            return token

    def expire_tokens(self) -> None:
        """Every issued installation token is now past its `expires_at`."""
        with self._lock:
            for token in self.tokens.values():
                token.expires_at = time.time() - 1

    # ---- accessors for tests -------------------------------------------------------------

    def pulls(self, repo: str) -> list[dict[str, Any]]:
        with self._lock:
            state = self._repo(repo)
            return [self._pull_object(state, i) for i in state.issues.values() if i.pull]

    def pull(self, repo: str, number: int) -> dict[str, Any]:
        with self._lock:
            state = self._repo(repo)
            return self._pull_object(state, state.issues[number])

    def comments(self, repo: str, number: int) -> list[dict[str, Any]]:
        with self._lock:
            state = self._repo(repo)
            return [
                self._comment_object(state, c)
                for c in state.comments.values()
                if c["number"] == number
            ]

    def check_runs(self, repo: str) -> list[dict[str, Any]]:
        with self._lock:
            state = self._repo(repo)
            return [self._check_run_object(state, r) for r in state.check_runs.values()]

    def branch_sha(self, repo: str, branch: str) -> str | None:
        with self._lock:
            return self._branch_sha(self._repo(repo), branch)

    def requests_for(self, operation_id: str) -> list[RecordedRequest]:
        return [r for r in self.requests if r.operation_id == operation_id]

    def assert_no_rejections(self) -> None:
        if self.rejected:
            lines = [f"{r.status} {r.method} {r.path} [{r.kind}] {r.reason}" for r in self.rejected]
            raise AssertionError("the fake GitHub rejected requests:\n" + "\n".join(lines))

    # ---- request pipeline ----------------------------------------------------------------

    def _handle(self, method: str, target: str, headers: dict[str, str], raw_body: bytes) -> _Reply:
        split = urlsplit(target)
        path = split.path
        query = parse_qs(split.query, keep_blank_values=True)
        auth_header = headers.get("authorization", "")
        try:
            body_for_record: Any = json.loads(raw_body) if raw_body.strip() else None
        except ValueError:
            body_for_record = raw_body.decode("utf-8", "replace")
        record = RecordedRequest(
            method=method,
            path=path,
            query=query,
            headers={k: (_mask(v) if k == "authorization" else v) for k, v in headers.items()},
            body=body_for_record,
            delivery=headers.get(self.delivery_header.lower()),
        )
        with self._lock:
            self.requests.append(record)
        reply = self._process(method, path, query, headers, raw_body, auth_header, record)
        record.status = reply.status
        return self._with_rate_headers(reply)

    def _process(
        self,
        method: str,
        path: str,
        query: dict[str, list[str]],
        headers: dict[str, str],
        raw_body: bytes,
        auth_header: str,
        record: RecordedRequest,
    ) -> _Reply:
        match = self.description.match(method, path)
        if match is None:
            self._reject(method, path, 404, "unknown", "no such operation in the description")
            return self._error(404, "Not Found", "https://docs.github.com/rest")
        op = match.operation
        record.operation_id = op.operation_id
        try:
            params, body = self.description.validate_request(
                match, query, raw_body, headers.get("content-type", "")
            )
        except RequestInvalid as exc:
            self._reject(method, path, exc.status, "invalid", exc.message, op.operation_id)
            return self._error(exc.status, exc.message, op.docs_url, exc.errors or None)
        if op.operation_id not in self.IMPLEMENTED:
            message = (
                f"the fake GitHub does not implement {op.operation_id} ({method} {op.template})"
            )
            self._reject(method, path, 501, "unimplemented", message, op.operation_id)
            return self._error(501, message, op.docs_url)
        identity = "anonymous"
        try:
            with self._lock:
                token, identity = self._authenticate(op.operation_id, auth_header)
                call = _Call(match, params, body, token)
                if identity.startswith("user:"):
                    call.user = identity.removeprefix("user:")
                injected = self._injected(method, op.template, op.operation_id, identity)
                if injected is not None:
                    injected.identity = identity
                    injected.counted = False
                    return injected
                handler = "_op_" + op.operation_id.replace("/", "_").replace("-", "_")
                reply = getattr(self, handler)(call)
        except ApiError as exc:
            reply = self._error(exc.status, exc.message, op.docs_url, exc.errors)
            reply.headers.update(exc.headers)
        except Exception as exc:
            self._reject(method, path, 500, "error", repr(exc), op.operation_id)
            return self._error(500, f"the fake GitHub failed: {exc!r}", op.docs_url)
        if self.validate_responses and reply.status < 300:
            problem = self._check_response(op.operation_id, reply)
            if problem is not None:
                message = (
                    f"response for {op.operation_id} does not match the description: {problem}"
                )
                self._reject(method, path, 500, "response", message, op.operation_id)
                return self._error(500, message, op.docs_url)
        version = headers.get("x-github-api-version")
        if version:
            reply.headers["X-GitHub-Api-Version-Selected"] = version
        reply.identity = identity
        return reply

    def _check_response(self, operation_id: str, reply: _Reply) -> str | None:
        op = self.description.operations[operation_id]
        component = _ITEM_SCHEMA_OVERRIDES.get(operation_id)
        if component is None:
            return self.description.check_response(op, reply.status, reply.body)
        schema = self.description.schema(component)
        for item in reply.body:
            problem = self.description.check_value(schema, item)
            if problem is not None:
                return problem
        return None

    def _reject(
        self, method: str, path: str, status: int, kind: Any, reason: str, op: str | None = None
    ) -> None:
        with self._lock:
            self.rejected.append(Rejection(method, path, status, kind, reason, op))

    @staticmethod
    def _error(
        status: int, message: str, docs: str, errors: list[dict[str, Any]] | None = None
    ) -> _Reply:
        body: dict[str, Any] = {"message": message, "documentation_url": docs}
        if errors:
            body["errors"] = errors
        body["status"] = str(status)
        return _Reply(status, body)

    def _with_rate_headers(self, reply: _Reply) -> _Reply:
        identity = reply.identity
        limit = 60 if identity == "anonymous" else 5000
        with self._lock:
            if time.time() >= self._window_reset:
                self._usage.clear()
                self._window_reset = int(time.time()) + 3600
            if reply.counted:
                self._usage[identity] = self._usage.get(identity, 0) + 1
            used = self._usage.get(identity, 0)
            reset = self._window_reset
        headers = {
            "x-ratelimit-limit": str(limit),
            "x-ratelimit-remaining": str(max(limit - used, 0)),
            "x-ratelimit-reset": str(reset),
            "x-ratelimit-used": str(used),
            "x-ratelimit-resource": "core",
        }
        reply.headers = headers | reply.headers
        return reply

    def _injected(
        self, method: str, template: str, operation_id: str, identity: str
    ) -> _Reply | None:
        for injection in self.injections:
            if not injection.applies(method, template, operation_id):
                continue
            injection.hits += 1
            rid = _request_id()
            headers: dict[str, str] = {"x-github-request-id": rid}
            if injection.kind == "primary":
                headers["x-ratelimit-remaining"] = "0"
                headers["x-ratelimit-reset"] = str(int(time.time()) + injection.reset_in)
                headers["x-ratelimit-used"] = "5000"
                who = identity.split(":", 1)[-1]
                message = f"API rate limit exceeded for installation ID {who}."
                if identity == "app":
                    message = f"API rate limit exceeded for app ID {self.app_id}."
                docs = _RATE_DOCS
            else:
                message = _SECONDARY_MESSAGE.format(rid=rid)
                docs = _RATE_DOCS + "#about-secondary-rate-limits"
            if injection.retry_after is not None:
                headers["retry-after"] = str(injection.retry_after)
            reply = self._error(injection.status, message, docs)
            reply.headers.update(headers)
            return reply
        return None

    # ---- authentication ------------------------------------------------------------------

    def _authenticate(self, operation_id: str, header: str) -> tuple[IssuedToken | None, str]:
        scheme, _, credential = header.partition(" ")
        scheme = scheme.lower()
        if operation_id in _APP_OPERATIONS:
            if scheme != "bearer" or not credential:
                raise ApiError(401, "A JSON web token could not be decoded")
            self._verify_jwt(credential)
            return None, "app"
        if not header:
            raise ApiError(401, "Requires authentication")
        if scheme not in ("token", "bearer"):
            raise ApiError(401, "Bad credentials")
        if credential.startswith("eyJ"):
            self._verify_jwt(credential)
            raise ApiError(403, "Resource not accessible by integration")
        login = self.user_tokens.get(credential)
        if login is not None:
            if operation_id not in _USER_OPERATIONS:
                raise ApiError(
                    403, f"the fake GitHub does not accept user tokens for {operation_id}"
                )
            return None, f"user:{login}"
        if operation_id in _USER_OPERATIONS:
            raise ApiError(403, "Resource not accessible by integration")
        token = self.tokens.get(credential)
        if token is None or token.expires_at <= time.time():
            raise ApiError(401, "Bad credentials")
        return token, f"installation:{token.installation_id}"

    def _verify_jwt(self, credential: str) -> None:
        try:
            claims = jwt.decode(
                credential,
                self.public_key_pem,
                algorithms=["RS256"],
                options={"verify_exp": False, "verify_iat": False, "verify_iss": False},
            )
        except jwt.PyJWTError:
            raise ApiError(401, "A JSON web token could not be decoded") from None
        now = time.time()
        iat, exp = claims.get("iat"), claims.get("exp")
        if not isinstance(iat, int | float):
            raise ApiError(
                401,
                "'Issued at' claim ('iat') must be an Integer representing the time that "
                "the assertion was issued.",
            )
        if not isinstance(exp, int | float) or exp <= now:
            raise ApiError(
                401,
                "'Expiration time' claim ('exp') must be a numeric value representing the "
                "future time at which the assertion expires.",
            )
        if iat > now + 60:
            raise ApiError(
                401,
                "'Issued at' claim ('iat') must be an Integer representing a time in the past.",
            )
        if exp - iat > 600 or exp > now + 660:
            raise ApiError(401, "'Expiration time' claim ('exp') is too far in the future.")
        if str(claims.get("iss")) != str(self.app_id):
            raise ApiError(401, "Integration not found")

    def _authorize(self, call: _Call, *, issue: _Issue | None = None) -> None:
        """The token may see the repository (404 if not) and holds the permission (403)."""
        repo = call.repo
        token = call.token
        assert repo is not None and token is not None
        installation = self._installations.get(token.installation_id)
        visible = (
            installation is not None
            and self._installation_has(installation, repo)
            and (token.repository_ids is None or repo.id in token.repository_ids)
        )
        scope, level = _NEEDS[call.op]
        if not visible:
            # Like GitHub: a private repository outside the token's reach does not exist;
            # a public one can be read by anyone but not written.
            if repo.private:
                raise ApiError(404, "Not Found")
            if level == "read":
                return
            raise ApiError(403, "Resource not accessible by integration")
        scopes = [scope]
        if issue is not None and issue.pull is not None and scope == "issues":
            scopes.append("pull_requests")
        if not any(_ACCESS.get(token.permissions.get(s, ""), 0) >= _ACCESS[level] for s in scopes):
            raise ApiError(403, "Resource not accessible by integration")

    @staticmethod
    def _installation_has(installation: _Installation, repo: _Repo) -> bool:
        if installation.repositories is None:
            return repo.owner.lower() == installation.account.lower()
        return repo.full_name.lower() in installation.repositories

    # ---- operations: the App -------------------------------------------------------------

    def _op_apps_get_authenticated(self, call: _Call) -> _Reply:
        return _Reply(200, self._app_object())

    def _op_apps_list_installations(self, call: _Call) -> _Reply:
        items = [self._installation_object(i) for i in self._installations.values()]
        return self._page(call, items)

    def _op_apps_get_installation(self, call: _Call) -> _Reply:
        installation = self._installations.get(call.params["installation_id"])
        if installation is None:
            raise ApiError(404, "Not Found")
        return _Reply(200, self._installation_object(installation))

    def _op_apps_get_repo_installation(self, call: _Call) -> _Reply:
        repo = self._repos.get(f"{call.params['owner']}/{call.params['repo']}".lower())
        for installation in self._installations.values():
            if repo is not None and self._installation_has(installation, repo):
                return _Reply(200, self._installation_object(installation))
        raise ApiError(404, "Not Found")

    def _op_apps_create_installation_access_token(self, call: _Call) -> _Reply:
        installation = self._installations.get(call.params["installation_id"])
        if installation is None:
            raise ApiError(404, "Not Found")
        body = call.body or {}
        owned = [r for r in self._repos.values() if self._installation_has(installation, r)]
        selected: list[_Repo] | None = None
        names = body.get("repositories")
        ids = body.get("repository_ids")
        if names is not None or ids is not None:
            selected = []
            for name in names or []:
                found = next((r for r in owned if r.name.lower() == name.lower()), None)
                if found is None:
                    raise ApiError(
                        422,
                        "There is at least one repository that does not exist or is not "
                        "accessible to the parent installation.",
                    )
                selected.append(found)
            for repo_id in ids or []:
                found = next((r for r in owned if r.id == repo_id), None)
                if found is None:
                    raise ApiError(
                        422,
                        "There is at least one repository that does not exist or is not "
                        "accessible to the parent installation.",
                    )
                selected.append(found)
        requested: dict[str, str] = body.get("permissions") or {}
        for name, level in requested.items():
            granted = installation.permissions.get(name)
            if granted is None or _ACCESS.get(level, 9) > _ACCESS.get(granted, 0):
                raise ApiError(
                    422, "The permissions requested are not granted to this installation."
                )
        permissions = (
            {"metadata": "read"} | requested if requested else dict(installation.permissions)
        )
        token = IssuedToken(
            token="ghs_" + secrets.token_urlsafe(27).replace("-", "A").replace("_", "b")[:36],
            installation_id=installation.id,
            repository_ids=None if selected is None else frozenset(r.id for r in selected),
            permissions=permissions,
            expires_at=time.time() + 3600,
        )
        self.tokens[token.token] = token
        result: dict[str, Any] = {
            "token": token.token,
            "expires_at": _now_iso(token.expires_at),
            "permissions": permissions,
            "repository_selection": "selected"
            if selected is not None or installation.repositories is not None
            else "all",
        }
        if selected is not None:
            result["repositories"] = [self._repo_object(r, full=False) for r in selected]
        return _Reply(201, result)

    def _op_apps_list_repos_accessible_to_installation(self, call: _Call) -> _Reply:
        token = call.token
        assert token is not None
        installation = self._installations[token.installation_id]
        repos = [
            self._repo_object(r, full=False)
            for r in self._repos.values()
            if self._installation_has(installation, r)
            and (token.repository_ids is None or r.id in token.repository_ids)
        ]
        reply = self._page(call, repos)
        reply.body = {
            "total_count": len(repos),
            "repositories": reply.body,
            "repository_selection": "selected" if token.repository_ids else "all",
        }
        return reply

    def _op_rate_limit_get(self, call: _Call) -> _Reply:
        token = call.token
        identity = f"installation:{token.installation_id}" if token else "anonymous"
        used = self._usage.get(identity, 0)
        core = {
            "limit": 5000,
            "used": used,
            "remaining": 5000 - used,
            "reset": self._window_reset,
        }
        other = {"limit": 30, "used": 0, "remaining": 30, "reset": self._window_reset}
        return _Reply(
            200,
            {
                "resources": {"core": core, "search": other, "graphql": dict(core)},
                "rate": core,
            },
        )

    # ---- operations: the signed-in user ---------------------------------------------------

    def _op_users_get_authenticated(self, call: _Call) -> _Reply:
        assert call.user is not None
        user = self._user_object(call.user) | {"user_view_type": "private"}
        return _Reply(
            200, self._localize(deep_merge(self.description.skeleton("private-user"), user))
        )

    def _op_repos_list_for_authenticated_user(self, call: _Call) -> _Reply:
        """Like a GitHub App's user token: the repositories the user can read (owner or
        collaborator with any role) that an installation of the App can also reach."""
        assert call.user is not None
        login = call.user.lower()
        repos = [
            self._repo_object(r, full=False)
            for r in sorted(self._repos.values(), key=lambda r: r.full_name.lower())
            if (r.owner.lower() == login or r.roles.get(login, "none") != "none")
            and any(self._installation_has(i, r) for i in self._installations.values())
        ]
        return self._page(call, repos)

    # ---- operations: repositories --------------------------------------------------------

    def _enter_repo(self, call: _Call, issue_number: int | None = None) -> _Issue | None:
        repo = self._repos.get(f"{call.params['owner']}/{call.params['repo']}".lower())
        if repo is None:
            raise ApiError(404, "Not Found")
        call.repo = repo
        issue = repo.issues.get(issue_number) if issue_number is not None else None
        self._authorize(call, issue=issue)
        return issue

    def _op_repos_get(self, call: _Call) -> _Reply:
        self._enter_repo(call)
        assert call.repo is not None
        return _Reply(200, self._repo_object(call.repo, full=True))

    def _op_repos_get_collaborator_permission_level(self, call: _Call) -> _Reply:
        self._enter_repo(call)
        repo = call.repo
        assert repo is not None
        user = self._users.get(call.params["username"].lower())
        if user is None:
            raise ApiError(404, "Not Found")
        role = repo.roles.get(user["login"].lower())
        if role is None:
            role = (
                "admin"
                if user["login"].lower() == repo.owner.lower()
                else ("none" if repo.private else "read")
            )
        # `permission` keeps GitHub's legacy levels; `role_name` says maintain/triage.
        legacy = {"maintain": "write", "triage": "read"}.get(role, role)
        collaborator = self._user_object(user["login"]) | {
            "permissions": {
                "pull": role != "none",
                "triage": ROLES.index(role) >= ROLES.index("triage"),
                "push": ROLES.index(role) >= ROLES.index("write"),
                "maintain": ROLES.index(role) >= ROLES.index("maintain"),
                "admin": role == "admin",
            },
            "role_name": role,
        }
        return _Reply(200, {"permission": legacy, "role_name": role, "user": collaborator})

    # ---- operations: pull requests -------------------------------------------------------

    def _op_pulls_list(self, call: _Call) -> _Reply:
        self._enter_repo(call)
        repo = call.repo
        assert repo is not None
        state = call.params.get("state", "open")
        head = call.params.get("head")
        base = call.params.get("base")
        items = []
        for issue in repo.issues.values():
            pull = issue.pull
            if pull is None or (state != "all" and issue.state != state):
                continue
            # Like GitHub, `head` is only a filter in the `owner:branch` form; a bare branch
            # name is ignored and every pull request is listed.
            if head and ":" in head:
                owner, _, ref = head.partition(":")
                head_repo = self._repos[pull["head_repo"].lower()]
                if head_repo.owner.lower() != owner.lower() or pull["head_ref"] != ref:
                    continue
            if base and pull["base_ref"] != base:
                continue
            items.append(issue)
        sort = call.params.get("sort", "created")
        direction = call.params.get("direction", "desc" if sort == "created" else "asc")
        key = {"created": "created_at", "updated": "updated_at"}.get(sort, "updated_at")
        items.sort(key=lambda i: (getattr(i, key), i.number), reverse=direction == "desc")
        return self._page(call, [self._pull_object(repo, i, simple=True) for i in items])

    def _op_pulls_get(self, call: _Call) -> _Reply:
        self._enter_repo(call)
        return _Reply(200, self._pull_object(call.repo, self._pull(call)))  # type: ignore[arg-type]

    def _pull(self, call: _Call) -> _Issue:
        assert call.repo is not None
        issue = call.repo.issues.get(call.params["pull_number"])
        if issue is None or issue.pull is None:
            raise ApiError(404, "Not Found")
        return issue

    def _op_pulls_create(self, call: _Call) -> _Reply:
        self._enter_repo(call)
        repo = call.repo
        assert repo is not None
        body = call.body
        if "title" not in body and "issue" not in body:
            raise ApiError(
                422,
                "Validation Failed",
                [{"resource": "PullRequest", "field": "title", "code": "missing_field"}],
            )
        head = body["head"]
        source = repo
        if ":" in head:
            owner, _, head = head.partition(":")
            if owner.lower() != repo.owner.lower():
                candidates = [
                    r
                    for r in self._repos.values()
                    if r.owner.lower() == owner.lower()
                    and (r.fork_of or "").lower() == repo.full_name.lower()
                ]
                if body.get("head_repo"):
                    candidates = [
                        r for r in candidates if r.name.lower() == body["head_repo"].lower()
                    ]
                if not candidates:
                    raise ApiError(
                        422,
                        "Validation Failed",
                        [{"resource": "PullRequest", "field": "head", "code": "invalid"}],
                    )
                source = candidates[0]
        sha = self._branch_sha(source, head)
        if sha is None:
            raise ApiError(
                422,
                "Validation Failed",
                [{"resource": "PullRequest", "field": "head", "code": "invalid"}],
            )
        if self._branch_sha(repo, body["base"]) is None and (repo.branches or repo.git_dir):
            raise ApiError(
                422,
                "Validation Failed",
                [{"resource": "PullRequest", "field": "base", "code": "invalid"}],
            )
        for issue in repo.issues.values():
            pull = issue.pull
            if (
                pull
                and issue.state == "open"
                and pull["head_ref"] == head
                and pull["head_repo"].lower() == source.full_name.lower()
                and pull["base_ref"] == body["base"]
            ):
                raise ApiError(
                    422,
                    "Validation Failed",
                    [
                        {
                            "resource": "PullRequest",
                            "code": "custom",
                            "message": f"A pull request already exists for {source.owner}:{head}.",
                        }
                    ],
                )
        self._check_body_length("PullRequest", body.get("body"))
        issue = self._open_pull(
            repo,
            source,
            head_ref=head,
            head_sha=sha,
            base_ref=body["base"],
            title=body.get("title", ""),
            body=body.get("body"),
            user=self._bot["login"],
            state="open",
            merged=False,
            draft=bool(body.get("draft")),
            maintainer_can_modify=bool(body.get("maintainer_can_modify", True)),
        )
        return _Reply(201, self._pull_object(repo, issue))

    def _op_pulls_update(self, call: _Call) -> _Reply:
        self._enter_repo(call)
        repo = call.repo
        assert repo is not None
        issue = self._pull(call)
        body = call.body or {}
        pull = issue.pull
        assert pull is not None
        if "body" in body:
            self._check_body_length("PullRequest", body["body"])
            issue.body = body["body"]
        if "title" in body:
            issue.title = body["title"]
        if "base" in body:
            pull["base_ref"] = body["base"]
        if "maintainer_can_modify" in body:
            pull["maintainer_can_modify"] = body["maintainer_can_modify"]
        if body.get("state") and body["state"] != issue.state:
            if body["state"] == "open" and pull["merged"]:
                raise ApiError(
                    422,
                    "Validation Failed",
                    [
                        {
                            "resource": "PullRequest",
                            "code": "custom",
                            "message": "Cannot reopen a merged pull request.",
                        }
                    ],
                )
            issue.state = body["state"]
            issue.closed_at = _now_iso() if issue.state == "closed" else None
        issue.updated_at = _now_iso()
        return _Reply(200, self._pull_object(repo, issue))

    # ---- operations: issues and comments -------------------------------------------------

    def _op_issues_get(self, call: _Call) -> _Reply:
        number = call.params["issue_number"]
        issue = self._enter_repo(call, number)
        if issue is None:
            raise ApiError(404, "Not Found")
        return _Reply(200, self._issue_object(call.repo, issue))  # type: ignore[arg-type]

    def _op_issues_list_comments(self, call: _Call) -> _Reply:
        number = call.params["issue_number"]
        issue = self._enter_repo(call, number)
        repo = call.repo
        assert repo is not None
        if issue is None:
            raise ApiError(404, "Not Found")
        since = call.params.get("since")
        items = [
            self._comment_object(repo, c)
            for c in repo.comments.values()
            if c["number"] == number and (since is None or c["updated_at"] >= since)
        ]
        return self._page(call, items)

    def _op_issues_create_comment(self, call: _Call) -> _Reply:
        number = call.params["issue_number"]
        issue = self._enter_repo(call, number)
        repo = call.repo
        assert repo is not None
        if issue is None:
            raise ApiError(404, "Not Found")
        self._check_body_length("IssueComment", call.body["body"])
        comment = self._new_comment(repo, number, call.body["body"], self._bot["login"])
        comment["via_app"] = True
        return _Reply(201, self._comment_object(repo, comment))

    def _comment(self, call: _Call) -> dict[str, Any]:
        repo = self._repos.get(f"{call.params['owner']}/{call.params['repo']}".lower())
        comment = repo.comments.get(call.params["comment_id"]) if repo else None
        number = comment["number"] if comment else None
        self._enter_repo(call, number)
        if comment is None:
            raise ApiError(404, "Not Found")
        return comment

    def _op_issues_get_comment(self, call: _Call) -> _Reply:
        comment = self._comment(call)
        return _Reply(200, self._comment_object(call.repo, comment))  # type: ignore[arg-type]

    def _op_issues_update_comment(self, call: _Call) -> _Reply:
        comment = self._comment(call)
        self._check_body_length("IssueComment", call.body["body"])
        comment["body"] = call.body["body"]
        comment["updated_at"] = _now_iso()
        return _Reply(200, self._comment_object(call.repo, comment))  # type: ignore[arg-type]

    def _op_reactions_create_for_pull_request_review_comment(self, call: _Call) -> _Reply:
        repo = self._repos.get(f"{call.params['owner']}/{call.params['repo']}".lower())
        comment = repo.review_comments.get(call.params["comment_id"]) if repo else None
        self._enter_repo(call, comment["number"] if comment else None)
        if comment is None:
            raise ApiError(404, "Not Found")
        return self._react(comment, call.body["content"])

    def _op_reactions_create_for_issue_comment(self, call: _Call) -> _Reply:
        return self._react(self._comment(call), call.body["content"])

    def _react(self, comment: dict[str, Any], content: str) -> _Reply:
        """One reaction of the App's per comment and content, as on GitHub: 201 when new,
        200 with the existing one when it is already there."""
        for reaction in comment["reactions"]:
            if reaction["content"] == content and reaction["user"] == self._bot["login"]:
                return _Reply(200, self._reaction_object(reaction))
        reaction = {
            "id": self._new_id(),
            "user": self._bot["login"],
            "content": content,
            "created_at": _now_iso(),
        }
        comment["reactions"].append(reaction)
        return _Reply(201, self._reaction_object(reaction))

    # ---- operations: check runs ----------------------------------------------------------

    def _op_checks_create(self, call: _Call) -> _Reply:
        self._enter_repo(call)
        repo = call.repo
        assert repo is not None
        self._check_run_rules(call.body)
        run = self._new_check_run(repo, call.body)
        return _Reply(201, self._check_run_object(repo, run))

    def _check_run_rules(self, body: dict[str, Any]) -> None:
        output = body.get("output") or {}
        for key in ("summary", "text"):
            if len(output.get(key) or "") > 65535:
                raise ApiError(
                    422,
                    "Invalid request.\n\n"
                    f"For 'properties/{key}', the value is longer than 65535 characters.",
                )
        if body.get("status") == "completed" and not body.get("conclusion"):
            raise ApiError(422, 'Invalid request.\n\n"conclusion" wasn\'t supplied.')

    def _new_check_run(self, repo: _Repo, body: dict[str, Any]) -> dict[str, Any]:
        now = _now_iso()
        status = "completed" if body.get("conclusion") else body.get("status", "queued")
        run = {
            "id": self._new_id(),
            "name": body["name"],
            "head_sha": body["head_sha"],
            "status": status,
            "conclusion": body.get("conclusion"),
            "started_at": body.get("started_at", now),
            "completed_at": body.get("completed_at", now if status == "completed" else None),
            "details_url": body.get("details_url"),
            "external_id": body.get("external_id", ""),
            "output": dict(body.get("output") or {}),
            "app_slug": self.app_slug,
            "check_suite_id": self._new_id(),
        }
        repo.check_runs[run["id"]] = run
        return run

    def _check_run(self, call: _Call) -> dict[str, Any]:
        self._enter_repo(call)
        assert call.repo is not None
        run = call.repo.check_runs.get(call.params["check_run_id"])
        if run is None:
            raise ApiError(404, "Not Found")
        return run

    def _op_checks_get(self, call: _Call) -> _Reply:
        run = self._check_run(call)
        return _Reply(200, self._check_run_object(call.repo, run))  # type: ignore[arg-type]

    def _op_checks_update(self, call: _Call) -> _Reply:
        run = self._check_run(call)
        if run["app_slug"] != self.app_slug:
            raise ApiError(
                403, "Invalid app_id: a check run can only be modified by the App that created it"
            )
        body = call.body or {}
        self._check_run_rules(body)
        for key in ("name", "details_url", "external_id", "started_at", "completed_at"):
            if key in body:
                run[key] = body[key]
        if "status" in body:
            run["status"] = body["status"]
        if body.get("conclusion"):
            run["conclusion"] = body["conclusion"]
            run["status"] = "completed"
        if run["status"] == "completed" and not run["completed_at"]:
            run["completed_at"] = _now_iso()
        if "output" in body:
            run["output"] = run["output"] | body["output"]
        return _Reply(200, self._check_run_object(call.repo, run))  # type: ignore[arg-type]

    def _op_checks_list_for_ref(self, call: _Call) -> _Reply:
        self._enter_repo(call)
        repo = call.repo
        assert repo is not None
        ref = call.params["ref"]
        sha = self._resolve_ref(repo, ref) or ref
        runs = [r for r in repo.check_runs.values() if r["head_sha"] == sha]
        if call.params.get("check_name"):
            runs = [r for r in runs if r["name"] == call.params["check_name"]]
        if call.params.get("status"):
            runs = [r for r in runs if r["status"] == call.params["status"]]
        if call.params.get("filter", "latest") == "latest":
            latest: dict[str, dict[str, Any]] = {}
            for run in runs:
                latest[run["name"]] = run
            runs = list(latest.values())
        objects = [self._check_run_object(repo, r) for r in runs]
        reply = self._page(call, objects)
        reply.body = {"total_count": len(objects), "check_runs": reply.body}
        return reply

    # ---- operations: git data ------------------------------------------------------------

    def _op_repos_get_content(self, call: _Call) -> _Reply:
        self._enter_repo(call)
        repo = call.repo
        assert repo is not None
        ref = call.params.get("ref") or repo.default_branch
        path = call.params["path"].strip("/")
        data = self._read_file(repo, ref, path)
        if data is not None:
            return _Reply(200, self._content_object(repo, ref, path, data))
        entries = self._list_dir(repo, ref, path)
        if not entries:
            raise ApiError(404, "Not Found")
        return _Reply(
            200,
            [
                self._content_object(
                    repo, ref, p, d, kind="dir" if d is None else "file", listing=True
                )
                for p, d in entries
            ],
        )

    def _op_repos_get_branch(self, call: _Call) -> _Reply:
        self._enter_repo(call)
        repo = call.repo
        assert repo is not None
        branch = call.params["branch"]
        sha = self._branch_sha(repo, branch)
        if sha is None:
            raise ApiError(404, "Branch not found")
        api = f"{self.url}/repos/{repo.full_name}/branches/{branch}"
        body = deep_merge(
            self.description.skeleton("branch-with-protection"),
            {
                "name": branch,
                "commit": self._commit_object(repo, sha),
                "_links": {"self": api, "html": f"{self._html(repo)}/tree/{branch}"},
                "protected": False,
                "protection": {"enabled": False},
                "protection_url": f"{api}/protection",
            },
        )
        return _Reply(200, self._localize(body))

    def _op_git_get_ref(self, call: _Call) -> _Reply:
        self._enter_repo(call)
        repo = call.repo
        assert repo is not None
        ref = call.params["ref"]
        if not ref.startswith("heads/"):
            raise ApiError(404, "Not Found")
        sha = self._branch_sha(repo, ref[len("heads/") :])
        if sha is None:
            raise ApiError(404, "Not Found")
        api = f"{self.url}/repos/{repo.full_name}"
        return _Reply(
            200,
            {
                "ref": f"refs/{ref}",
                "node_id": _node_id("Ref", repo.id),
                "url": f"{api}/git/refs/{ref}",
                "object": {"type": "commit", "sha": sha, "url": f"{api}/git/commits/{sha}"},
            },
        )

    def _op_repos_get_commit(self, call: _Call) -> _Reply:
        self._enter_repo(call)
        repo = call.repo
        assert repo is not None
        sha = self._resolve_ref(repo, call.params["ref"])
        if sha is None:
            raise ApiError(422, f"No commit found for SHA: {call.params['ref']}")
        return _Reply(200, self._commit_object(repo, sha))

    def _op_git_get_commit(self, call: _Call) -> _Reply:
        self._enter_repo(call)
        repo = call.repo
        assert repo is not None
        sha = call.params["commit_sha"]
        info = self._commit_info(repo, sha)
        if info is None:
            raise ApiError(404, "Not Found")
        api = f"{self.url}/repos/{repo.full_name}/git/commits"
        person = {"name": info["author"], "email": info["email"], "date": info["date"]}
        body = deep_merge(
            self.description.skeleton("git-commit"),
            {
                "sha": sha,
                "node_id": _node_id("Commit", sha),
                "url": f"{api}/{sha}",
                "html_url": f"{self._html(repo)}/commit/{sha}",
                "author": person,
                "committer": person,
                "message": info["message"],
                "tree": {
                    "sha": info["tree"],
                    "url": f"{self.url}/repos/{repo.full_name}/git/trees/{info['tree']}",
                },
                "parents": [
                    {"sha": p, "url": f"{api}/{p}", "html_url": f"{self._html(repo)}/commit/{p}"}
                    for p in info["parents"]
                ],
                "verification": {
                    "verified": False,
                    "reason": "unsigned",
                    "signature": None,
                    "payload": None,
                    "verified_at": None,
                },
            },
        )
        return _Reply(200, body)

    # ---- operations: iterating on Loopwright's own pull request --------------------------

    def _op_pulls_list_commits(self, call: _Call) -> _Reply:
        """The pull request's commits, oldest first: those on its head and not on its base
        (GitHub lists at most 250)."""
        self._enter_repo(call)
        repo = call.repo
        assert repo is not None
        pull = self._pull(call).pull
        assert pull is not None
        source = self._repos[pull["head_repo"].lower()]
        base = self._branch_sha(repo, pull["base_ref"])
        listed = self._git(
            source, "rev-list", "--reverse", pull["head_sha"], *([f"^{base}"] if base else [])
        )
        shas = (listed or "").split()[:250]
        return self._page(call, [self._commit_object(source, sha) for sha in shas])

    # ---- state helpers -------------------------------------------------------------------

    def _new_id(self) -> int:
        self._next_id += 1
        return self._next_id

    def _repo(self, full_name: str) -> _Repo:
        try:
            return self._repos[full_name.lower()]
        except KeyError:
            raise KeyError(f"no repository {full_name!r}; add it with add_repo()") from None

    def _new_issue(self, repo: _Repo, title: str, body: str | None, user: str) -> _Issue:
        self.add_user(user)
        now = _now_iso()
        issue = _Issue(
            number=repo.next_number,
            id=self._new_id(),
            title=title,
            body=body,
            user=user,
            state="open",
            created_at=now,
            updated_at=now,
        )
        repo.next_number += 1
        repo.issues[issue.number] = issue
        return issue

    def _open_pull(
        self,
        repo: _Repo,
        source: _Repo,
        *,
        head_ref: str,
        head_sha: str,
        base_ref: str,
        title: str,
        body: str | None,
        user: str,
        state: str,
        merged: bool,
        draft: bool,
        maintainer_can_modify: bool = True,
    ) -> _Issue:
        issue = self._new_issue(repo, title, body, user)
        issue.state = "closed" if merged else state
        issue.closed_at = _now_iso() if issue.state == "closed" else None
        issue.pull = {
            "id": self._new_id(),
            "head_ref": head_ref,
            "head_sha": head_sha,
            "head_repo": source.full_name,
            "base_ref": base_ref,
            "draft": draft,
            "merged": merged,
            "maintainer_can_modify": maintainer_can_modify,
        }
        return issue

    def _new_comment(self, repo: _Repo, number: int, body: str, user: str) -> dict[str, Any]:
        self.add_user(user)
        now = _now_iso()
        comment = {
            "id": self._new_id(),
            "number": number,
            "body": body,
            "user": user,
            "created_at": now,
            "updated_at": now,
            "reactions": [],
            "via_app": False,
        }
        repo.comments[comment["id"]] = comment
        repo.issues[number].updated_at = now
        return comment

    def _check_body_length(self, resource: str, body: str | None) -> None:
        if body is not None and len(body) > _MAX_BODY:
            raise ApiError(
                422,
                "Validation Failed",
                [
                    {
                        "resource": resource,
                        "code": "custom",
                        "field": "body",
                        "message": f"body is too long (maximum is {_MAX_BODY} characters)",
                    }
                ],
            )

    def _git(self, repo: _Repo, *args: str) -> str | None:
        if repo.git_dir is None:
            return None
        proc = subprocess.run(
            ["git", "--git-dir", str(repo.git_dir), *args],
            capture_output=True,
            check=False,
        )
        return proc.stdout.decode("utf-8", "replace") if proc.returncode == 0 else None

    def _git_rev(self, repo: _Repo, ref: str) -> str | None:
        out = self._git(repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
        return out.strip() if out else None

    def _branch_sha(self, repo: _Repo, branch: str) -> str | None:
        if branch in repo.branches:
            return repo.branches[branch]
        return self._git_rev(repo, f"refs/heads/{branch}")

    def _resolve_ref(self, repo: _Repo, ref: str) -> str | None:
        """A branch name, `heads/<branch>` or commit SHA as a commit SHA, or None."""
        for candidate in (ref, ref.removeprefix("heads/").removeprefix("refs/heads/")):
            sha = self._branch_sha(repo, candidate)
            if sha:
                return sha
        if ref in repo.commits:
            return ref
        return self._git_rev(repo, ref) if len(ref) >= 4 else None

    def _read_file(self, repo: _Repo, ref: str, path: str) -> bytes | None:
        branch = self._branch_for(repo, ref)
        if branch is not None and path in repo.files.get(branch, {}):
            return repo.files[branch][path]
        if repo.git_dir is None or not path:
            return None
        kind = self._git(repo, "cat-file", "-t", f"{ref}:{path}")
        if kind is None or kind.strip() != "blob":
            return None
        proc = subprocess.run(
            ["git", "--git-dir", str(repo.git_dir), "cat-file", "blob", f"{ref}:{path}"],
            capture_output=True,
            check=False,
        )
        return proc.stdout if proc.returncode == 0 else None

    def _list_dir(self, repo: _Repo, ref: str, path: str) -> list[tuple[str, bytes | None]]:
        prefix = f"{path}/" if path else ""
        found: dict[str, bytes | None] = {}
        branch = self._branch_for(repo, ref)
        for file_path, data in repo.files.get(branch or "", {}).items():
            if file_path.startswith(prefix):
                rest = file_path[len(prefix) :]
                head, slash, _ = rest.partition("/")
                found[prefix + head] = None if slash else data
        listing = self._git(repo, "ls-tree", f"{ref}:{path}" if path else ref)
        for line in (listing or "").splitlines():
            meta, _, name = line.partition("\t")
            entry = prefix + name
            if entry not in found:
                found[entry] = (
                    None
                    if meta.split()[1] == "tree"
                    else (self._read_file(repo, ref, entry) or b"")
                )
        return sorted(found.items())

    def _branch_for(self, repo: _Repo, ref: str) -> str | None:
        ref = ref.removeprefix("refs/heads/").removeprefix("heads/")
        if ref in repo.files or ref in repo.branches:
            return ref
        for branch, sha in repo.branches.items():
            if sha == ref:
                return branch
        return None

    def _commit_info(self, repo: _Repo, sha: str) -> dict[str, Any] | None:
        if sha in repo.commits:
            info = repo.commits[sha]
            return {
                "message": info["message"],
                "parents": info["parents"],
                "author": "Octo Cat",
                "email": "octocat@github.com",
                "date": _now_iso(),
                "tree": hashlib.sha1(f"tree:{sha}".encode()).hexdigest(),
            }
        out = self._git(
            repo, "show", "-s", "--format=%H%x00%P%x00%an%x00%ae%x00%aI%x00%T%x00%B", sha
        )
        if not out:
            return None
        full, parents, name, email, date, tree, message = out.split("\x00", 6)
        return {
            "message": message.rstrip("\n"),
            "parents": parents.split(),
            "author": name,
            "email": email,
            "date": datetime.fromisoformat(date).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "tree": tree,
            "sha": full,
        }

    # ---- response objects ----------------------------------------------------------------

    def _html(self, repo: _Repo) -> str:
        return f"{self.html_base}/{repo.full_name}"

    def _localize(self, value: Any) -> Any:
        """Point skeleton URLs taken from the description's examples at this server."""
        if isinstance(value, str):
            return value.replace("https://api.github.com", self.url)
        if isinstance(value, dict):
            return {k: self._localize(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self._localize(v) for v in value]
        return value

    def _user_object(self, login: str) -> dict[str, Any]:
        user = self.add_user(login)
        api = f"{self.url}/users/{user['login']}"
        return {
            "login": user["login"],
            "id": user["id"],
            "node_id": _node_id("User", user["id"]),
            "avatar_url": f"https://avatars.githubusercontent.com/u/{user['id']}?v=4",
            "gravatar_id": "",
            "url": api,
            "html_url": f"{self.html_base}/{user['login']}",
            "followers_url": f"{api}/followers",
            "following_url": f"{api}/following{{/other_user}}",
            "gists_url": f"{api}/gists{{/gist_id}}",
            "starred_url": f"{api}/starred{{/owner}}{{/repo}}",
            "subscriptions_url": f"{api}/subscriptions",
            "organizations_url": f"{api}/orgs",
            "repos_url": f"{api}/repos",
            "events_url": f"{api}/events{{/privacy}}",
            "received_events_url": f"{api}/received_events",
            "type": user["type"],
            "user_view_type": "public",
            "site_admin": False,
        }

    def _app_object(self) -> dict[str, Any]:
        owner = next(iter(self._installations.values()), None)
        body = deep_merge(
            self.description.skeleton("integration"),
            {
                "id": self.app_id,
                "slug": self.app_slug,
                "client_id": f"Iv1.{self.app_id:016x}",
                "node_id": _node_id("Integration", self.app_id),
                "owner": self._user_object(owner.account if owner else "octocat"),
                "name": self.app_slug.capitalize(),
                "description": "",
                "external_url": "https://example.com",
                "html_url": f"{self.html_base}/apps/{self.app_slug}",
                "created_at": "2024-01-01T00:00:00Z",
                "updated_at": "2024-01-01T00:00:00Z",
                "permissions": {
                    "metadata": "read",
                    "contents": "write",
                    "pull_requests": "write",
                    "checks": "write",
                    "issues": "write",
                    "actions": "read",
                },
                "events": ["check_run", "check_suite", "workflow_run", "issue_comment"],
                "installations_count": len(self._installations),
            },
        )
        return self._localize(body)

    def _installation_object(self, installation: _Installation) -> dict[str, Any]:
        account = self._user_object(installation.account)
        api = f"{self.url}/app/installations/{installation.id}"
        body = deep_merge(
            self.description.skeleton("installation"),
            {
                "id": installation.id,
                "account": account,
                "repository_selection": "all" if installation.repositories is None else "selected",
                "access_tokens_url": f"{api}/access_tokens",
                "repositories_url": f"{self.url}/installation/repositories",
                "html_url": f"{self.html_base}/settings/installations/{installation.id}",
                "app_id": self.app_id,
                "app_slug": self.app_slug,
                "target_id": account["id"],
                "target_type": account["type"],
                "permissions": installation.permissions,
                "events": installation.events,
                "created_at": installation.created_at,
                "updated_at": installation.created_at,
                "single_file_name": None,
                "suspended_by": None,
                "suspended_at": None,
            },
        )
        return self._localize(body)

    def _repo_object(self, repo: _Repo, *, full: bool) -> dict[str, Any]:
        api = f"{self.url}/repos/{repo.full_name}"
        html = self._html(repo)
        overlay: dict[str, Any] = {
            "id": repo.id,
            "node_id": _node_id("Repository", repo.id),
            "name": repo.name,
            "full_name": repo.full_name,
            "owner": self._user_object(repo.owner),
            "private": repo.private,
            "visibility": "private" if repo.private else "public",
            "html_url": html,
            "description": None,
            "fork": repo.fork_of is not None,
            "url": api,
            "clone_url": repo.clone_url,
            "git_url": f"git://github.com/{repo.full_name}.git",
            "ssh_url": f"git@github.com:{repo.full_name}.git",
            "svn_url": html,
            "mirror_url": None,
            "homepage": None,
            "language": None,
            "default_branch": repo.default_branch,
            "archived": False,
            "disabled": False,
            "created_at": repo.created_at,
            "updated_at": repo.created_at,
            "pushed_at": repo.created_at,
            "topics": [],
        }
        for name in (
            "forks",
            "issues",
            "pulls",
            "branches",
            "commits",
            "contents",
            "hooks",
            "tags",
            "teams",
            "events",
            "languages",
            "stargazers",
            "subscribers",
            "subscription",
            "contributors",
            "deployments",
            "downloads",
            "merges",
            "milestones",
            "releases",
            "labels",
            "notifications",
            "collaborators",
            "assignees",
            "comments",
            "git_refs",
            "git_tags",
            "git_commits",
            "trees",
            "blobs",
            "statuses",
            "archive",
            "compare",
            "keys",
            "issue_events",
            "issue_comment",
        ):
            key = f"{name}_url"
            overlay[key] = f"{api}/{name.replace('_', '/') if name.startswith('git_') else name}"
        base = self.description.skeleton("full-repository" if full else "repository")
        if full and repo.fork_of:
            parent = self._repos.get(repo.fork_of.lower())
            if parent is not None:
                overlay["parent"] = self._repo_object(parent, full=False)
                overlay["source"] = overlay["parent"]
        return self._localize(deep_merge(base, overlay))

    def _issue_urls(self, repo: _Repo, number: int) -> dict[str, str]:
        api = f"{self.url}/repos/{repo.full_name}"
        return {
            "url": f"{api}/issues/{number}",
            "repository_url": api,
            "labels_url": f"{api}/issues/{number}/labels{{/name}}",
            "comments_url": f"{api}/issues/{number}/comments",
            "events_url": f"{api}/issues/{number}/events",
            "html_url": f"{self._html(repo)}/issues/{number}",
        }

    def _issue_object(self, repo: _Repo, issue: _Issue) -> dict[str, Any]:
        overlay: dict[str, Any] = {
            **self._issue_urls(repo, issue.number),
            "id": issue.id,
            "node_id": _node_id("Issue", issue.id),
            "number": issue.number,
            "title": issue.title,
            "body": issue.body,
            "user": self._user_object(issue.user),
            "state": issue.state,
            "locked": False,
            "comments": sum(1 for c in repo.comments.values() if c["number"] == issue.number),
            "created_at": issue.created_at,
            "updated_at": issue.updated_at,
            "closed_at": issue.closed_at,
            "author_association": self._association(repo, issue.user),
            "labels": [],
            "assignees": [],
        }
        if issue.pull is not None:
            api = f"{self.url}/repos/{repo.full_name}/pulls/{issue.number}"
            overlay["pull_request"] = {
                "url": api,
                "html_url": f"{self._html(repo)}/pull/{issue.number}",
                "diff_url": f"{self._html(repo)}/pull/{issue.number}.diff",
                "patch_url": f"{self._html(repo)}/pull/{issue.number}.patch",
                "merged_at": issue.closed_at if issue.pull["merged"] else None,
            }
        return self._localize(deep_merge(self.description.skeleton("issue"), overlay))

    def _association(self, repo: _Repo, login: str) -> str:
        if login.lower() == repo.owner.lower():
            return "OWNER"
        role = repo.roles.get(login.lower(), "none")
        return "COLLABORATOR" if role != "none" else "NONE"

    def _pull_object(self, repo: _Repo, issue: _Issue, *, simple: bool = False) -> dict[str, Any]:
        pull = issue.pull
        assert pull is not None
        number = issue.number
        api = f"{self.url}/repos/{repo.full_name}"
        html = f"{self._html(repo)}/pull/{number}"
        source = self._repos[pull["head_repo"].lower()]
        base_sha = self._branch_sha(repo, pull["base_ref"]) or "0" * 40

        def side(ref: str, sha: str, side_repo: _Repo) -> dict[str, Any]:
            return {
                "label": f"{side_repo.owner}:{ref}",
                "ref": ref,
                "sha": sha,
                "user": self._user_object(side_repo.owner),
                "repo": self._repo_object(side_repo, full=False),
            }

        merged_at = issue.closed_at if pull["merged"] else None
        overlay: dict[str, Any] = {
            "url": f"{api}/pulls/{number}",
            "id": pull["id"],
            "node_id": _node_id("PullRequest", pull["id"]),
            "html_url": html,
            "diff_url": f"{html}.diff",
            "patch_url": f"{html}.patch",
            "issue_url": f"{api}/issues/{number}",
            "commits_url": f"{api}/pulls/{number}/commits",
            "review_comments_url": f"{api}/pulls/{number}/comments",
            "review_comment_url": f"{api}/pulls/comments{{/number}}",
            "comments_url": f"{api}/issues/{number}/comments",
            "statuses_url": f"{api}/statuses/{pull['head_sha']}",
            "number": number,
            "state": issue.state,
            "locked": False,
            "title": issue.title,
            "body": issue.body,
            "user": self._user_object(issue.user),
            "labels": [],
            "milestone": None,
            "active_lock_reason": None,
            "created_at": issue.created_at,
            "updated_at": issue.updated_at,
            "closed_at": issue.closed_at,
            "merged_at": merged_at,
            "merge_commit_sha": None,
            "assignee": None,
            "assignees": [],
            "requested_reviewers": [],
            "requested_teams": [],
            "head": side(pull["head_ref"], pull["head_sha"], source),
            "base": side(pull["base_ref"], base_sha, repo),
            "_links": {
                name: {"href": href}
                for name, href in {
                    "self": f"{api}/pulls/{number}",
                    "html": html,
                    "issue": f"{api}/issues/{number}",
                    "comments": f"{api}/issues/{number}/comments",
                    "review_comments": f"{api}/pulls/{number}/comments",
                    "review_comment": f"{api}/pulls/comments{{/number}}",
                    "commits": f"{api}/pulls/{number}/commits",
                    "statuses": f"{api}/statuses/{pull['head_sha']}",
                }.items()
            },
            "author_association": self._association(repo, issue.user),
            "auto_merge": None,
            "draft": pull["draft"],
        }
        if not simple:
            overlay |= {
                "merged": pull["merged"],
                "mergeable": None,
                "rebaseable": None,
                "mergeable_state": "unknown",
                "merged_by": None,
                "comments": sum(1 for c in repo.comments.values() if c["number"] == number),
                "review_comments": 0,
                "maintainer_can_modify": pull["maintainer_can_modify"],
                "commits": 1,
                "additions": 0,
                "deletions": 0,
                "changed_files": 0,
            }
        schema = "pull-request-simple" if simple else "pull-request"
        return self._localize(deep_merge(self.description.skeleton(schema), overlay))

    def _comment_object(self, repo: _Repo, comment: dict[str, Any]) -> dict[str, Any]:
        api = f"{self.url}/repos/{repo.full_name}"
        number = comment["number"]
        kind = "pull" if repo.issues[number].pull else "issues"
        counts = {
            c: 0 for c in ("+1", "-1", "laugh", "confused", "heart", "hooray", "eyes", "rocket")
        }
        for reaction in comment["reactions"]:
            counts[reaction["content"]] += 1
        body: dict[str, Any] = {
            "id": comment["id"],
            "node_id": _node_id("IssueComment", comment["id"]),
            "url": f"{api}/issues/comments/{comment['id']}",
            "html_url": f"{self._html(repo)}/{kind}/{number}#issuecomment-{comment['id']}",
            "body": comment["body"],
            "user": self._user_object(comment["user"]),
            "created_at": comment["created_at"],
            "updated_at": comment["updated_at"],
            "issue_url": f"{api}/issues/{number}",
            "author_association": self._association(repo, comment["user"]),
            "reactions": {
                "url": f"{api}/issues/comments/{comment['id']}/reactions",
                "total_count": sum(counts.values()),
                **counts,
            },
        }
        if comment.get("via_app"):
            body["performed_via_github_app"] = self._app_object()
        return body

    def _reaction_object(self, reaction: dict[str, Any]) -> dict[str, Any]:
        return {
            "id": reaction["id"],
            "node_id": _node_id("Reaction", reaction["id"]),
            "user": self._user_object(reaction["user"]),
            "content": reaction["content"],
            "created_at": reaction["created_at"],
        }

    def _check_run_object(self, repo: _Repo, run: dict[str, Any]) -> dict[str, Any]:
        api = f"{self.url}/repos/{repo.full_name}"
        output = run["output"]
        app = self._app_object()
        if run["app_slug"] != self.app_slug:
            app = app | {"slug": run["app_slug"], "id": 15368, "name": run["app_slug"]}
        pulls = [
            {
                "id": issue.pull["id"],
                "number": issue.number,
                "url": f"{api}/pulls/{issue.number}",
                "head": {
                    "ref": issue.pull["head_ref"],
                    "sha": issue.pull["head_sha"],
                    "repo": {"id": repo.id, "url": api, "name": repo.name},
                },
                "base": {
                    "ref": issue.pull["base_ref"],
                    "sha": self._branch_sha(repo, issue.pull["base_ref"]) or "0" * 40,
                    "repo": {"id": repo.id, "url": api, "name": repo.name},
                },
            }
            for issue in repo.issues.values()
            if issue.pull and issue.state == "open" and issue.pull["head_sha"] == run["head_sha"]
        ]
        return {
            "id": run["id"],
            "head_sha": run["head_sha"],
            "node_id": _node_id("CheckRun", run["id"]),
            "external_id": run["external_id"],
            "url": f"{api}/check-runs/{run['id']}",
            "html_url": f"{self._html(repo)}/runs/{run['id']}",
            "details_url": run["details_url"],
            "status": run["status"],
            "conclusion": run["conclusion"],
            "started_at": run["started_at"],
            "completed_at": run["completed_at"],
            "output": {
                "title": output.get("title"),
                "summary": output.get("summary"),
                "text": output.get("text"),
                "annotations_count": len(output.get("annotations") or []),
                "annotations_url": f"{api}/check-runs/{run['id']}/annotations",
            },
            "name": run["name"],
            "check_suite": {"id": run["check_suite_id"]},
            "app": app,
            "pull_requests": pulls,
        }

    def _content_object(
        self,
        repo: _Repo,
        ref: str,
        path: str,
        data: bytes | None,
        *,
        kind: str = "file",
        listing: bool = False,
    ) -> dict[str, Any]:
        api = f"{self.url}/repos/{repo.full_name}"
        raw = data or b""
        sha = hashlib.sha1(b"blob %d\x00" % len(raw) + raw).hexdigest()
        self_url = f"{api}/contents/{path}?ref={ref}"
        html = f"{self._html(repo)}/{'blob' if kind == 'file' else 'tree'}/{ref}/{path}"
        git = f"{api}/git/{'blobs' if kind == 'file' else 'trees'}/{sha}"
        body: dict[str, Any] = {
            "type": kind,
            "size": len(raw) if kind == "file" else 0,
            "name": path.rsplit("/", 1)[-1],
            "path": path,
            "sha": sha,
            "url": self_url,
            "git_url": git,
            "html_url": html,
            "download_url": (
                f"https://raw.githubusercontent.com/{repo.full_name}/{ref}/{path}"
                if kind == "file"
                else None
            ),
            "_links": {"self": self_url, "git": git, "html": html},
        }
        if kind == "file" and not listing:
            encoded = base64.b64encode(raw).decode()
            # GitHub wraps the base64 text at 60 columns with trailing newlines.
            body["content"] = "".join(
                encoded[i : i + 60] + "\n" for i in range(0, len(encoded), 60)
            )
            body["encoding"] = "base64"
        return body

    def _commit_object(self, repo: _Repo, sha: str) -> dict[str, Any]:
        info = self._commit_info(repo, sha) or {
            "message": "",
            "parents": [],
            "author": "Octo Cat",
            "email": "octocat@github.com",
            "date": _now_iso(),
            "tree": hashlib.sha1(f"tree:{sha}".encode()).hexdigest(),
        }
        api = f"{self.url}/repos/{repo.full_name}"
        person = {"name": info["author"], "email": info["email"], "date": info["date"]}
        body = deep_merge(
            self.description.skeleton("commit"),
            {
                "sha": sha,
                "node_id": _node_id("Commit", sha),
                "url": f"{api}/commits/{sha}",
                "html_url": f"{self._html(repo)}/commit/{sha}",
                "comments_url": f"{api}/commits/{sha}/comments",
                "commit": {
                    "url": f"{api}/git/commits/{sha}",
                    "author": person,
                    "committer": person,
                    "message": info["message"],
                    "comment_count": 0,
                    "tree": {"sha": info["tree"], "url": f"{api}/git/trees/{info['tree']}"},
                },
                "author": None,
                "committer": None,
                "parents": [
                    {
                        "sha": p,
                        "url": f"{api}/commits/{p}",
                        "html_url": f"{self._html(repo)}/commit/{p}",
                    }
                    for p in info["parents"]
                ],
            },
        )
        return self._localize(body)

    def _page(self, call: _Call, items: list[Any]) -> _Reply:
        """One page of `items` with GitHub's `Link` header."""
        per_page = min(int(call.params.get("per_page", 30)), 100)
        page = max(int(call.params.get("page", 1)), 1)
        last = max((len(items) + per_page - 1) // per_page, 1)
        chunk = items[(page - 1) * per_page : page * per_page]
        headers: dict[str, str] = {}
        if last > 1:
            op = call.match.operation
            path = op.template.format(**call.match.path_params)
            base = self.link_base or self.url
            links = []
            if page < last:
                links.append(f'<{base}{path}?per_page={per_page}&page={page + 1}>; rel="next"')
                links.append(f'<{base}{path}?per_page={per_page}&page={last}>; rel="last"')
            if page > 1:
                links.append(f'<{base}{path}?per_page={per_page}&page={page - 1}>; rel="prev"')
                links.append(f'<{base}{path}?per_page={per_page}&page=1>; rel="first"')
            headers["Link"] = ", ".join(links)
        return _Reply(200, chunk, headers)

    # ---- HTTP ----------------------------------------------------------------------------

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self) -> None:
                super().setup()
                # Headers and body go out in separate writes; without this, Nagle's algorithm
                # and delayed ACKs add ~40 ms to every keep-alive request.
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def log_message(self, format: str, *args: Any) -> None:
                return

            def _serve(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                headers = {k.lower(): v for k, v in self.headers.items()}
                reply = fake._handle(self.command, self.path, headers, raw)
                payload = b"" if reply.body is None else json.dumps(reply.body).encode()
                self.send_response(reply.status)
                self.send_header("Content-Type", "application/json; charset=utf-8")
                self.send_header("Content-Length", str(len(payload)))
                self.send_header("X-GitHub-Media-Type", "github.v3; format=json")
                if not any(k.lower() == "x-github-request-id" for k in reply.headers):
                    self.send_header("X-GitHub-Request-Id", _request_id())
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(payload)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = _serve

        return Handler


def _request_id() -> str:
    return ":".join(secrets.token_hex(n).upper() for n in (2, 2, 3, 3, 4))


def _node_id(kind: str, key: object) -> str:
    return base64.b64encode(f"0:{kind}{key}".encode()).decode().rstrip("=")
