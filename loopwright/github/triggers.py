"""Webhook triggers: what to do with one GitHub event, decided from its payload alone.

`decide` turns (event, payload, repository config, context) into a `Decision`: a
`MissionRequest` to queue, a `NeedsPermission` for a `/loopwright fix` comment whose author
must first be checked against the collaborator-permission endpoint, a `Reply` to post, or
`Ignore(reason)`. `authorize` finishes a `NeedsPermission` once the caller has fetched the
commenter's permission and the pull request. Nothing here does I/O and nothing raises on a
bad payload: a payload missing a key or holding the wrong type is ignored with the path of
the offending field.

Which CI conclusions count as failures: `failure` and `timed_out`. Not failures:
`success`, `neutral`, `skipped`, `stale`, `cancelled` (someone or something stopped the
run), `action_required` (a human must approve the run, e.g. a first-time contributor's
workflow) and `startup_failure` (the workflow file itself is broken, and workflow files are
paths Loopwright may not change).

A `pull_request_review_comment` (a comment on a line of the diff) asks like an issue
comment does; the file, line and diff hunk it was left on travel with the request.
On Loopwright's own pull request (its head branch carries `branch_prefix` in the base
repository), an authorized command iterates: the verified change becomes a new commit on
that branch. A head branch with that prefix in a fork is refused: it is not Loopwright's.

`pull_request` events are acknowledged and ignored: whether Loopwright's own pull request
was closed unmerged is read from the API at delivery time, because GitHub does not
redeliver lost webhooks and bookkeeping built from them would drift.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Generic, TypeVar

from loopwright.github import render
from loopwright.github.command_text import Command, parse_command, parse_comment_command
from loopwright.redaction import Redactor
from loopwright.repo_config import RepoConfig
from loopwright.request import MissionRequest, ReviewComment, Trigger

FAILING_CONCLUSIONS = frozenset({"failure", "timed_out"})
WRITE_PERMISSIONS = frozenset({"write", "maintain", "admin"})
CI_EVENTS: dict[str, Trigger] = {
    "check_run": "check_run",
    "check_suite": "check_suite",
    "workflow_run": "workflow_run",
}
_NOT_FAILURE_WHY = {
    "cancelled": "a cancelled run is not a failure",
    "action_required": "the run waits for a maintainer's approval",
    "startup_failure": (
        "the workflow could not start (usually an invalid workflow file, which Loopwright "
        "may not change)"
    ),
}


@dataclass(frozen=True)
class Ignore:
    """Nothing to do; the reason is returned to GitHub in the webhook response and logged."""

    reason: str


@dataclass(frozen=True)
class NeedsPermission:
    """A `/loopwright fix` comment on a pull request, waiting for authorization.

    The caller asks the collaborator-permission endpoint about `user` and fetches the pull
    request, then calls `authorize`: only that step pins `request.head_sha` (empty here,
    because the issue_comment payload does not carry the head commit).
    """

    request: MissionRequest
    user: str


@dataclass(frozen=True)
class Reply:
    """A comment to post on an issue or pull request, and nothing else."""

    body: str
    issue_number: int
    refused: bool = False
    """The reply turns the request down (stored as `refused`, not `ignored`)."""


@dataclass(frozen=True)
class CommandComment:
    """A `/loopwright help|cancel|retry` (or unknown) comment on a pull request; the caller
    checks `user` against the collaborator-permission endpoint before acting on it."""

    command: Command
    request: MissionRequest
    """What a `retry` would ask for (its guidance and head are filled in by the caller)."""
    user: str


Decision = MissionRequest | NeedsPermission | CommandComment | Reply | Ignore


@dataclass(frozen=True)
class TriggerContext:
    """What `decide` needs to know besides the payload; built by the caller per delivery."""

    app_slug: str = "loopwright"
    """The App's slug; `<slug>[bot]` is its login and is never allowed to trigger."""
    bot_logins: frozenset[str] = frozenset()
    """Logins to treat as bots even when GitHub reports them as users (machine accounts)."""
    allowed_bots: frozenset[str] = frozenset()
    """Bot logins that may trigger missions (e.g. `dependabot[bot]`)."""
    attempts: Mapping[str, int] = field(default_factory=dict)
    """Missions already stored for this repository, by head SHA (queued ones included)."""
    max_attempts: int = 3
    loopwright_authored_shas: frozenset[str] = frozenset()
    """Commits Loopwright pushed; a red check on one of them must not start a mission."""
    branch_prefix: str = "loopwright/"

    @property
    def own_login(self) -> str:
        return f"{self.app_slug}[bot]"


_PLAIN = Redactor()


class _Malformed(Exception):
    """A payload field is missing or has the wrong type; the message is its path."""


