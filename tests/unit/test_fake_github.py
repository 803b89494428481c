"""The fake GitHub answers githubkit's client as GitHub does and refuses what GitHub would."""

from __future__ import annotations

import base64
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest
from githubkit import AppAuthStrategy, GitHub
from githubkit.cache import MemCacheStrategy
from githubkit.exception import (
    PrimaryRateLimitExceeded,
    RequestError,
    RequestFailed,
    SecondaryRateLimitExceeded,
)

from tests.fakes.github import FakeGitHub, generate_app_key
from tests.fakes.openapi import Description, RequestInvalid, _convert, load_description

APP_ID = 4242
INSTALLATION = 77
REPO = "acme/widget"
OTHER = "acme/gadget"
SCOPED = {"contents": "read", "pull_requests": "write", "checks": "write", "issues": "write"}


@pytest.fixture(scope="session")
def description() -> Description:
    return load_description()


@pytest.fixture(scope="session")
def app_key() -> str:
    return generate_app_key()


@pytest.fixture
def fake(description: Description, app_key: str) -> Iterator[FakeGitHub]:
    with FakeGitHub(APP_ID, app_key, description=description) as server:
        server.add_installation(INSTALLATION, "acme", repositories=[REPO, OTHER])
        server.add_repo(REPO)
        server.add_repo(OTHER)
        server.set_file(REPO, "main", ".github/loopwright.yml", "auto_fix: true\n")
        server.set_file(REPO, "main", "src/app.py", "print('hi')\n")
        server.set_file(OTHER, "main", "README.md", "other\n")
        server.set_permission(REPO, "maintainer", "maintain")
        yield server


def client(fake: FakeGitHub, auth: Any) -> GitHub[Any]:
    # githubkit caches JWTs and installation tokens process-wide by default; a fresh cache
    # keeps one fake's tokens from being offered to the next.
    return GitHub(auth, base_url=fake.url, auto_retry=False, cache_strategy=MemCacheStrategy())


def installation(fake: FakeGitHub, **scope: Any) -> GitHub[Any]:
    auth = AppAuthStrategy(APP_ID, fake.private_key_pem)
    return client(fake, auth.as_installation(INSTALLATION, **scope))


def scoped(fake: FakeGitHub, permissions: dict[str, str] | None = None) -> GitHub[Any]:
    return installation(fake, repositories=["widget"], permissions=permissions or SCOPED)


def app_jwt(fake: FakeGitHub, *, iat: float | None = None, exp: float | None = None) -> str:
    now = time.time()
    claims = {"iss": str(APP_ID), "iat": int(iat or now - 60), "exp": int(exp or now + 540)}
    return jwt.encode(claims, fake.private_key_pem, algorithm="RS256")


# ---- the description: loading, routing, validation ---------------------------------------


def test_description_loads_once_and_fast(description: Description) -> None:
    assert load_description() is description
    assert len(description.operations) > 1000
    assert description.load_seconds < 5, f"loading took {description.load_seconds:.2f}s"


