"""Comment triggers: a `/loopwright` command in an issue comment or a review comment, and
`authorize`, which finishes a `fix` once the caller knows the commenter's permission.

A `pull_request_review_comment` (a comment on a line of the diff) asks like an issue
comment does; the file, line and diff hunk it was left on travel with the request.
On Loopwright's own pull request (its head branch carries `branch_prefix` in the base
repository), an authorized command iterates: the verified change becomes a new commit on
that branch. A head branch with that prefix in a fork is refused: it is not Loopwright's.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Generic, TypeVar

from loopwright.github import render
from loopwright.github.command_text import parse_command, parse_comment_command
from loopwright.github.decisions import (
    CommandComment,
    Decision,
    Ignore,
    NeedsPermission,
    Reply,
    TriggerContext,
    bot_reason,
)
from loopwright.github.payload import (
    Malformed,
    get_int,
    get_map,
    get_opt_int,
    get_opt_str,
    get_str,
    installation_id,
)
from loopwright.request import MissionRequest, ReviewComment

WRITE_PERMISSIONS = frozenset({"write", "maintain", "admin"})


def authorize(
    pending: NeedsPermission,
    permission: str,
    pull: Mapping[str, Any],
    ctx: TriggerContext,
) -> MissionRequest | Reply | Ignore:
    """Finish a comment command once the caller has asked GitHub who the commenter is.

    `permission` is the collaborator-permission endpoint's `role_name` (or `permission`):
    only write, maintain and admin may start a mission; `author_association` is never used.
    `pull` is the pull request as the REST API returns it at this moment; its head SHA is
    pinned into the request, so a push after authorization cannot change what is fixed.
    """
    request = pending.request
    number = request.pr_number or 0
    if permission not in WRITE_PERMISSIONS:
        return Reply(render.refusal_comment(pending.user, permission or "none"), number)
    try:
        state = get_str(pull, "state")
        head = get_map(pull, "head")
        base = get_map(pull, "base")
        head_sha = get_str(head, "sha", "head")
        head_ref = get_str(head, "ref", "head")
        base_ref = get_str(base, "ref", "base")
        base_repo = get_str(get_map(base, "repo", "base"), "full_name", "base.repo")
        head_repo_obj = head.get("repo")
        head_repo = (
            get_str(head_repo_obj, "full_name", "head.repo")
            if isinstance(head_repo_obj, Mapping)
            else None
        )
    except Malformed as exc:
        return Ignore(f"malformed pull request: {exc}")
    if state != "open":
        return Reply(
            f"{render.mention(pending.user)}, pull request #{number} is {state}; reopen it "
            "and comment `/loopwright fix` again if you still want a fix.",
            number,
        )
    # Only the branches Loopwright names for its fixes, in the base repository, are iterated
    # on; another branch that starts with the prefix (a writer's, or any fork's: Loopwright
    # never pushes to a fork) is fixed like any pull request's head.
    own_branch = head_ref.startswith(f"{ctx.branch_prefix}fix-") and head_repo == base_repo
    used = ctx.attempts.get(head_sha, 0)
    if used >= ctx.max_attempts:
        return Reply(
            f"{render.mention(pending.user)}, Loopwright already made {used} attempts on "
            f"{head_sha[:7]} (the cap is {ctx.max_attempts}); push a new commit to try again.",
            number,
        )
    return replace(
        request,
        head_sha=head_sha,
        head_ref=head_ref,
        base_ref=base_ref,
        fork=head_repo != base_repo,
        head_repo=head_repo,
        iterate=own_branch,
    )


_Parsed = TypeVar("_Parsed")


@dataclass(frozen=True, slots=True)
class _CommentAsk(Generic[_Parsed]):
    """A new comment that carries a command, from an account that may ask."""

    comment: Mapping[str, Any]
    author: Mapping[str, Any]
    command: _Parsed


def _comment_preamble(
    event: str,
    payload: Mapping[str, Any],
    ctx: TriggerContext,
    parse: Callable[[str], _Parsed | None],
    no_command: str,
) -> _CommentAsk[_Parsed] | Ignore:
    """What an issue comment and a review comment check alike before they can ask: the
    comment is new, carries a command `parse` finds, and neither the sender nor the
    comment's author is Loopwright or a bot it does not listen to."""
    action = payload.get("action")
    if action != "created":
        return Ignore(f"{event}.{action} is not handled; only new comments can ask")
    comment = get_map(payload, "comment")
    body = comment.get("body")
    if body is not None and not isinstance(body, str):
        raise Malformed("comment.body is not a string")
    command = parse(body or "")
    if command is None:
        return Ignore(no_command)
    author = get_map(comment, "user", "comment")
    for who, label in ((get_map(payload, "sender"), "sender"), (author, "comment author")):
        bot = bot_reason(who, ctx, label)
        if bot:
            return Ignore(bot)
    return _CommentAsk(comment, author, command)


