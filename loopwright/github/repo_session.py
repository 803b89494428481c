"""One mission's REST access to one repository: the few reads and writes a mission makes,
each failure turned into a `GitHubError` that names the call and GitHub's answer. Text it
writes (comments, pull requests, check output) is sent as UTF-8: a lone surrogate (a byte
of a name or a patch that is not UTF-8) goes as U+FFFD rather than failing the request."""

from __future__ import annotations

import base64
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, Required, TypedDict

from githubkit import GitHub
from githubkit.exception import GitHubException, RequestFailed

from loopwright.events import encodable
from loopwright.github.client import GitHubError
from loopwright.github.gitops import BOT_EMAIL, MISSION_TRAILER
from loopwright.instructions import RepoInstructions, first_instructions
from loopwright.repo_config import REPO_CONFIG_FILES, RepoConfig, parse_repo_config

Conclusion = Literal["success", "failure", "neutral", "cancelled", "timed_out", "action_required"]


class CheckOutput(TypedDict, total=False):
    title: Required[str]
    summary: Required[str]
    text: str


@dataclass(frozen=True)
class PullInfo:
    number: int
    state: str
    merged: bool
    head_sha: str
    head_ref: str
    head_repo: str | None
    base_ref: str
    html_url: str


class RepoSession:
    """One mission's REST access to one repository."""

    def __init__(self, gh: GitHub[Any], owner: str, name: str, token: str) -> None:
        self.gh = gh
        self.owner = owner
        self.name = name
        self.token = token

    @property
    def repo(self) -> str:
        return f"{self.owner}/{self.name}"

    def _call(self, what: str, fn: Callable[[], Any]) -> Any:
        try:
            return fn()
        except RequestFailed as exc:
            raise GitHubError(
                f"{what} on {self.repo} failed: GitHub answered {exc.response.status_code}"
                f"{_github_message(exc)}"
            ) from None
        except GitHubException as exc:
            raise GitHubError(f"{what} on {self.repo} failed: {exc}") from None

    def permission(self, user: str) -> str:
        """`admin`, `maintain`, `write`, `triage`, `read` or `none`, from the collaborator
        permission endpoint (never from author_association)."""
        try:
            data = _json(
                self.gh.rest.repos.get_collaborator_permission_level(self.owner, self.name, user)
            )
        except RequestFailed as exc:
            if exc.response.status_code == 404:
                return "none"
            raise GitHubError(
                f"reading {user}'s permission on {self.repo} failed: "
                f"GitHub answered {exc.response.status_code}"
            ) from None
        role = (data.get("user") or {}).get("role_name") or data.get("permission") or "none"
        return str(role)

    def pull_data(self, number: int) -> dict[str, Any]:
        """The pull request as the REST API returns it now (for pinning its head)."""
        data: dict[str, Any] = self._call(
            f"reading pull request #{number}",
            lambda: _json(self.gh.rest.pulls.get(self.owner, self.name, number)),
        )
        return data

    def commit_is_loopwrights(self, sha: str) -> bool:
        """Whether Loopwright made commit `sha` (the Action's `commit` delivery pushes onto a
        pull request's own branch, so the branch name alone does not say). A check_run payload
        names no author, so the commit is read back: its author or committer is Loopwright's
        bot identity, or its message carries the mission trailer Loopwright writes."""
        data = self._call(
            f"reading commit {sha[:7]}",
            lambda: _json(self.gh.rest.repos.get_commit(self.owner, self.name, sha)),
        )
        commit = data.get("commit") or {}
        emails = {
            str((commit.get(role) or {}).get("email", "")).lower()
            for role in ("author", "committer")
        }
        message = str(commit.get("message", ""))
        trailer = any(line.startswith(f"{MISSION_TRAILER}:") for line in message.splitlines())
        return BOT_EMAIL.lower() in emails or trailer

    def pull(self, number: int) -> PullInfo:
        return _pull_info(self.pull_data(number))

    def pull_commits(self, number: int) -> list[dict[str, Any]]:
        """The pull request's commits, oldest first, as the REST API lists them (GitHub
        lists at most 250: a longer list is cut there)."""
        commits: list[dict[str, Any]] = []
        for page in range(1, 4):
            data = self._call(
                f"listing the commits of pull request #{number}",
                lambda page=page: _json(  # type: ignore[misc]
                    self.gh.rest.pulls.list_commits(
                        self.owner, self.name, number, per_page=100, page=page
                    )
                ),
            )
            commits += [item for item in data if isinstance(item, dict)]
            if len(data) < 100:
                break
        return commits

    def default_branch(self) -> str:
        data = self._call(
            "reading the repository", lambda: self.gh.rest.repos.get(self.owner, self.name).json()
        )
        return str(data["default_branch"])

    def clone_url(self) -> str:
        """The repository's git URL as the API reports it: the one URL a token is sent to."""
        data = self._call(
            "reading the repository", lambda: self.gh.rest.repos.get(self.owner, self.name).json()
        )
        url = data.get("clone_url")
        if not isinstance(url, str) or not url:
            raise GitHubError(f"the API reports no clone_url for {self.owner}/{self.name}")
        return url

    def read_config(self) -> RepoConfig:
        """The repository config from the default branch only (SECURITY #21)."""
        branch = self.default_branch()
        for path in reversed(REPO_CONFIG_FILES):  # .github/loopwright.yml first
            try:
                data = _json(
                    self.gh.rest.repos.get_content(self.owner, self.name, path, ref=branch)
                )
            except RequestFailed as exc:
                if exc.response.status_code == 404:
                    continue
                raise GitHubError(
                    f"reading {path} on {self.repo} failed: GitHub answered "
                    f"{exc.response.status_code}"
                ) from None
            if not isinstance(data, dict) or data.get("type") != "file":
                continue
            text = base64.b64decode(data.get("content") or "").decode("utf-8", errors="replace")
            return parse_repo_config(text, path)
        return RepoConfig()

    def read_instructions(self, branch: str | None = None) -> RepoInstructions | None:
        """The repository's instruction file (AGENTS.md, then CLAUDE.md, then
        .github/copilot-instructions.md) from the default branch only, like the config:
        a pull request cannot write its own instructions."""
        ref = branch or self.default_branch()

        def read(path: str) -> bytes | None:
            try:
                data = _json(self.gh.rest.repos.get_content(self.owner, self.name, path, ref=ref))
            except RequestFailed as exc:
                if exc.response.status_code == 404:
                    return None
                raise GitHubError(
                    f"reading {path} on {self.repo} failed: GitHub answered "
                    f"{exc.response.status_code}"
                ) from None
            except GitHubException as exc:
                raise GitHubError(f"reading {path} on {self.repo} failed: {exc}") from None
            if not isinstance(data, dict) or data.get("type") != "file":
                return None
            return base64.b64decode(data.get("content") or "")

        return first_instructions(read)

    def start_check(self, head_sha: str, details_url: str | None, external_id: str) -> int:
        data = self._call(
            "creating the check run",
            lambda: self.gh.rest.checks.create(
                self.owner,
                self.name,
                name="Loopwright",
                head_sha=head_sha,
                status="in_progress",
                external_id=external_id,
                details_url=details_url,
                output={"title": "Loopwright is working", "summary": "Reproducing the failure."},
            ).json(),
        )
        return int(data["id"])

    def finish_check(self, check_id: int, conclusion: Conclusion, output: CheckOutput) -> None:
        self._call(
            "completing the check run",
            lambda: self.gh.rest.checks.update(
                self.owner,
                self.name,
                check_id,
                status="completed",
                conclusion=conclusion,
                output={
                    "title": encodable(output["title"]),
                    "summary": encodable(output["summary"]),
                    "text": encodable(output.get("text", "")),
                },
            ),
        )

    def comment(self, number: int, body: str) -> str:
        data = self._call(
            f"commenting on #{number}",
            lambda: self.gh.rest.issues.create_comment(
                self.owner, self.name, number, data={"body": encodable(body)}
            ).json(),
        )
        return str(data.get("html_url", ""))

    def post_comment(self, number: int, body: str) -> tuple[int, str]:
        """Comment on #`number`; the new comment's id (to edit it later) and its address."""
        data = self._call(
            f"commenting on #{number}",
            lambda: self.gh.rest.issues.create_comment(
                self.owner, self.name, number, data={"body": encodable(body)}
            ).json(),
        )
        return int(data["id"]), str(data.get("html_url", ""))

    def edit_comment(self, comment_id: int, body: str) -> None:
        self._call(
            f"editing comment {comment_id}",
            lambda: self.gh.rest.issues.update_comment(
                self.owner, self.name, comment_id, data={"body": encodable(body)}
            ),
        )

    def comment_body(self, comment_id: int) -> str:
        data = self._call(
            f"reading comment {comment_id}",
            lambda: _json(self.gh.rest.issues.get_comment(self.owner, self.name, comment_id)),
        )
        return str(data.get("body") or "")

    def react(self, comment_id: int, content: Literal["eyes", "+1", "rocket"] = "eyes") -> None:
        """React to an issue or pull-request comment (👀: Loopwright has seen it)."""
        self._call(
            f"reacting to comment {comment_id}",
            lambda: self.gh.rest.reactions.create_for_issue_comment(
                self.owner, self.name, comment_id, data={"content": content}
            ),
        )

    def react_to_review_comment(
        self, comment_id: int, content: Literal["eyes", "+1", "rocket"] = "eyes"
    ) -> None:
        """React to a comment on a pull request's diff (👀: Loopwright has seen it)."""
        self._call(
            f"reacting to review comment {comment_id}",
            lambda: self.gh.rest.reactions.create_for_pull_request_review_comment(
                self.owner, self.name, comment_id, data={"content": content}
            ),
        )

    def pulls_for_branch(self, branch: str) -> list[PullInfo]:
        data = self._call(
            f"listing pull requests for {branch}",
            lambda: self.gh.rest.pulls.list(
                self.owner, self.name, head=f"{self.owner}:{branch}", state="all"
            ).json(),
        )
        return [_pull_info(item) for item in data]

    def open_pull(self, branch: str, base: str, title: str, body: str) -> PullInfo:
        data = self._call(
            "opening the pull request",
            lambda: self.gh.rest.pulls.create(
                self.owner,
                self.name,
                data={
                    "title": encodable(title),
                    "head": branch,
                    "base": base,
                    "body": encodable(body),
                },
            ).json(),
        )
        return _pull_info(data)

    def update_pull(self, number: int, title: str, body: str) -> PullInfo:
        data = self._call(
            f"updating pull request #{number}",
            lambda: self.gh.rest.pulls.update(
                self.owner,
                self.name,
                number,
                data={"title": encodable(title), "body": encodable(body)},
            ).json(),
        )
        return _pull_info(data)