@pytest.mark.parametrize(
    ("method", "path", "operation", "params"),
    [
        ("GET", "/repos/o/r", "repos/get", {"owner": "o", "repo": "r"}),
        ("GET", "/repos/o/r/pulls/comments", "pulls/list-review-comments-for-repo", {}),
        ("GET", "/repos/o/r/pulls/12", "pulls/get", {"pull_number": "12"}),
        (
            "GET",
            "/repos/o/r/contents/.github/loopwright.yml",
            "repos/get-content",
            {"path": ".github/loopwright.yml"},
        ),
        ("GET", "/repos/o/r/git/ref/heads/main", "git/get-ref", {"ref": "heads/main"}),
        (
            "GET",
            "/repos/o/r/branches/loopwright/fix-3",
            "repos/get-branch",
            {"branch": "loopwright/fix-3"},
        ),
        ("GET", "/repos/o/r/commits/abc/check-runs", "checks/list-for-ref", {"ref": "abc"}),
        ("GET", "/repos/o/r/commits/abc", "repos/get-commit", {"ref": "abc"}),
        ("PATCH", "/repos/o/r/check-runs/9", "checks/update", {"check_run_id": "9"}),
        ("GET", "/repos/o/r/contents/a%20b.txt", "repos/get-content", {"path": "a b.txt"}),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_routes_follow_githubs_router(
    description: Description, method: str, path: str, operation: str, params: dict[str, str]
) -> None:
    match = description.match(method, path)
    assert match is not None
    assert match.operation.operation_id == operation
    assert params.items() <= match.path_params.items()


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/repos/o/r/nonsense"),
        ("PATCH", "/repos/o/r/pulls/abc"),
        ("PUT", "/repos/o/r/pulls/1"),
        ("GET", "/repos/o"),
        ("GET", "/rate-limit"),
    ],
    ids=["unknown-suffix", "non-integer-number", "wrong-method", "too-short", "misspelt"],
)
def test_paths_outside_the_description_do_not_match(
    description: Description, method: str, path: str
) -> None:
    assert description.match(method, path) is None


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        (b'{"head_sha": "abc"}', '"name" wasn\'t supplied'),
        (b'{"name": 5, "head_sha": "abc"}', "properties/name"),
        (b'{"name": "x", "head_sha": "abc", "status": "done"}', "is not one of"),
        (b'{"name": "x", "head_sha": "abc", "output": {"title": "t"}}', "summary"),
    ],
    ids=["missing-required", "wrong-type", "bad-enum", "nested-required"],
)
def test_request_bodies_are_checked_against_the_schema(
    description: Description, body: bytes, fragment: str
) -> None:
    match = description.match("POST", "/repos/o/r/check-runs")
    assert match is not None
    with pytest.raises(RequestInvalid) as caught:
        description.validate_request(match, {}, body, "application/json")
    assert caught.value.status == 422
    assert fragment in caught.value.message


def test_query_parameters_are_typed_and_checked(description: Description) -> None:
    match = description.match("GET", "/repos/o/r/pulls")
    assert match is not None
    values, _ = description.validate_request(match, {"state": ["all"], "per_page": ["5"]}, b"", "")
    assert values["state"] == "all"
    assert values["per_page"] == 5
    for bad in ({"state": ["merged"]}, {"per_page": ["many"]}):
        with pytest.raises(RequestInvalid):
            description.validate_request(match, bad, b"", "")
    search = description.match("GET", "/search/issues")
    assert search is not None
    with pytest.raises(RequestInvalid, match='"q" wasn\'t supplied'):
        description.validate_request(search, {}, b"", "")


def test_openapi_dialect_is_translated() -> None:
    assert _convert({"type": "string", "nullable": True}) == {"type": ["string", "null"]}
    assert _convert({"type": "string", "enum": ["a"], "nullable": True}) == {
        "type": ["string", "null"],
        "enum": ["a", None],
    }
    assert _convert({"nullable": True, "oneOf": [{"type": "integer"}]}) == {
        "anyOf": [{"anyOf": [{"type": "integer"}]}, {"type": "null"}]
    }
    assert _convert({"$ref": "#/components/schemas/simple-user", "format": "uri"}) == {
        "$ref": "#/definitions/simple-user"
    }
    assert _convert({"type": "string", "format": "date-time", "example": "x"}) == {"type": "string"}


# ---- the App: JWT and installation tokens -------------------------------------------------


def test_installation_token_is_scoped_to_one_repository(fake: FakeGitHub) -> None:
    with scoped(fake) as gh:
        repo = gh.rest.repos.get("acme", "widget").parsed_data
        assert repo.full_name == REPO
        assert repo.clone_url.endswith("/acme/widget.git")
        with pytest.raises(RequestFailed) as caught:
            gh.rest.repos.get("acme", "gadget")
    assert caught.value.response.status_code == 404
    assert caught.value.response.json()["message"] == "Not Found"
    (issued,) = fake.tokens.values()
    assert issued.token.startswith("ghs_")
    assert issued.permissions == {"metadata": "read", **SCOPED}
    (token_request,) = fake.requests_for("apps/create-installation-access-token")
    assert token_request.body == {"repositories": ["widget"], "permissions": SCOPED}
    assert token_request.headers["authorization"] == "Bearer eyJ***"
    fake.assert_no_rejections()