def decide_comment(payload: Mapping[str, Any], ctx: TriggerContext) -> Decision:
    ask = _comment_preamble(
        "issue_comment",
        payload,
        ctx,
        parse_comment_command,
        "comment has no /loopwright command",
    )
    if isinstance(ask, Ignore):
        return ask
    comment, author, command = ask.comment, ask.author, ask.command
    issue = get_map(payload, "issue")
    number = get_int(issue, "number", "issue")
    if not isinstance(issue.get("pull_request"), Mapping):
        if command.name != "fix":
            # Only `fix` is explained on an issue, as before: no new command makes the App
            # answer anyone on any issue.
            return Ignore(f"/loopwright {command.name} is for pull requests; this is an issue")
        return Reply(render.explain_command_comment(), number)
    repository = get_map(payload, "repository")
    user = get_str(author, "login", "comment.user")
    request = MissionRequest(
        trigger="comment",
        repo=get_str(repository, "full_name", "repository"),
        clone_url=get_str(repository, "clone_url", "repository"),
        head_sha="",
        pr_number=number,
        installation_id=installation_id(payload),
        actor=user,
        guidance=command.argument if command.name == "fix" else None,
        comment_id=get_int(comment, "id", "comment"),
    )
    if command.name != "fix":
        return CommandComment(command, request, user, _written_at(comment))
    return NeedsPermission(request, user)


def _written_at(comment: Mapping[str, Any]) -> datetime.datetime | None:
    """The comment's `created_at`, or None when it is missing or not a timestamp."""
    value = comment.get("created_at")
    if not isinstance(value, str):
        return None
    try:
        written = datetime.datetime.fromisoformat(value)
    except ValueError:
        return None
    return written if written.tzinfo is not None else written.replace(tzinfo=datetime.UTC)


def decide_review_comment(payload: Mapping[str, Any], ctx: TriggerContext) -> Decision:
    """A `/loopwright fix` left on a line of a pull request's diff: asks like an issue
    comment, with where it was left (file, line, diff hunk) for the model."""
    ask = _comment_preamble(
        "pull_request_review_comment",
        payload,
        ctx,
        parse_command,
        "review comment has no /loopwright fix command",
    )
    if isinstance(ask, Ignore):
        return ask
    comment, author, guidance = ask.comment, ask.author, ask.command
    pull = get_map(payload, "pull_request")
    repository = get_map(payload, "repository")
    user = get_str(author, "login", "comment.user")
    hunk = comment.get("diff_hunk")
    review = ReviewComment(
        id=get_int(comment, "id", "comment"),
        path=get_str(comment, "path", "comment"),
        line=get_opt_int(comment, "line", "comment"),
        start_line=get_opt_int(comment, "start_line", "comment"),
        side=get_opt_str(comment, "side", "comment"),
        diff_hunk=hunk if isinstance(hunk, str) else "",
        url=get_opt_str(comment, "html_url", "comment"),
    )
    request = MissionRequest(
        trigger="comment",
        repo=get_str(repository, "full_name", "repository"),
        clone_url=get_str(repository, "clone_url", "repository"),
        head_sha="",
        pr_number=get_int(pull, "number", "pull_request"),
        installation_id=installation_id(payload),
        actor=user,
        guidance=guidance,
        review=review,
    )
    return NeedsPermission(request, user)
