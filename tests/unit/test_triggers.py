"""Webhook triggers on recorded GitHub payloads (npm `@octokit/webhooks-examples`) and on
variants of them in `tests/fixtures/webhooks/` (evil and malformed cases)."""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from loopwright.github.command_text import Command, parse_command, parse_comment_command
from loopwright.github.triggers import (
    CI_EVENTS,
    CommandComment,
    Ignore,
    NeedsPermission,
    Reply,
    TriggerContext,
    authorize,
    decide,
)
from loopwright.repo_config import RepoConfig
from loopwright.request import MissionRequest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = (
    ROOT / "tests/fakes/npm/node_modules/@octokit/webhooks-examples/api.github.com/index.json"
)
FIXTURES = ROOT / "tests/fixtures/webhooks"

AUTO = RepoConfig(auto_fix=True, source=".github/loopwright.yml")
MANUAL = RepoConfig(source=".github/loopwright.yml")
CTX = TriggerContext(app_slug="loopwright")
SHA = "ec26c3e57ca3a959ca5aad62de7213c562f8c821"


@cache
def _index() -> dict[str, list[dict[str, Any]]]:
    data = json.loads(EXAMPLES.read_text(encoding="utf-8"))
    return {entry["name"]: entry["examples"] for entry in data}


def recorded(event: str, action: str, index: int = 0, **where: Any) -> dict[str, Any]:
    """A recorded example by event and action (and fields of the event's object)."""
    found = [
        x
        for x in _index()[event]
        if x.get("action") == action and all(x[event].get(k) == v for k, v in where.items())
    ]
    return copy.deepcopy(found[index])


def fixture(name: str) -> dict[str, Any]:
    return json.loads((FIXTURES / f"{name}.json").read_text(encoding="utf-8"))


@dataclass(frozen=True)
class Case:
    id: str
    event: str
    payload: dict[str, Any]
    expect: type
    reason: str = ""
    """For Ignore: a substring of the reason."""
    fields: dict[str, Any] = field(default_factory=dict)
    """For MissionRequest / NeedsPermission.request: fields that must match."""
    config: RepoConfig = AUTO
    ctx: TriggerContext = CTX