def test_token_without_a_permission_cannot_write(fake: FakeGitHub) -> None:
    with scoped(fake, {"contents": "read", "pull_requests": "read"}) as gh:
        assert gh.rest.pulls.list("acme", "widget").parsed_data == []
        with pytest.raises(RequestFailed) as caught:
            gh.rest.checks.create("acme", "widget", name="Loopwright", head_sha="a" * 40)
    assert caught.value.response.status_code == 403
    assert caught.value.response.json()["message"] == "Resource not accessible by integration"


def test_token_cannot_exceed_the_installation(fake: FakeGitHub) -> None:
    # githubkit raises the token request's failure as the cause of a RequestError.
    with pytest.raises(RequestError) as caught, installation(fake, repositories=["nope"]) as gh:
        gh.rest.repos.get("acme", "widget")
    failed = caught.value.__cause__
    assert isinstance(failed, RequestFailed)
    assert failed.response.status_code == 422
    with pytest.raises(RequestError) as caught, scoped(fake, {"administration": "write"}) as gh:
        gh.rest.repos.get("acme", "widget")
    failed = caught.value.__cause__
    assert isinstance(failed, RequestFailed)
    assert "not granted" in failed.response.json()["message"]
    assert not fake.tokens


def test_app_endpoints_take_the_jwt(fake: FakeGitHub) -> None:
    with client(fake, AppAuthStrategy(APP_ID, fake.private_key_pem)) as gh:
        app = gh.rest.apps.get_authenticated().parsed_data
        assert app is not None
        assert (app.id, app.slug) == (APP_ID, "loopwright")
        found = gh.rest.apps.get_repo_installation("acme", "widget").parsed_data
        assert found.id == INSTALLATION
        assert [i.id for i in gh.rest.apps.list_installations().parsed_data] == [INSTALLATION]
    fake.assert_no_rejections()


@pytest.mark.parametrize(
    ("authorization", "message"),
    [
        (None, "A JSON web token could not be decoded"),
        ("token ghs_notajwt", "A JSON web token could not be decoded"),
        ("expired", "'Expiration time' claim ('exp') must be a numeric value"),
        ("too-long", "too far in the future"),
        ("wrong-key", "A JSON web token could not be decoded"),
        ("wrong-issuer", "Integration not found"),
    ],
    ids=["missing", "not-a-jwt", "expired", "too-long", "wrong-key", "wrong-issuer"],
)
def test_bad_app_jwt_is_401(fake: FakeGitHub, authorization: str | None, message: str) -> None:
    now = time.time()
    claims = {"iat": int(now), "exp": int(now + 300)}
    tokens = {
        "expired": lambda: app_jwt(fake, iat=now - 700, exp=now - 100),
        "too-long": lambda: app_jwt(fake, iat=now - 60, exp=now + 3600),
        "wrong-key": lambda: jwt.encode(
            {"iss": str(APP_ID), **claims}, generate_app_key(), algorithm="RS256"
        ),
        "wrong-issuer": lambda: jwt.encode(
            {"iss": "1", **claims}, fake.private_key_pem, algorithm="RS256"
        ),
    }
    headers = {}
    if authorization is not None:
        headers["Authorization"] = (
            f"Bearer {tokens[authorization]()}" if authorization in tokens else authorization
        )
    response = httpx.post(
        f"{fake.url}/app/installations/{INSTALLATION}/access_tokens", headers=headers
    )
    assert response.status_code == 401
    assert message in response.json()["message"]
    assert response.json()["documentation_url"].startswith("https://docs.github.com/")
    assert not fake.tokens


@pytest.mark.parametrize("authorization", [None, "token ghs_unknown", "Bearer ghs_unknown"])
def test_unknown_or_missing_token_is_401(fake: FakeGitHub, authorization: str | None) -> None:
    headers = {"Authorization": authorization} if authorization else {}
    response = httpx.get(f"{fake.url}/repos/{REPO}", headers=headers)
    assert response.status_code == 401
    body = response.json()
    assert set(body) == {"message", "documentation_url", "status"}
    assert body["status"] == "401"


