"""CI triggers: whether a completed check run, check suite or workflow run is a failure
Loopwright should fix, and on which branch or pull request.

Which CI conclusions count as failures: `failure` and `timed_out`. Not failures:
`success`, `neutral`, `skipped`, `stale`, `cancelled` (someone or something stopped the
run), `action_required` (a human must approve the run, e.g. a first-time contributor's
workflow) and `startup_failure` (the workflow file itself is broken, and workflow files are
paths Loopwright may not change).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from loopwright.github.decisions import Decision, Ignore, TriggerContext, bot_reason
from loopwright.github.payload import (
    Malformed,
    get_int,
    get_list,
    get_map,
    get_opt_str,
    get_str,
    installation_id,
)
from loopwright.repo_config import RepoConfig
from loopwright.request import MissionRequest, Trigger

FAILING_CONCLUSIONS = frozenset({"failure", "timed_out"})
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


def decide_ci(
    trigger: Trigger, payload: Mapping[str, Any], repo_config: RepoConfig, ctx: TriggerContext
) -> Decision:
    action = payload.get("action")
    if action != "completed":
        return Ignore(f"{trigger}.{action} is not handled; only completed runs are")
    subject = get_map(payload, trigger)
    repository = get_map(payload, "repository")
    repo = get_str(repository, "full_name", "repository")
    default_branch = get_str(repository, "default_branch", "repository")

    app = subject.get("app")
    if isinstance(app, Mapping) and app.get("slug") == ctx.app_slug:
        kind = "check run" if trigger == "check_run" else "check suite"
        return Ignore(f"{kind} is Loopwright's own")

    conclusion = get_opt_str(subject, "conclusion", trigger)
    if conclusion is None:
        return Ignore(f"{trigger} has no conclusion yet")
    if conclusion not in FAILING_CONCLUSIONS:
        why = _NOT_FAILURE_WHY.get(conclusion, "only failure and timed_out are")
        return Ignore(f"conclusion {conclusion} is not a failure ({why})")

    if not repo_config.auto_fix:
        return Ignore("auto_fix is off in .github/loopwright.yml")

    bot = bot_reason(get_map(payload, "sender"), ctx, "sender")
    if bot:
        return Ignore(bot)

    head_sha = get_str(subject, "head_sha", trigger)
    if trigger == "check_run":
        suite = get_map(subject, "check_suite", trigger)
        head_branch = get_opt_str(suite, "head_branch", "check_run.check_suite")
        pulls = get_list(suite, "pull_requests", "check_run.check_suite")
        check_name = get_str(subject, "name", trigger)
    else:
        head_branch = get_opt_str(subject, "head_branch", trigger)
        pulls = get_list(subject, "pull_requests", trigger)
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
        clone_url=get_str(repository, "clone_url", "repository"),
        head_sha=head_sha,
        head_ref=head_ref,
        base_ref=base_ref,
        pr_number=number,
        installation_id=installation_id(payload),
        check_name=check_name,
        actor=get_str(get_map(payload, "sender"), "login", "sender"),
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
            raise Malformed(f"{path} is not an object")
        head = get_map(item, "head", path)
        base = get_map(item, "base", path)
        head_repo_url = get_str(get_map(head, "repo", f"{path}.head"), "url", f"{path}.head.repo")
        base_repo_url = get_str(get_map(base, "repo", f"{path}.base"), "url", f"{path}.base.repo")
        fork = head_repo_url != base_repo_url
        target: _PullTarget = (
            get_int(item, "number", path),
            get_str(head, "ref", f"{path}.head"),
            get_str(base, "ref", f"{path}.base"),
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