# -- entry points --------------------------------------------------------------------------


def decide(
    event: str, payload: Mapping[str, Any], repo_config: RepoConfig, ctx: TriggerContext
) -> Decision:
    """The decision for one delivery. `event` is the `X-GitHub-Event` header value."""
    name, _, suffix = event.partition(".")
    try:
        if not isinstance(payload, Mapping):
            raise _Malformed("the payload is not a JSON object")
        action = payload.get("action")
        if suffix and action != suffix:
            return Ignore(f"event {event} does not match the payload's action {action!r}")
        if name in CI_EVENTS:
            return _decide_ci(CI_EVENTS[name], payload, repo_config, ctx)
        if name == "issue_comment":
            return _decide_comment(payload, ctx)
        if name == "pull_request_review_comment":
            return _decide_review_comment(payload, ctx)
        if name == "pull_request":
            return Ignore(
                f"pull_request.{action} needs no action: delivery reads the state of "
                "Loopwright's pull requests from the API"
            )
        return Ignore(f"event {name} is not handled")
    except _Malformed as exc:
        return Ignore(f"malformed payload: {exc}")


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
        state = _str(pull, "state")
        head = _map(pull, "head")
        base = _map(pull, "base")
        head_sha = _str(head, "sha", "head")
        head_ref = _str(head, "ref", "head")
        base_ref = _str(base, "ref", "base")
        base_repo = _str(_map(base, "repo", "base"), "full_name", "base.repo")
        head_repo_obj = head.get("repo")
        head_repo = (
            _str(head_repo_obj, "full_name", "head.repo")
            if isinstance(head_repo_obj, Mapping)
            else None
        )
    except _Malformed as exc:
        return Ignore(f"malformed pull request: {exc}")
    if state != "open":
        return Reply(
            f"{render.mention(pending.user)}, pull request #{number} is {state}; reopen it "
            "and comment `/loopwright fix` again if you still want a fix.",
            number,
        )
    # Only the branches Loopwright names for its fixes are iterated on; another branch a
    # writer happened to start with the prefix is fixed like any pull request's head.
    own_branch = head_ref.startswith(f"{ctx.branch_prefix}fix-")
    if own_branch and head_repo != base_repo:
        return Reply(
            f"{render.mention(pending.user)}, the head branch {render.code(head_ref, _PLAIN)} "
            f"of #{number} lives in {render.code(head_repo or 'a deleted fork', _PLAIN)}, "
            f"not in {render.code(base_repo, _PLAIN)}: it is not Loopwright's branch, so "
            "Loopwright adds no commits to it. Rename the branch (Loopwright's branches start "
            f"with {render.code(ctx.branch_prefix, _PLAIN)}) and comment `/loopwright fix` "
            "again for a fix offered as a patch.",
            number,
            refused=True,
        )
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


# -- CI events -----------------------------------------------------------------------------


def _decide_ci(
    trigger: Trigger, payload: Mapping[str, Any], repo_config: RepoConfig, ctx: TriggerContext
) -> Decision:
    action = payload.get("action")
    if action != "completed":
        return Ignore(f"{trigger}.{action} is not handled; only completed runs are")
    subject = _map(payload, trigger)
    repository = _map(payload, "repository")
    repo = _str(repository, "full_name", "repository")
    default_branch = _str(repository, "default_branch", "repository")

    app = subject.get("app")
    if isinstance(app, Mapping) and app.get("slug") == ctx.app_slug:
        kind = "check run" if trigger == "check_run" else "check suite"
        return Ignore(f"{kind} is Loopwright's own")

    conclusion = _opt_str(subject, "conclusion", trigger)
    if conclusion is None:
        return Ignore(f"{trigger} has no conclusion yet")
    if conclusion not in FAILING_CONCLUSIONS:
        why = _NOT_FAILURE_WHY.get(conclusion, "only failure and timed_out are")
        return Ignore(f"conclusion {conclusion} is not a failure ({why})")

    if not repo_config.auto_fix:
        return Ignore("auto_fix is off in .github/loopwright.yml")

    bot = _bot_reason(_map(payload, "sender"), ctx, "sender")
    if bot:
        return Ignore(bot)

    head_sha = _str(subject, "head_sha", trigger)
    if trigger == "check_run":
        suite = _map(subject, "check_suite", trigger)
        head_branch = _opt_str(suite, "head_branch", "check_run.check_suite")
        pulls = _list(suite, "pull_requests", "check_run.check_suite")
        check_name = _str(subject, "name", trigger)
    else:
        head_branch = _opt_str(subject, "head_branch", trigger)
        pulls = _list(subject, "pull_requests", trigger)
        check_name = _suite_name(trigger, subject)

    if head_branch and head_branch.startswith(ctx.branch_prefix):
        return Ignore(f"branch {head_branch} is Loopwright's")
    if head_sha in ctx.loopwright_authored_shas or _authored_by(subject, ctx.own_login):
        return Ignore(f"commit {head_sha[:7]} was authored by Loopwright")

    pull = _pick_pull(pulls, head_sha, trigger)
    if pull is not None:
        number, head_ref, base_ref, fork, head_repo = pull
        if head_ref.startswith(ctx.branch_prefix):
            return Ignore(f"branch {head_ref} is Loopwright's")
    elif head_branch == default_branch:
        number, head_ref, base_ref, fork, head_repo = (
            None,
            default_branch,
            default_branch,
            False,
            None,
        )
    else:
        if trigger == "workflow_run" and _from_fork(subject, repo):
            return Ignore(
                f"the failure is on a fork's branch {head_branch} and the payload names no "
                "pull request; a maintainer can comment `/loopwright fix` on it"
            )
        return Ignore(
            f"branch {head_branch or '(none)'} is neither the default branch nor the head "
            "of a pull request in this repository"
        )

    used = ctx.attempts.get(head_sha, 0)
    if used >= ctx.max_attempts:
        return Ignore(f"attempt cap {ctx.max_attempts} reached for {head_sha[:7]}")

    return MissionRequest(
        trigger=trigger,
        repo=repo,
        clone_url=_str(repository, "clone_url", "repository"),
        head_sha=head_sha,
        head_ref=head_ref,
        base_ref=base_ref,
        pr_number=number,
        installation_id=_installation_id(payload),
        check_name=check_name,
        actor=_str(_map(payload, "sender"), "login", "sender"),
        fork=fork,
        head_repo=head_repo,
    )