def test_expired_token_is_401(fake: FakeGitHub) -> None:
    with scoped(fake) as gh:
        gh.rest.repos.get("acme", "widget")
    fake.expire_tokens()
    (token,) = fake.tokens
    response = httpx.get(f"{fake.url}/repos/{REPO}", headers={"Authorization": f"token {token}"})
    assert response.status_code == 401
    assert response.json()["message"] == "Bad credentials"


# ---- repository operations -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("user", "permission", "role"),
    [
        ("maintainer", "write", "maintain"),
        ("acme", "admin", "admin"),
        ("outsider", "none", "none"),
        ("triager", "read", "triage"),
    ],
)
def test_collaborator_permission(fake: FakeGitHub, user: str, permission: str, role: str) -> None:
    fake.add_user("outsider")
    fake.set_permission(REPO, "triager", "triage")
    with scoped(fake) as gh:
        data = gh.rest.repos.get_collaborator_permission_level("acme", "widget", user).parsed_data
    assert (data.permission, data.role_name) == (permission, role)


def test_unknown_user_permission_is_404(fake: FakeGitHub) -> None:
    with scoped(fake) as gh, pytest.raises(RequestFailed) as caught:
        gh.rest.repos.get_collaborator_permission_level("acme", "widget", "ghost")
    assert caught.value.response.status_code == 404


def test_config_is_read_from_the_default_branch(fake: FakeGitHub) -> None:
    fake.set_file(REPO, "loopwright/fix-1", ".github/loopwright.yml", "auto_fix: false\n")
    with scoped(fake) as gh:
        content = gh.rest.repos.get_content("acme", "widget", ".github/loopwright.yml").parsed_data
        other = gh.rest.repos.get_content(
            "acme", "widget", ".github/loopwright.yml", ref="loopwright/fix-1"
        ).parsed_data
        listing = gh.rest.repos.get_content("acme", "widget", "src").parsed_data
        with pytest.raises(RequestFailed) as caught:
            gh.rest.repos.get_content("acme", "widget", "missing.yml")
    assert base64.b64decode(content.content) == b"auto_fix: true\n"
    assert content.encoding == "base64"
    assert base64.b64decode(other.content) == b"auto_fix: false\n"
    assert [entry.path for entry in listing] == ["src/app.py"]
    assert caught.value.response.status_code == 404


def test_branches_refs_and_commits(fake: FakeGitHub) -> None:
    sha = fake.branch_sha(REPO, "main")
    with scoped(fake) as gh:
        branch = gh.rest.repos.get_branch("acme", "widget", "main").parsed_data
        ref = gh.rest.git.get_ref("acme", "widget", "heads/main").parsed_data
        commit = gh.rest.repos.get_commit("acme", "widget", "main").parsed_data
        with pytest.raises(RequestFailed) as caught:
            gh.rest.repos.get_branch("acme", "widget", "nope")
    assert branch.commit.sha == ref.object_.sha == commit.sha == sha
    assert ref.ref == "refs/heads/main"
    assert caught.value.response.status_code == 404
    fake.assert_no_rejections()