CASES = [
    # -- CI failures that start missions ---------------------------------------------------
    Case(
        "check_run.completed.failure-recorded",
        "check_run",
        recorded("check_run", "completed", conclusion="failure"),
        MissionRequest,
        fields={
            "trigger": "check_run",
            "repo": "Codertocat/Hello-World",
            "clone_url": "https://github.com/Codertocat/Hello-World.git",
            "head_sha": SHA,
            "head_ref": "changes",
            "base_ref": "master",
            "pr_number": 2,
            "installation_id": None,
            "check_name": "Octocoders-linter",
            "actor": "Codertocat",
            "fork": False,
            "head_repo": None,
        },
    ),
    Case(
        "check_run.completed.timed_out",
        "check_run",
        fixture("check_run.completed.timed_out"),
        MissionRequest,
        fields={"pr_number": 2, "installation_id": 2311213, "head_sha": SHA},
    ),
    Case(
        "check_run.completed.default_branch",
        "check_run",
        fixture("check_run.completed.default_branch"),
        MissionRequest,
        fields={"pr_number": None, "head_ref": "master", "base_ref": "master", "fork": False},
    ),
    Case(
        "check_run.completed.fork",
        "check_run",
        fixture("check_run.completed.fork"),
        MissionRequest,
        fields={"fork": True, "head_repo": "octo-fork/Hello-World", "pr_number": 2},
    ),
    Case(
        "check_suite.completed.failure",
        "check_suite",
        fixture("check_suite.completed.failure"),
        MissionRequest,
        fields={
            "trigger": "check_suite",
            "head_ref": "changes",
            "pr_number": 2,
            "check_name": "octocoders-linter suite",
        },
    ),
    Case(
        "workflow_run.completed.failure",
        "workflow_run",
        fixture("workflow_run.completed.failure"),
        MissionRequest,
        fields={
            "trigger": "workflow_run",
            "repo": "octo-org/octo-repo",
            "head_sha": "3484a3fb816e0859fd6e1cea078d76385ff50625",
            "pr_number": 2,
            "check_name": "CI",
            "installation_id": 2311213,
        },
    ),
    Case(
        "workflow_run.completed.default_branch",
        "workflow_run",
        fixture("workflow_run.completed.default_branch"),
        MissionRequest,
        fields={"pr_number": None, "head_ref": "master", "base_ref": "master"},
    ),
    Case(
        "check_run.completed.evil_machine_user-allowed",
        "check_run",
        fixture("check_run.completed.evil_bot_sender"),
        MissionRequest,
        fields={"actor": "dependabot[bot]"},
        ctx=replace(CTX, allowed_bots=frozenset({"dependabot[bot]"})),
    ),
    # -- CI events that do not ---------------------------------------------------------------
    Case(
        "check_run.completed.failure-auto_fix_off",
        "check_run",
        recorded("check_run", "completed", conclusion="failure"),
        Ignore,
        "auto_fix is off in .github/loopwright.yml",
        config=MANUAL,
    ),
    Case(
        "check_run.completed.success-recorded",
        "check_run",
        recorded("check_run", "completed", conclusion="success"),
        Ignore,
        "conclusion success is not a failure",
    ),
    Case(
        "check_run.completed.cancelled",
        "check_run",
        fixture("check_run.completed.cancelled"),
        Ignore,
        "conclusion cancelled is not a failure",
    ),
    Case(
        "check_run.completed.action_required",
        "check_run",
        fixture("check_run.completed.action_required"),
        Ignore,
        "waits for a maintainer's approval",
    ),
    Case(
        "check_run.completed.neutral",
        "check_run",
        fixture("check_run.completed.neutral"),
        Ignore,
        "conclusion neutral is not a failure",
    ),
    Case(
        "workflow_run.completed.startup_failure",
        "workflow_run",
        fixture("workflow_run.completed.startup_failure"),
        Ignore,
        "could not start",
    ),
    Case(
        "workflow_run.completed.action_required",
        "workflow_run",
        fixture("workflow_run.completed.action_required"),
        Ignore,
        "conclusion action_required is not a failure",
    ),
    Case(
        "workflow_run.completed.cancelled",
        "workflow_run",
        fixture("workflow_run.completed.cancelled"),
        Ignore,
        "conclusion cancelled",
    ),
    Case(
        "workflow_run.completed.no_conclusion-recorded",
        "workflow_run",
        recorded("workflow_run", "completed", conclusion=None),
        Ignore,
        "has no conclusion yet",
    ),
    Case(
        "check_run.created-recorded",
        "check_run",
        recorded("check_run", "created"),
        Ignore,
        "check_run.created is not handled",
    ),
    Case(
        "check_suite.requested-recorded",
        "check_suite",
        recorded("check_suite", "requested"),
        Ignore,
        "check_suite.requested is not handled",
    ),
    Case(
        "check_run.completed.branch_without_pr",
        "check_run",
        fixture("check_run.completed.branch_without_pr"),
        Ignore,
        "branch changes is neither the default branch nor the head of a pull request",
    ),
    Case(
        "workflow_run.completed.fork_without_pr",
        "workflow_run",
        fixture("workflow_run.completed.fork_without_pr"),
        Ignore,
        "fork's branch patch-1",
    ),
    Case(
        "check_run.completed.evil_loopwright_branch",
        "check_run",
        fixture("check_run.completed.evil_loopwright_branch"),
        Ignore,
        "branch loopwright/fix-2 is Loopwright's",
    ),
    Case(
        "check_run.completed.evil_loopwright_pr_head",
        "check_run",
        fixture("check_run.completed.evil_loopwright_pr_head"),
        Ignore,
        "branch loopwright/fix-2 is Loopwright's",
    ),
    Case(
        "check_run.completed.evil_own_check",
        "check_run",
        fixture("check_run.completed.evil_own_check"),
        Ignore,
        "check run is Loopwright's own",
    ),
    Case(
        "check_suite.completed.evil_own_suite",
        "check_suite",
        fixture("check_suite.completed.evil_own_suite"),
        Ignore,
        "check suite is Loopwright's own",
    ),
    Case(
        "check_suite.completed.evil_loopwright_commit",
        "check_suite",
        fixture("check_suite.completed.evil_loopwright_commit"),
        Ignore,
        "commit ec26c3e was authored by Loopwright",
    ),
    Case(
        "check_run.completed.failure-loopwright_authored_sha",
        "check_run",
        recorded("check_run", "completed", conclusion="failure"),
        Ignore,
        "commit ec26c3e was authored by Loopwright",
        ctx=replace(CTX, loopwright_authored_shas=frozenset({SHA})),
    ),
    Case(
        "check_run.completed.evil_bot_sender",
        "check_run",
        fixture("check_run.completed.evil_bot_sender"),
        Ignore,
        "sender dependabot[bot] is a bot",
    ),
    Case(
        "check_run.completed.evil_loopwright_sender-even_if_allowed",
        "check_run",
        fixture("check_run.completed.evil_loopwright_sender"),
        Ignore,
        "sender loopwright[bot] is Loopwright itself",
        ctx=replace(CTX, allowed_bots=frozenset({"loopwright[bot]"})),
    ),
    Case(
        "check_run.completed.evil_machine_user",
        "check_run",
        fixture("check_run.completed.evil_machine_user"),
        Ignore,
        "sender renovate-bot is a bot",
        ctx=replace(CTX, bot_logins=frozenset({"renovate-bot"})),
    ),
    Case(
        "check_run.completed.failure-attempt_cap",
        "check_run",
        recorded("check_run", "completed", conclusion="failure"),
        Ignore,
        "attempt cap 3 reached for ec26c3e",
        ctx=replace(CTX, attempts={SHA: 3}),
    ),
    Case(
        "check_run.completed.failure-under_cap",
        "check_run",
        recorded("check_run", "completed", conclusion="failure"),
        MissionRequest,
        fields={"head_sha": SHA},
        ctx=replace(CTX, attempts={SHA: 2}),
    ),
    # -- comments ---------------------------------------------------------------------------
    Case(
        "issue_comment.created.command_on_pr",
        "issue_comment",
        fixture("issue_comment.created.command_on_pr"),
        NeedsPermission,
        fields={
            "trigger": "comment",
            "repo": "Codertocat/Hello-World",
            "head_sha": "",
            "pr_number": 1,
            "installation_id": 1,
            "actor": "Codertocat",
            "guidance": "the date parsing\nin utils/dates.py only",
            "comment_id": 492700400,
        },
    ),
    Case(
        "issue_comment.created.author_association_owner",
        "issue_comment",
        fixture("issue_comment.created.author_association_owner"),
        NeedsPermission,
        fields={"guidance": ""},
    ),
    Case(
        "issue_comment.created.command_on_issue",
        "issue_comment",
        fixture("issue_comment.created.command_on_issue"),
        Reply,
    ),
    Case(
        "issue_comment.created-recorded",
        "issue_comment",
        recorded("issue_comment", "created"),
        Ignore,
        "comment has no /loopwright command",
    ),
    Case(
        "issue_comment.edited-recorded",
        "issue_comment",
        recorded("issue_comment", "edited"),
        Ignore,
        "issue_comment.edited is not handled",
    ),
    Case(
        "issue_comment.deleted-recorded",
        "issue_comment",
        recorded("issue_comment", "deleted"),
        Ignore,
        "issue_comment.deleted is not handled",
    ),
    Case(
        "issue_comment.edited.command",
        "issue_comment",
        fixture("issue_comment.edited.command"),
        Ignore,
        "issue_comment.edited is not handled",
    ),
    Case(
        "issue_comment.created.no_command_on_pr",
        "issue_comment",
        fixture("issue_comment.created.no_command_on_pr"),
        Ignore,
        "no /loopwright command",
    ),
    Case(
        "issue_comment.created.evil_quoted",
        "issue_comment",
        fixture("issue_comment.created.evil_quoted"),
        Ignore,
        "no /loopwright command",
    ),
    Case(
        "issue_comment.created.evil_code_fence",
        "issue_comment",
        fixture("issue_comment.created.evil_code_fence"),
        Ignore,
        "no /loopwright command",
    ),
    Case(
        "issue_comment.created.evil_html_comment",
        "issue_comment",
        fixture("issue_comment.created.evil_html_comment"),
        Ignore,
        "no /loopwright command",
    ),
    Case(
        "issue_comment.created.evil_bot_owner",
        "issue_comment",
        fixture("issue_comment.created.evil_bot_owner"),
        Ignore,
        "sender helpful-app[bot] is a bot",
    ),
    Case(
        "issue_comment.created.evil_bot_owner-allowed",
        "issue_comment",
        fixture("issue_comment.created.evil_bot_owner"),
        NeedsPermission,
        fields={"actor": "helpful-app[bot]"},
        ctx=replace(CTX, allowed_bots=frozenset({"helpful-app[bot]"})),
    ),
    Case(
        "issue_comment.created.evil_loopwright",
        "issue_comment",
        fixture("issue_comment.created.evil_loopwright"),
        Ignore,
        "sender loopwright[bot] is Loopwright itself",
        ctx=replace(CTX, allowed_bots=frozenset({"loopwright[bot]"})),
    ),
    # -- other events ----------------------------------------------------------------------
    Case(
        "pull_request.closed-recorded",
        "pull_request",
        recorded("pull_request", "closed"),
        Ignore,
        "pull_request.closed needs no action",
    ),
    Case(
        "pull_request.synchronize-recorded",
        "pull_request",
        recorded("pull_request", "synchronize"),
        Ignore,
        "pull_request.synchronize needs no action",
    ),
    Case("issues.opened-recorded", "issues", recorded("issues", "opened"), Ignore, "event issues"),
    Case("push-recorded", "push", _index()["push"][0], Ignore, "event push is not handled"),
    # -- malformed --------------------------------------------------------------------------
    Case(
        "check_run.completed.malformed_no_repository",
        "check_run",
        fixture("check_run.completed.malformed_no_repository"),
        Ignore,
        "malformed payload: repository is missing",
    ),
    Case(
        "check_run.completed.malformed_pr_number",
        "check_run",
        fixture("check_run.completed.malformed_pr_number"),
        Ignore,
        "malformed payload: check_run.pull_requests[0].number",
    ),
    Case(
        "check_run.completed.malformed_pull_requests",
        "check_run",
        fixture("check_run.completed.malformed_pull_requests"),
        Ignore,
        "malformed payload: check_run.check_suite.pull_requests is not a list",
    ),
    Case(
        "check_run.completed.malformed_head_sha",
        "check_run",
        fixture("check_run.completed.malformed_head_sha"),
        Ignore,
        "malformed payload: check_run.head_sha",
    ),
    Case(
        "issue_comment.created.malformed_body",
        "issue_comment",
        fixture("issue_comment.created.malformed_body"),
        Ignore,
        "malformed payload: comment.body is not a string",
    ),
    Case(
        "issue_comment.created.malformed_no_user",
        "issue_comment",
        fixture("issue_comment.created.malformed_no_user"),
        Ignore,
        "malformed payload: comment.user",
    ),
    Case(
        "issue_comment.created.malformed_issue_number",
        "issue_comment",
        fixture("issue_comment.created.malformed_issue_number"),
        Ignore,
        "malformed payload: issue.number",
    ),
    Case("check_run-not_an_object", "check_run", [], Ignore, "malformed payload"),  # type: ignore[arg-type]
    Case(
        "check_run.completed-null_check_run",
        "check_run",
        {"action": "completed", "check_run": None},
        Ignore,
        "malformed payload: check_run is missing",
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_decide(case: Case) -> None:
    decision = decide(case.event, case.payload, case.config, case.ctx)
    assert isinstance(decision, case.expect), decision
    if isinstance(decision, Ignore):
        assert case.reason in decision.reason
    request = decision.request if isinstance(decision, NeedsPermission) else decision
    if isinstance(request, MissionRequest):
        for name, value in case.fields.items():
            assert getattr(request, name) == value, name


def _all_examples() -> list[Any]:
    return [
        pytest.param(name, payload, id=f"{name}.{payload.get('action', '-')}[{i}]")
        for name, examples in _index().items()
        for i, payload in enumerate(examples)
    ]


@pytest.mark.parametrize(("event", "payload"), _all_examples())
def test_every_recorded_example_gets_a_decision(event: str, payload: dict[str, Any]) -> None:
    """Every recorded delivery gets the kind of decision its event allows."""
    auto = decide(event, payload, AUTO, CTX)
    manual = decide(event, payload, MANUAL, CTX)
    if event in CI_EVENTS:
        # With auto_fix off a CI event never starts a mission by itself.
        assert isinstance(manual, Ignore) and manual.reason
        if isinstance(auto, MissionRequest):
            assert auto.trigger == CI_EVENTS[event]
            assert auto.repo == payload["repository"]["full_name"]
            assert auto.head_sha
        else:
            assert isinstance(auto, Ignore) and auto.reason
    elif event in ("issue_comment", "pull_request_review_comment"):
        # A comment asks the same way whatever auto_fix says.
        assert auto == manual
        assert isinstance(auto, NeedsPermission | CommandComment | Reply | Ignore)
        if isinstance(auto, NeedsPermission | CommandComment):
            assert auto.request.trigger == "comment"
            assert auto.user == payload["comment"]["user"]["login"]
    else:
        for decision in (auto, manual):
            assert isinstance(decision, Ignore)
            assert event in decision.reason


@pytest.mark.parametrize(
    "name",
    [
        "check_run.completed.timed_out",
        "workflow_run.completed.failure",
        "check_suite.completed.failure",
        "issue_comment.created.command_on_pr",
    ],
)
def test_any_missing_or_mistyped_field_is_ignored_never_raised(name: str) -> None:
    """Break every object-valued field in turn; the decision must stay a decision."""
    payload = fixture(name)
    event = name.split(".")[0]

    def paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        found: list[tuple[Any, ...]] = []
        items = (
            value.items()
            if isinstance(value, dict)
            else enumerate(value)
            if isinstance(value, list)
            else []
        )
        for key, child in items:
            found.append((*prefix, key))
            if isinstance(child, dict | list) and len(prefix) < 4:
                found += paths(child, (*prefix, key))
        return found

    for path in paths(payload):
        for bad in (None, "x", 7, [], {}):
            broken = copy.deepcopy(payload)
            target = broken
            for key in path[:-1]:
                target = target[key]
            target[path[-1]] = bad
            decision = decide(event, broken, AUTO, CTX)
            assert isinstance(decision, MissionRequest | NeedsPermission | Reply | Ignore)


def test_reply_on_an_issue_explains_the_command() -> None:
    decision = decide("issue_comment", fixture("issue_comment.created.command_on_issue"), AUTO, CTX)
    assert isinstance(decision, Reply)
    assert decision.issue_number == 1
    assert "works on pull requests" in decision.body
    assert "write access" in decision.body


def test_event_with_action_suffix_must_match_the_payload() -> None:
    payload = recorded("check_run", "completed", conclusion="failure")
    assert isinstance(decide("check_run.completed", payload, AUTO, CTX), MissionRequest)
    mismatch = decide("check_run.created", payload, AUTO, CTX)
    assert isinstance(mismatch, Ignore)
    assert "does not match" in mismatch.reason


def test_deliveries_of_the_same_failure_share_a_dedupe_key() -> None:
    first = decide("check_run", fixture("check_run.completed.timed_out"), AUTO, CTX)
    again = decide("check_run", fixture("check_run.completed.timed_out"), AUTO, CTX)
    assert isinstance(first, MissionRequest) and isinstance(again, MissionRequest)
    assert first.dedupe_key == again.dedupe_key == f"Codertocat/Hello-World@{SHA}:ci"


def test_one_red_actions_run_gives_one_key_whatever_event_reports_it() -> None:
    first = decide("check_run", fixture("check_run.completed.timed_out"), AUTO, CTX)
    assert isinstance(first, MissionRequest)
    keys = {
        replace(first, trigger=trigger, check_name=name).dedupe_key
        for trigger, name in [
            ("check_run", "test (3.11)"),
            ("check_suite", "GitHub Actions"),
            ("workflow_run", "CI"),
        ]
    }
    assert keys == {first.dedupe_key}


# -- authorize -----------------------------------------------------------------------------

PULL = {
    "number": 1,
    "state": "open",
    "head": {
        "ref": "feature",
        "sha": "1111111111111111111111111111111111111111",
        "repo": {"full_name": "Codertocat/Hello-World"},
    },
    "base": {"ref": "main", "sha": "2" * 40, "repo": {"full_name": "Codertocat/Hello-World"}},
}


def _pending() -> NeedsPermission:
    decision = decide("issue_comment", fixture("issue_comment.created.command_on_pr"), AUTO, CTX)
    assert isinstance(decision, NeedsPermission)
    return decision


def _pull(**changes: Any) -> dict[str, Any]:
    pull = copy.deepcopy(PULL)
    for dotted, value in changes.items():
        target = pull
        *parents, last = dotted.split("__")
        for key in parents:
            target = target[key]
        target[last] = value
    return pull


@pytest.mark.parametrize("permission", ["write", "maintain", "admin"])
def test_authorize_writers_pins_the_head(permission: str) -> None:
    request = authorize(_pending(), permission, _pull(), CTX)
    assert isinstance(request, MissionRequest)
    assert request.head_sha == "1" * 40
    assert (request.head_ref, request.base_ref, request.fork) == ("feature", "main", False)
    assert request.guidance == "the date parsing\nin utils/dates.py only"
    assert request.dedupe_key == _pending().request.dedupe_key  # stable across pinning
    assert request.dedupe_key == "Codertocat/Hello-World#comment:492700400"


@pytest.mark.parametrize("permission", ["read", "triage", "none", ""])
def test_authorize_refuses_non_writers_politely(permission: str) -> None:
    reply = authorize(_pending(), permission, _pull(), CTX)
    assert isinstance(reply, Reply)
    assert reply.issue_number == 1
    assert reply.body.startswith("@Codertocat, only people with write access")
    assert f"your permission is {permission or 'none'}" in reply.body


AUTHORIZE_CASES = [
    pytest.param(
        _pull(head__repo={"full_name": "octo-fork/Hello-World"}),
        MissionRequest,
        "octo-fork/Hello-World",
        id="fork",
    ),
    pytest.param(_pull(head__repo=None), MissionRequest, None, id="fork-deleted"),
    pytest.param(_pull(state="closed"), Reply, "is closed", id="closed"),
    pytest.param(_pull(head__sha=None), Ignore, "malformed pull request: head.sha", id="malformed"),
    pytest.param({}, Ignore, "malformed pull request", id="empty"),
]


@pytest.mark.parametrize(("pull", "expect", "detail"), AUTHORIZE_CASES)
def test_authorize_pull_states(pull: dict[str, Any], expect: type, detail: str | None) -> None:
    decision = authorize(_pending(), "write", pull, CTX)
    assert isinstance(decision, expect)
    if isinstance(decision, MissionRequest):
        assert decision.fork is True
        assert decision.head_repo == detail
    elif isinstance(decision, Reply | Ignore):
        text = decision.body if isinstance(decision, Reply) else decision.reason
        assert detail and detail in text


def test_authorize_respects_the_attempt_cap_for_the_pinned_head() -> None:
    ctx = replace(CTX, attempts={"1" * 40: 3})
    reply = authorize(_pending(), "admin", _pull(), ctx)
    assert isinstance(reply, Reply)
    assert "the cap is 3" in reply.body


# -- parse_command --------------------------------------------------------------------------

COMMANDS = [
    ("plain", "/loopwright fix", ""),
    ("guidance-same-line", "/loopwright fix the flaky date test", "the flaky date test"),
    (
        "guidance-lines-until-blank",
        "/loopwright fix\nonly touch src/\nkeep the API\n\nthanks",
        "only touch src/\nkeep the API",
    ),
    ("leading-spaces", "   /loopwright fix  now ", "now"),
    ("after-other-text", "LGTM but CI is red.\n/loopwright fix", ""),
    ("crlf", "hello\r\n/loopwright fix please\r\n", "please"),
    ("case-insensitive", "/Loopwright FIX", ""),
    ("first-command-wins", "/loopwright fix one\n\n/loopwright fix two", "one"),
    ("after-closed-fence", "```\ncode\n```\n/loopwright fix", ""),
    ("after-closed-comment", "<!-- note -->\n/loopwright fix", ""),
    ("mid-line", "please /loopwright fix", None),
    ("quoted", "> /loopwright fix", None),
    ("quoted-indented", "  > /loopwright fix", None),
    ("nested-quote", ">> /loopwright fix", None),
    ("fenced", "```\n/loopwright fix\n```", None),
    ("fenced-tilde", "~~~sh\n/loopwright fix\n~~~", None),
    ("fenced-unclosed", "```\n/loopwright fix", None),
    ("fence-closed-by-shorter-does-not-close", "````\n```\n/loopwright fix\n````", None),
    ("html-comment", "<!--\n/loopwright fix\n-->", None),
    ("html-comment-inline", "<!-- /loopwright fix -->", None),
    ("html-comment-unclosed", "hi <!--\n/loopwright fix", None),
    ("indented-code", "    /loopwright fix", None),
    ("other-word", "/loopwright fixes", None),
    ("other-command", "/loopwright build", None),
    ("inline-code", "`/loopwright fix`", None),
    ("empty", "", None),
    ("guidance-stops-at-fence", "/loopwright fix a\n```\nb\n```", "a"),
]


@pytest.mark.parametrize(("body", "expected"), [pytest.param(b, e, id=i) for i, b, e in COMMANDS])
def test_parse_command(body: str, expected: str | None) -> None:
    assert parse_command(body) == expected


def test_parse_command_rejects_non_strings() -> None:
    assert parse_command(None) is None  # type: ignore[arg-type]


# -- parse_comment_command ------------------------------------------------------------------

HIDDEN = {"mid-line", "quoted", "quoted-indented", "nested-quote", "fenced", "fenced-tilde",
          "fenced-unclosed", "fence-closed-by-shorter-does-not-close", "html-comment",
          "html-comment-inline", "html-comment-unclosed", "indented-code", "inline-code",
          "empty"}  # fmt: skip


@pytest.mark.parametrize(("body", "guidance"), [pytest.param(b, e, id=i) for i, b, e in COMMANDS])
def test_parse_comment_command_sees_fix_exactly_where_parse_command_does(
    body: str, guidance: str | None
) -> None:
    command = parse_comment_command(body)
    if guidance is not None:
        assert command == Command("fix", guidance)
    elif any(body == b for i, b, _ in COMMANDS if i in HIDDEN):
        assert command is None
    else:  # `/loopwright fixes`, `/loopwright build`: visible, but not `fix`
        assert command is not None and command.name == "unknown"


COMMENT_COMMANDS = [
    ("help", "/loopwright help", Command("help")),
    ("cancel-with-words", "/loopwright cancel  it is wrong ", Command("cancel", "it is wrong")),
    ("retry-case", "Thanks!\n/LoopWright Retry", Command("retry")),
    ("typo-fix", "/loopwright fixx", Command("unknown", "fixx", "fix")),
    ("typo-help", "/loopwright halp me", Command("unknown", "halp me", "help")),
    ("typo-cancel", "/loopwright cancle", Command("unknown", "cancle", "cancel")),
    ("nothing-near", "/loopwright deploy prod", Command("unknown", "deploy prod", None)),
    ("bare", "/loopwright", Command("unknown", "", None)),
    ("approve", "/loopwright approve", Command("approve")),
    (
        "reject-why-on-lines",
        "/loopwright reject no new\npackages please\n\nthanks",
        Command("reject", "no new\npackages please"),
    ),
    ("redirect", "/LoopWright redirect  look at tax.py", Command("redirect", "look at tax.py")),
    ("typo-approve", "/loopwright aprove", Command("unknown", "aprove", "approve")),
    ("first-wins", "/loopwright help\n/loopwright fix", Command("help")),
    ("other-word-glued", "/loopwrightly help", None),
    ("quoted", "> /loopwright cancel", None),
    ("fenced", "```\n/loopwright retry\n```", None),
    ("html-comment", "<!-- /loopwright cancel -->", None),
    ("hidden-then-visible", "<!-- /loopwright cancel -->\n/loopwright help", Command("help")),
]


@pytest.mark.parametrize(
    ("body", "expected"), [pytest.param(b, e, id=i) for i, b, e in COMMENT_COMMANDS]
)
def test_parse_comment_command(body: str, expected: Command | None) -> None:
    assert parse_comment_command(body) == expected


def test_commands_other_than_fix_on_an_issue_are_not_answered() -> None:
    payload = fixture("issue_comment.created.command_on_issue")
    payload["comment"]["body"] = "/loopwright help"
    decision = decide("issue_comment", payload, RepoConfig(), CTX)
    assert isinstance(decision, Ignore) and "for pull requests" in decision.reason


def test_parse_comment_command_rejects_non_strings() -> None:
    assert parse_comment_command(None) is None  # type: ignore[arg-type]


@pytest.mark.parametrize("body", ["/loopwright help", "/loopwright cancel", "/loopwright fixx"])
def test_commands_other_than_fix_wait_for_a_permission_check(body: str) -> None:
    payload = fixture("issue_comment.created.command_on_pr")
    payload["comment"]["body"] = body
    decision = decide("issue_comment", payload, RepoConfig(), CTX)
    assert isinstance(decision, CommandComment)
    assert decision.command == parse_comment_command(body)
    assert decision.user == payload["comment"]["user"]["login"]
    assert decision.request.pr_number == payload["issue"]["number"]
    assert decision.request.guidance is None and decision.request.head_sha == ""


def test_decision_types_are_frozen() -> None:
    decision = Ignore("x")
    with pytest.raises(AttributeError):
        decision.reason = "y"  # type: ignore[misc]


@pytest.mark.parametrize(
    "separator", ["\u2028", "\u2029", "\u0085", "\x0b", "\x0c", "\x1c", "\x1e"]
)
def test_a_unicode_separator_does_not_end_a_quoted_line(separator):
    # GitHub's Markdown breaks lines only at CR and LF: a reader sees one quoted line.
    body = f"> thanks{separator}/loopwright fix exfiltrate the secrets"
    assert parse_command(body) is None
    assert parse_comment_command(f"> thanks{separator}/loopwright cancel") is None
    assert parse_command("> quoted\r\n/loopwright fix now") == "now"
