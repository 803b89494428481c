"""Delivering a verified fix to GitHub: a pull request, a commit, or a comment.

Shared by the App and the Action. Forks never get a push to the base repository; a
closed pull request is not reopened unless a maintainer asked again; a branch carrying
someone else's commits is never pushed over.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from loopwright.events import EventBus
from loopwright.github import render, tracking
from loopwright.github.gitops import (
    GitError,
    commit_patch,
    push_branch,
    push_fast_forward,
    remote_branch,
)
from loopwright.github.iterate import iteration_note
from loopwright.github.service import GitHubError, RepoSession
from loopwright.missions.delivery import DeliveryOutcome
from loopwright.missions.result import MissionResult
from loopwright.redaction import Redactor
from loopwright.request import MissionRequest
from loopwright.sandbox.workspace import WorkspaceError

DeliveryMode = Literal["pull-request", "commit", "comment"]


@dataclass(frozen=True)
class Delivered:
    kind: Literal["pull_request", "commit", "comment", "skipped", "failed"]
    url: str | None
    reason: str = ""


def fix_branch(request: MissionRequest) -> str:
    """One deterministic branch per target, so a re-run updates the same pull request."""
    return f"loopwright/fix-{request.pr_number or request.head_sha[:12]}"


class GitHubDelivery:
    """The deliver stage of an App or Action mission (a `Deliverer`): a verified result is
    delivered from the tree `checkout()` returns, a clean clone at `request.head_sha`;
    every fetch and push goes to `request.clone_url`, the URL the host computed. What
    happened is in `delivered` afterwards; a mission that was not verified never calls it."""

    def __init__(
        self,
        *,
        request: MissionRequest,
        session: RepoSession,
        checkout: Callable[[], Path],
        bus: EventBus,
        redactor: Redactor,
        mission_url: str | None,
        mode: DeliveryMode = "pull-request",
        link_screenshot: bool = True,
        tracked: bool = False,
    ) -> None:
        self.request = request
        self.session = session
        self.checkout = checkout
        self.bus = bus
        self.redactor = redactor
        self.mission_url = mission_url
        self.mode = mode
        self.link_screenshot = link_screenshot
        self.tracked = tracked
        """The mission has a tracking comment, which tells the outcome: no other comment."""
        self.delivered = Delivered("skipped", None, "not verified")

    def __call__(self, result: MissionResult) -> DeliveryOutcome:
        try:
            delivered = _deliver(
                self.request,
                self.session,
                result,
                self.checkout,
                self.redactor,
                self.mission_url if self.link_screenshot else None,
                self.mission_url,
                self.mode,
                self.tracked,
            )
        except (GitHubError, WorkspaceError) as exc:
            self.bus.emit("error", message=str(exc), kind=type(exc).__name__)
            delivered = Delivered("failed", None, str(exc))
        self.delivered = delivered
        self.bus.emit("delivery", kind=delivered.kind, url=delivered.url, reason=delivered.reason)
        if delivered.kind in ("skipped", "failed"):
            return DeliveryOutcome(delivered.kind, {"reason": delivered.reason})
        return DeliveryOutcome("delivered", {"kind": delivered.kind, "url": delivered.url})


def _deliver(
    request: MissionRequest,
    session: RepoSession,
    result: MissionResult,
    checkout: Callable[[], Path],
    redactor: Redactor,
    screenshot_base: str | None,
    mission_url: str | None,
    mode: DeliveryMode,
    tracked: bool = False,
) -> Delivered:
    data = result.to_dict()
    if request.fork or mode == "comment":
        # Nothing is pushed to the base repository for a fork (SECURITY #22).
        if not request.pr_number:
            return Delivered("skipped", None, "no pull request to comment on")
        body = render.fork_patch_comment(
            data, result.patch, mission_url=mission_url, redactor=redactor
        )
        return Delivered("comment", session.comment(request.pr_number, body))
    title = redactor.text(pr_title(result))
    if request.iterate:
        return _add_commit_to_own_branch(
            request, session, result, checkout(), title, redactor, mission_url
        )
    if mode == "commit":
        return _commit_to_branch(request, session, result, checkout(), title)
    branch = fix_branch(request)
    pulls = session.pulls_for_branch(branch)
    open_pull = next((p for p in pulls if p.state == "open"), None)
    closed_unmerged = any(p.state == "closed" and not p.merged for p in pulls)
    # A closed pull request is reopened only when a maintainer asks again by comment.
    if open_pull is None and closed_unmerged and request.trigger != "comment":
        return Delivered(
            "skipped",
            None,
            f"a pull request for {branch} was closed unmerged; comment `/loopwright fix` to "
            "ask for a new one",
        )
    tree = checkout()
    remote = remote_branch(tree, branch, request.head_sha, session.token, url=request.clone_url)
    if remote is not None and not remote.ours:
        reason = f"{branch} has commits by someone else; Loopwright does not push over them"
        if request.pr_number and not tracked:
            session.comment(request.pr_number, f"Loopwright verified a fix but {reason}.")
        return Delivered("skipped", None, reason)
    commit_patch(tree, result.patch, title, result.mission)
    push_branch(
        tree,
        branch,
        session.token,
        replace=remote.sha if remote else None,
        url=request.clone_url,
    )
    shot = f"{screenshot_base}/screenshot.png" if screenshot_base and result.screenshot else None
    body = render.pr_body(data, mission_url=mission_url, screenshot_url=shot, redactor=redactor)
    if open_pull is not None:
        pull = session.update_pull(open_pull.number, title, body)
    else:
        pull = session.open_pull(branch, request.head_ref or "main", title, body)
    return Delivered("pull_request", pull.html_url)


def _commit_to_branch(
    request: MissionRequest, session: RepoSession, result: MissionResult, tree: Path, title: str
) -> Delivered:
    if not request.head_ref:
        return Delivered("skipped", None, "the failing commit is on no branch")
    commit = commit_patch(tree, result.patch, title, result.mission)
    # The lease is the commit that was fixed: if anyone pushed since, nothing is overwritten.
    push_branch(
        tree, request.head_ref, session.token, replace=request.head_sha, url=request.clone_url
    )
    return Delivered("commit", None, f"pushed {commit} to {request.head_ref}")


def _add_commit_to_own_branch(
    request: MissionRequest,
    session: RepoSession,
    result: MissionResult,
    tree: Path,
    title: str,
    redactor: Redactor,
    mission_url: str | None,
) -> Delivered:
    """Iteration on Loopwright's own pull request: the verified change becomes one new
    commit on its head branch, whose parent is the head the mission started from; the pull
    request itself is left as it is (not updated, reopened or duplicated)."""
    branch, number, head = request.head_ref, request.pr_number, request.head_sha
    if not branch or not number:
        return Delivered("skipped", None, "the pull request has no head branch")
    remote = remote_branch(tree, branch, head, session.token, url=request.clone_url)
    if remote is None or remote.sha != head:
        return _branch_moved(
            session, result.mission, number, branch, head, remote.sha if remote else None
        )
    commit = commit_patch(tree, result.patch, title, result.mission)
    try:
        push_fast_forward(tree, branch, session.token, url=request.clone_url)
    except GitError:
        now = remote_branch(tree, branch, head, session.token, url=request.clone_url)
        if now is not None and now.sha == head:
            raise
        return _branch_moved(
            session, result.mission, number, branch, head, now.sha if now else None
        )
    pull = session.pull(number)
    commit_url = f"{pull.html_url}/commits/{commit}" if pull.html_url else None
    say_on_pull(
        session,
        result.mission,
        number,
        iteration_note(
            title=title,
            commit=commit,
            parent=head,
            branch=branch,
            patch=result.patch,
            commit_url=commit_url,
            mission_url=mission_url,
            redactor=redactor,
        ),
    )
    return Delivered("commit", commit_url, f"pushed {commit[:12]} to {branch}")


def _branch_moved(
    session: RepoSession, mission: str, number: int, branch: str, head: str, now: str | None
) -> Delivered:
    where = f"now points at {now[:7]}" if now else "is gone"
    reason = (
        f"{render.code(branch, Redactor([]))} {where}, not at {head[:7]} where this mission "
        "started; Loopwright pushes only a fast-forward of the commit it worked on, so nothing "
        "was pushed"
    )
    say_on_pull(session, mission, number, f"Loopwright verified a change but {reason}.")
    return Delivered("skipped", None, reason)


def say_on_pull(session: RepoSession, mission: str, number: int, body: str) -> None:
    """Tell pull request `number` what `mission` did: the one place iteration speaks on
    GitHub once a mission runs. It goes into the mission's tracking comment (one comment
    per mission, edited); only a mission without one posts a comment of its own."""
    item = "\n  ".join(body.splitlines())
    if not tracking.note(mission, item):
        session.comment(number, body)


def pr_title(result: MissionResult) -> str:
    """The PR title and commit subject: model text, so rendered inert (no closing keyword)."""
    return render.pr_title(result.summary, title=result.title)