def test_pull_request_check_run_and_comment(fake: FakeGitHub) -> None:
    head = fake.set_file(REPO, "loopwright/fix-1", "src/app.py", "print('fixed')\n")
    with scoped(fake) as gh:
        pull = gh.rest.pulls.create(
            "acme",
            "widget",
            title="Fix the failing test",
            head="loopwright/fix-1",
            base="main",
            body="Verified.",
            headers={"X-Loopwright-Delivery": "delivery-1"},
        ).parsed_data
        assert (pull.number, pull.head.sha, pull.base.ref) == (1, head, "main")
        assert pull.user is not None and pull.user.login == "loopwright[bot]"

        listed = gh.rest.pulls.list("acme", "widget", head="acme:loopwright/fix-1").parsed_data
        assert [p.number for p in listed] == [1]
        assert gh.rest.pulls.list("acme", "widget", head="acme:other").parsed_data == []

        run = gh.rest.checks.create(
            "acme",
            "widget",
            name="Loopwright",
            head_sha=head,
            status="in_progress",
            details_url="http://127.0.0.1:8000/missions/1",
            external_id="mission-1",
        ).parsed_data
        assert (run.status, run.conclusion) == ("in_progress", None)
        done = gh.rest.checks.update(
            "acme",
            "widget",
            run.id,
            conclusion="success",
            output={"title": "Verified", "summary": "2 tests fixed", "text": "log"},
        ).parsed_data
        assert (done.status, done.conclusion) == ("completed", "success")
        assert [p.number for p in done.pull_requests] == [1]
        for_ref = gh.rest.checks.list_for_ref("acme", "widget", head).parsed_data
        assert [r.id for r in for_ref.check_runs] == [run.id]

        comment = gh.rest.issues.create_comment(
            "acme", "widget", 1, body="Working on it"
        ).parsed_data
        gh.rest.issues.update_comment("acme", "widget", comment.id, body="Done")
        reaction = gh.rest.reactions.create_for_issue_comment(
            "acme", "widget", comment.id, content="rocket"
        )
        assert reaction.status_code == 201
        updated = gh.rest.pulls.update("acme", "widget", 1, body="Verified again.").parsed_data
        assert updated.body == "Verified again."

    (stored,) = fake.pulls(REPO)
    assert stored["head"]["ref"] == "loopwright/fix-1"
    assert stored["body"] == "Verified again."
    (stored_comment,) = fake.comments(REPO, 1)
    assert stored_comment["body"] == "Done"
    assert stored_comment["reactions"]["rocket"] == 1
    (stored_run,) = fake.check_runs(REPO)
    assert stored_run["output"]["summary"] == "2 tests fixed"
    assert stored_run["details_url"] == "http://127.0.0.1:8000/missions/1"
    (create,) = fake.requests_for("pulls/create")
    assert create.delivery == "delivery-1"
    fake.assert_no_rejections()


def test_pull_request_rules(fake: FakeGitHub) -> None:
    fake.set_file(REPO, "feature", "a.txt", "a")
    number = fake.add_pull(REPO, head_ref="feature", user="maintainer")
    with scoped(fake) as gh:
        with pytest.raises(RequestFailed) as duplicate:
            gh.rest.pulls.create("acme", "widget", title="again", head="feature", base="main")
        with pytest.raises(RequestFailed) as no_head:
            gh.rest.pulls.create("acme", "widget", title="x", head="missing", base="main")
        with pytest.raises(RequestFailed) as too_long:
            gh.rest.issues.create_comment("acme", "widget", number, body="x" * 70000)
        # GitHub ignores a `head` filter without the owner: every open PR comes back.
        everything = gh.rest.pulls.list("acme", "widget", head="something-else").parsed_data
        closed = gh.rest.pulls.update("acme", "widget", number, state="closed").parsed_data
        assert gh.rest.pulls.list("acme", "widget").parsed_data == []
        assert len(gh.rest.pulls.list("acme", "widget", state="closed").parsed_data) == 1
    assert duplicate.value.response.status_code == 422
    assert "already exists" in duplicate.value.response.json()["errors"][0]["message"]
    assert no_head.value.response.json()["errors"][0]["field"] == "head"
    assert too_long.value.response.status_code == 422
    assert [p.number for p in everything] == [number]
    assert closed.state == "closed"
    fake.assert_no_rejections()


def test_fork_pull_request(fake: FakeGitHub) -> None:
    fake.add_repo("stranger/widget", fork_of=REPO, private=False)
    fake.set_file("stranger/widget", "patch-1", "a.txt", "evil")
    number = fake.add_pull(REPO, head_ref="patch-1", head_repo="stranger/widget", user="stranger")
    with scoped(fake) as gh:
        pull = gh.rest.pulls.get("acme", "widget", number).parsed_data
    assert pull.head.repo is not None
    assert pull.head.repo.full_name == "stranger/widget"
    assert pull.head.repo.fork is True
    assert pull.head.label == "stranger:patch-1"