def _suite_name(trigger: Trigger, subject: Mapping[str, Any]) -> str:
    if trigger == "workflow_run":
        name = subject.get("name")
        if isinstance(name, str) and name:
            return name
        path = subject.get("path")
        return path if isinstance(path, str) and path else "workflow"
    app = subject.get("app")
    if isinstance(app, Mapping) and isinstance(app.get("name"), str):
        return f"{app['name']} suite"
    return "check suite"


_PullTarget = tuple[int, str, str, bool, str | None]


def _pick_pull(pulls: list[Any], head_sha: str, where: str) -> _PullTarget | None:
    """The pull request whose head is the failing commit (GitHub lists those that match)."""
    targets: list[tuple[bool, _PullTarget]] = []
    for index, item in enumerate(pulls):
        path = f"{where}.pull_requests[{index}]"
        if not isinstance(item, Mapping):
            raise _Malformed(f"{path} is not an object")
        head = _map(item, "head", path)
        base = _map(item, "base", path)
        head_repo_url = _str(_map(head, "repo", f"{path}.head"), "url", f"{path}.head.repo")
        base_repo_url = _str(_map(base, "repo", f"{path}.base"), "url", f"{path}.base.repo")
        fork = head_repo_url != base_repo_url
        target: _PullTarget = (
            _int(item, "number", path),
            _str(head, "ref", f"{path}.head"),
            _str(base, "ref", f"{path}.base"),
            fork,
            _repo_from_api_url(head_repo_url) if fork else None,
        )
        targets.append((head.get("sha") == head_sha, target))
    for matches, target in targets:
        if matches:
            return target
    return targets[0][1] if targets else None


def _repo_from_api_url(url: str) -> str | None:
    _, sep, rest = url.partition("/repos/")
    name = rest.strip("/")
    return name if sep and name else None


def _from_fork(subject: Mapping[str, Any], repo: str) -> bool:
    head_repository = subject.get("head_repository")
    if not isinstance(head_repository, Mapping):
        return False
    return head_repository.get("full_name") not in (None, repo)


def _authored_by(subject: Mapping[str, Any], login: str) -> bool:
    """Whether the head commit names Loopwright as author or committer (suites, workflows)."""
    commit = subject.get("head_commit")
    if not isinstance(commit, Mapping):
        return False
    for role in ("author", "committer"):
        person = commit.get(role)
        if isinstance(person, Mapping):
            name, email = person.get("name"), person.get("email")
            if name == login or (isinstance(email, str) and f"+{login}@" in email):
                return True
    return False


# -- comments ------------------------------------------------------------------------------


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
    comment = _map(payload, "comment")
    body = comment.get("body")
    if body is not None and not isinstance(body, str):
        raise _Malformed("comment.body is not a string")
    command = parse(body or "")
    if command is None:
        return Ignore(no_command)
    author = _map(comment, "user", "comment")
    for who, label in ((_map(payload, "sender"), "sender"), (author, "comment author")):
        bot = _bot_reason(who, ctx, label)
        if bot:
            return Ignore(bot)
    return _CommentAsk(comment, author, command)