PULL_COMMITS_LIMIT = 250
"""The most commits GitHub lists for one pull request."""


def loopwright_authored(commit: dict[str, Any]) -> bool:
    """Whether a commit as the REST API lists it is one Loopwright made: author and
    committer are its bot identity and the message carries its mission trailer. Stricter
    than `RepoSession.commit_is_loopwrights`, because here a mistake in Loopwright's favour
    would let it take over a branch someone else worked on (a human's rebase keeps the
    author but not the committer)."""
    data = commit.get("commit") or {}
    emails = [
        str((data.get(role) or {}).get("email", "")).lower() for role in ("author", "committer")
    ]
    message = str(data.get("message", ""))
    trailer = any(line.startswith(f"{MISSION_TRAILER}:") for line in message.splitlines())
    return trailer and all(email == BOT_EMAIL.lower() for email in emails)


def _github_message(exc: RequestFailed) -> str:
    """GitHub's own explanation (message and validation errors), when it sent one."""
    try:
        data = exc.response.json()
    except ValueError:
        return ""
    if not isinstance(data, dict):
        return ""
    parts = [str(data.get("message") or "")]
    for error in data.get("errors") or []:
        if isinstance(error, dict):
            parts.append(str(error.get("message") or f"{error.get('field')} {error.get('code')}"))
    text = "; ".join(p for p in parts if p)
    return f" ({text[:300]})" if text else ""


def _json(response: Any) -> Any:
    """The response body as plain JSON data (githubkit's typed dicts are not needed here)."""
    return response.json()


def _pull_info(data: dict[str, Any]) -> PullInfo:
    head = data.get("head") or {}
    head_repo = head.get("repo") or {}
    return PullInfo(
        number=int(data["number"]),
        state=str(data.get("state", "open")),
        merged=bool(data.get("merged") or data.get("merged_at")),
        head_sha=str(head.get("sha", "")),
        head_ref=str(head.get("ref", "")),
        head_repo=head_repo.get("full_name"),
        base_ref=str((data.get("base") or {}).get("ref", "")),
        html_url=str(data.get("html_url", "")),
    )