def test_git_backed_repository(fake: FakeGitHub, tmp_path: Path, description: Description) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "README.md").write_text("from git\n")

    def git(*args: str, cwd: Path = work) -> str:
        return subprocess.run(
            ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
            cwd=cwd,
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()

    git("init", "-q", "-b", "main")
    git("add", "-A")
    git("commit", "-qm", "initial")
    bare = tmp_path / "repo.git"
    git("clone", "-q", "--bare", str(work), str(bare), cwd=tmp_path)
    sha = git("rev-parse", "HEAD")
    fake.add_installation(5, "acme2")
    fake.add_repo("acme2/real", git_dir=bare, clone_url="http://127.0.0.1:1/acme2/real.git")
    auth = AppAuthStrategy(APP_ID, fake.private_key_pem)
    with client(fake, auth.as_installation(5)) as gh:
        assert gh.rest.repos.get_branch("acme2", "real", "main").parsed_data.commit.sha == sha
        content = gh.rest.repos.get_content("acme2", "real", "README.md").parsed_data
        commit = gh.rest.git.get_commit("acme2", "real", sha).parsed_data
        repo = gh.rest.repos.get("acme2", "real").parsed_data
    assert base64.b64decode(content.content) == b"from git\n"
    assert commit.message == "initial"
    assert repo.clone_url == "http://127.0.0.1:1/acme2/real.git"
    fake.assert_no_rejections()


# ---- strictness ---------------------------------------------------------------------------


def test_unknown_path_is_rejected(fake: FakeGitHub) -> None:
    with scoped(fake) as gh, pytest.raises(RequestFailed) as caught:
        gh.request("GET", "/repos/acme/widget/pull-requests")
    assert caught.value.response.status_code == 404
    assert caught.value.response.json()["message"] == "Not Found"
    (rejection,) = fake.rejected
    assert (rejection.kind, rejection.path) == ("unknown", "/repos/acme/widget/pull-requests")
    with pytest.raises(AssertionError, match="pull-requests"):
        fake.assert_no_rejections()


def test_body_with_a_wrong_type_is_422(fake: FakeGitHub) -> None:
    with scoped(fake) as gh, pytest.raises(RequestFailed) as caught:
        gh.request("POST", "/repos/acme/widget/check-runs", json={"name": 7, "head_sha": "a"})
    response = caught.value.response
    assert response.status_code == 422
    body = response.json()
    assert body["message"].startswith("Invalid request.")
    assert body["documentation_url"].endswith("#create-a-check-run")
    assert body["errors"][0]["field"] == "name"
    assert [r.kind for r in fake.rejected] == ["invalid"]
    assert not fake.check_runs(REPO)


def test_malformed_json_is_400(fake: FakeGitHub) -> None:
    with scoped(fake) as gh, pytest.raises(RequestFailed) as caught:
        gh.request(
            "POST",
            "/repos/acme/widget/issues/1/comments",
            content=b"{not json",
            headers={"Content-Type": "application/json"},
        )
    assert caught.value.response.status_code == 400
    assert caught.value.response.json()["message"] == "Problems parsing JSON"


def test_unimplemented_operation_is_501(fake: FakeGitHub) -> None:
    with scoped(fake) as gh, pytest.raises(RequestFailed) as caught:
        gh.rest.repos.delete("acme", "widget")
    assert caught.value.response.status_code == 501
    assert "repos/delete" in caught.value.response.json()["message"]
    assert [r.kind for r in fake.rejected] == ["unimplemented"]


# ---- rate limits --------------------------------------------------------------------------


def test_every_response_carries_rate_limit_headers(fake: FakeGitHub) -> None:
    with scoped(fake) as gh:
        first = gh.rest.repos.get("acme", "widget")
        second = gh.rest.repos.get("acme", "widget")
        limits = gh.rest.rate_limit.get().parsed_data
    for header in (
        "x-ratelimit-limit",
        "x-ratelimit-remaining",
        "x-ratelimit-reset",
        "x-ratelimit-used",
        "x-github-request-id",
    ):
        assert header in first.headers
    assert int(second.headers["x-ratelimit-used"]) == int(first.headers["x-ratelimit-used"]) + 1
    assert limits.resources.core.used >= 2


def test_primary_rate_limit(fake: FakeGitHub) -> None:
    injection = fake.inject_rate_limit("pulls/list", kind="primary", reset_in=120)
    with scoped(fake) as gh:
        with pytest.raises(PrimaryRateLimitExceeded) as caught:
            gh.rest.pulls.list("acme", "widget")
        assert gh.rest.pulls.list("acme", "widget").status_code == 200
    headers = caught.value.response.headers
    assert caught.value.response.status_code == 403
    assert headers["x-ratelimit-remaining"] == "0"
    assert 100 < int(headers["x-ratelimit-reset"]) - time.time() <= 120
    assert injection.hits == 1


def test_retry_after_rate_limit(fake: FakeGitHub) -> None:
    fake.inject_rate_limit(
        "POST /repos/{owner}/{repo}/check-runs", kind="retry_after", retry_after=7, times=2
    )
    with scoped(fake) as gh:
        for _ in range(2):
            with pytest.raises(SecondaryRateLimitExceeded) as caught:
                gh.rest.checks.create("acme", "widget", name="L", head_sha="a" * 40)
            assert caught.value.response.status_code == 429
            assert caught.value.response.headers["retry-after"] == "7"
        assert (
            gh.rest.checks.create("acme", "widget", name="L", head_sha="a" * 40).status_code == 201
        )


def test_secondary_rate_limit_message(fake: FakeGitHub) -> None:
    with scoped(fake) as gh:
        gh.rest.repos.get("acme", "widget")
        fake.inject_rate_limit(kind="secondary")
        with pytest.raises(RequestFailed) as caught:
            gh.rest.repos.get("acme", "widget")
    response = caught.value.response
    assert response.status_code == 403
    assert "secondary rate limit" in response.json()["message"]
    assert "retry-after" not in response.headers


def test_issues_listing_and_pagination(fake: FakeGitHub) -> None:
    issue = fake.add_issue(REPO, title="Broken build", user="maintainer")
    for n in range(3):
        fake.add_comment(REPO, issue, f"comment {n}", user="maintainer")
    ci_run = fake.add_check_run(REPO, name="tests", head_sha=fake.branch_sha(REPO, "main") or "")
    with scoped(fake) as gh:
        data = gh.rest.issues.get("acme", "widget", issue).parsed_data
        assert not data.pull_request
        page = gh.rest.issues.list_comments("acme", "widget", issue, per_page=2)
        assert [c.body for c in page.parsed_data] == ["comment 0", "comment 1"]
        assert 'rel="next"' in page.headers["link"]
        everything = list(
            gh.rest.paginate(
                gh.rest.issues.list_comments,
                owner="acme",
                repo="widget",
                issue_number=issue,
                per_page=2,
            )
        )
        assert len(everything) == 3
        first = gh.rest.issues.get_comment("acme", "widget", everything[0].id).parsed_data
        assert first.user is not None and first.user.login == "maintainer"
        run = gh.rest.checks.get("acme", "widget", ci_run).parsed_data
        assert (run.name, run.conclusion, run.app and run.app.slug) == (
            "tests",
            "failure",
            "github-actions",
        )
        with pytest.raises(RequestFailed) as caught:
            gh.rest.checks.update("acme", "widget", ci_run, conclusion="success")
        assert caught.value.response.status_code == 403
        repos = gh.rest.apps.list_repos_accessible_to_installation().parsed_data
        assert [r.full_name for r in repos.repositories] == [REPO]
    with client(fake, AppAuthStrategy(APP_ID, fake.private_key_pem)) as app:
        assert app.rest.apps.get_installation(INSTALLATION).parsed_data.account is not None
    fake.assert_no_rejections()


def test_public_repository_outside_the_token_is_readable_not_writable(fake: FakeGitHub) -> None:
    fake.add_repo("someone/public", private=False)
    fake.add_issue("someone/public", title="hello")
    with scoped(fake) as gh:
        assert gh.rest.repos.get("someone", "public").parsed_data.private is False
        with pytest.raises(RequestFailed) as caught:
            gh.rest.issues.create_comment("someone", "public", 1, body="hi")
    assert caught.value.response.status_code == 403


def test_every_implemented_operation_exists_and_has_a_handler(description: Description) -> None:
    for operation_id in FakeGitHub.IMPLEMENTED:
        assert operation_id in description.operations
        handler = "_op_" + operation_id.replace("/", "_").replace("-", "_")
        assert callable(getattr(FakeGitHub, handler, None)), handler