def _decide_comment(payload: Mapping[str, Any], ctx: TriggerContext) -> Decision:
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
    issue = _map(payload, "issue")
    number = _int(issue, "number", "issue")
    if not isinstance(issue.get("pull_request"), Mapping):
        if command.name != "fix":
            # Only `fix` is explained on an issue, as before: no new command makes the App
            # answer anyone on any issue.
            return Ignore(f"/loopwright {command.name} is for pull requests; this is an issue")
        return Reply(render.explain_command_comment(), number)
    repository = _map(payload, "repository")
    user = _str(author, "login", "comment.user")
    request = MissionRequest(
        trigger="comment",
        repo=_str(repository, "full_name", "repository"),
        clone_url=_str(repository, "clone_url", "repository"),
        head_sha="",
        pr_number=number,
        installation_id=_installation_id(payload),
        actor=user,
        guidance=command.argument if command.name == "fix" else None,
        comment_id=_int(comment, "id", "comment"),
    )
    if command.name != "fix":
        return CommandComment(command, request, user)
    return NeedsPermission(request, user)


def _decide_review_comment(payload: Mapping[str, Any], ctx: TriggerContext) -> Decision:
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
    pull = _map(payload, "pull_request")
    repository = _map(payload, "repository")
    user = _str(author, "login", "comment.user")
    hunk = comment.get("diff_hunk")
    review = ReviewComment(
        id=_int(comment, "id", "comment"),
        path=_str(comment, "path", "comment"),
        line=_opt_int(comment, "line", "comment"),
        start_line=_opt_int(comment, "start_line", "comment"),
        side=_opt_str(comment, "side", "comment"),
        diff_hunk=hunk if isinstance(hunk, str) else "",
        url=_opt_str(comment, "html_url", "comment"),
    )
    request = MissionRequest(
        trigger="comment",
        repo=_str(repository, "full_name", "repository"),
        clone_url=_str(repository, "clone_url", "repository"),
        head_sha="",
        pr_number=_int(pull, "number", "pull_request"),
        installation_id=_installation_id(payload),
        actor=user,
        guidance=guidance,
        review=review,
    )
    return NeedsPermission(request, user)


def _bot_reason(who: Mapping[str, Any], ctx: TriggerContext, label: str) -> str | None:
    """Why this account may not trigger a mission, or None. `author_association` is ignored."""
    login = who.get("login")
    if not isinstance(login, str) or not login:
        raise _Malformed(f"{label}.login is missing")
    if login.lower() == ctx.own_login.lower():
        return f"{label} {login} is Loopwright itself"
    is_bot = who.get("type") == "Bot" or login.lower().endswith("[bot]") or login in ctx.bot_logins
    if is_bot and login.lower() not in {b.lower() for b in ctx.allowed_bots}:
        return f"{label} {login} is a bot"
    return None


# -- payload access ------------------------------------------------------------------------


def _map(data: Mapping[str, Any], key: str, where: str = "") -> Mapping[str, Any]:
    value = data.get(key)
    if not isinstance(value, Mapping):
        raise _Malformed(f"{_path(where, key)} is missing or not an object")
    return value


def _list(data: Mapping[str, Any], key: str, where: str = "") -> list[Any]:
    value = data.get(key, [])
    if value is None:
        return []
    if not isinstance(value, list):
        raise _Malformed(f"{_path(where, key)} is not a list")
    return value


def _str(data: Mapping[str, Any], key: str, where: str = "") -> str:
    value = data.get(key)
    if not isinstance(value, str) or not value:
        raise _Malformed(f"{_path(where, key)} is missing or not a string")
    return value


def _opt_str(data: Mapping[str, Any], key: str, where: str = "") -> str | None:
    value = data.get(key)
    if value is not None and not isinstance(value, str):
        raise _Malformed(f"{_path(where, key)} is not a string")
    return value or None


def _int(data: Mapping[str, Any], key: str, where: str = "") -> int:
    value = data.get(key)
    if not isinstance(value, int) or isinstance(value, bool):
        raise _Malformed(f"{_path(where, key)} is missing or not a number")
    return value


def _opt_int(data: Mapping[str, Any], key: str, where: str = "") -> int | None:
    value = data.get(key)
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool):
        raise _Malformed(f"{_path(where, key)} is not a number")
    return value


def _installation_id(payload: Mapping[str, Any]) -> int | None:
    installation = payload.get("installation")
    if installation is None:
        return None
    if not isinstance(installation, Mapping):
        raise _Malformed("installation is not an object")
    return _int(installation, "id", "installation")


def _path(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key
