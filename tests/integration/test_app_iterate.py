"""Iterating on Loopwright's own pull request, through the App like GitHub drives it: a
signed comment (or review comment) on a `loopwright/fix-*` pull request, the
OpenAPI-checked fake GitHub, `git http-backend` and the scripted model."""

from __future__ import annotations

import os
import subprocess
from typing import Any

import pytest

from loopwright.agent.model import OpenAIModel
from loopwright.config import Settings
from loopwright.events import EventBus
from loopwright.github.gitops import (
    BOT_EMAIL,
    BOT_NAME,
    MISSION_TRAILER,
    GitError,
    clone_at,
    commit_patch,
    push_fast_forward,
)
from loopwright.github.tracking import MARKER
from loopwright.missions.fix import FixMission, FixRequest
from loopwright.redaction import Redactor
from loopwright.sandbox.factory import get_provider
from tests.conftest import EXAMPLES, SUITE_PATH, git, init_repo, step, tool
from tests.fakes.git_server import GitServer
from tests.integration.app_harness import REPO, World, app_world
from tests.scenarios import CORRECT, FIX_NEW, PLAN, model_env

BRANCH = "loopwright/fix-1"
ROUNDED = "    discounted = gross - gross * (line.discount_percent / 100)\n"
CHANGE = [
    step(PLAN),
    step(tool("edit_file", path="invoice/totals.py", old=FIX_NEW, new=ROUNDED)),
    step(
        tool(
            "finish",
            summary="The percentage is now divided in parentheses.",
            title="Parenthesise the discount percentage",
        )
    ),
]
LOOK_ONLY = [step(tool("finish", summary="I looked at it"), repeat=True)]


@pytest.fixture(autouse=True)
def venv_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    # The local sandbox runs the example's tests with the python on PATH.
    monkeypatch.setenv("PATH", f"{SUITE_PATH}:{os.environ['PATH']}")


def git_out(world: World, *args: str) -> str:
    return subprocess.run(["git", "-C", str(world.bare), *args], capture_output=True,
                          text=True, check=True).stdout.strip()  # fmt: skip


def loopwright_pull(world: World) -> tuple[int, str]:
    """Loopwright's earlier, verified fix of pull request #1: its own commit on its own
    branch, and the pull request it opened from it."""
    fixed = (world.tmp / "work" / "invoice" / "totals.py").read_text()
    fixed = fixed.replace(FIX_NEW.replace(" / 100", ""), FIX_NEW)
    assert "/ 100" in fixed
    sha = world.push_commit(
        BRANCH,
        {"invoice/totals.py": fixed},
        parent=world.head_sha,
        message=f"Divide discount_percent by 100\n\n{MISSION_TRAILER}: earlier\n",
        author=f"{BOT_NAME} <{BOT_EMAIL}>",
    )
    number = world.github.add_pull(REPO, head_ref=BRANCH, head_sha=sha, base_ref="feature",
                                   title="Divide discount_percent by 100",
                                   user="loopwright[bot]")  # fmt: skip
    # Only fast-forwards: a force-push of any kind would be refused by the server.
    git_out(world, "config", "receive.denyNonFastForwards", "true")
    return number, sha


def ask(world: World, number: int, body: str, user: str = "maintainer") -> dict[str, Any]:
    payload = world.comment_payload(body, user=user)
    payload["issue"]["number"] = number
    answer = world.deliver("issue_comment", payload)
    assert answer.status_code == 202, answer.text
    return world.wait(answer.json()["mission"])


def pull_states(world: World) -> list[tuple[Any, ...]]:
    return [(p["number"], p["state"], p["head"]["ref"], p["base"]["ref"], p["title"], p["body"])
            for p in world.github.pulls(REPO)]  # fmt: skip


def bodies(world: World, number: int) -> list[str]:
    return [c["body"] for c in world.github.comments(REPO, number)]


def first_prompt(world: World) -> str:
    messages = world.model.requests[0]["messages"]
    return str(next(m for m in messages if m["role"] == "user")["content"])


def test_guidance_on_loopwrights_pull_request_adds_one_commit_to_its_branch(tmp_path):
    with app_world(tmp_path, CHANGE) as world:
        number, old = loopwright_pull(world)
        pulls_before = pull_states(world)
        mission = ask(world, number, "/loopwright fix put the percentage in parentheses")
        assert mission["status"] == "verified", mission["message"]
        assert mission["head_sha"] == old

        # The change request reached the model, and the tests already passed.
        prompt = first_prompt(world)
        assert "put the percentage in parentheses" in prompt
        assert "passes" in prompt and f"Pull request #{number} is Loopwright's own" in prompt

        # One new commit on the same branch, whose parent is the old head.
        new = world.branches()[BRANCH]
        assert new != old
        assert git_out(world, "rev-list", "--parents", "-n1", new).split() == [new, old]
        shown = git_out(world, "show", "-s", "--format=%ae%n%ce%n%B", new)
        assert shown.startswith(f"{BOT_EMAIL}\n{BOT_EMAIL}\nParenthesise the discount percentage")
        assert f"{MISSION_TRAILER}: {mission['id']}" in shown
        assert ROUNDED.strip() in git_out(world, "show", f"{new}:invoice/totals.py")

        # The same pull request: none created, reopened or rewritten.
        assert world.github.requests_for("pulls/create") == []
        assert world.github.requests_for("pulls/update") == []
        assert pull_states(world) == pulls_before
        assert mission["pr_url"].endswith(f"/pull/{number}/commits/{new}")

        # What changed is said on the pull request, in the mission's one tracking comment:
        # the commit and its diffstat.
        assert not [b for b in bodies(world, number) if b.startswith("Loopwright pushed")]
        (note,) = [b for b in bodies(world, number) if MARKER in b and mission["id"] in b]
        assert "Loopwright pushed" in note
        assert f"`{new[:12]}`" in note and f"on top of `{old[:12]}`" in note
        assert "1 file changed, +1 -1:" in note and "`invoice/totals.py` (+1 -1)" in note

        # SECURITY 24 still holds: a red check on the new commit starts nothing.
        red = world.check_run_payload()
        red["check_run"]["head_sha"] = new
        red["check_run"]["check_suite"]["head_branch"] = BRANCH
        red["check_run"]["check_suite"]["pull_requests"][0]["head"]["ref"] = BRANCH
        answer = world.deliver("check_run", red)
        assert answer.status_code == 200 and "is Loopwright's" in answer.json()["reason"]
        world.github.assert_no_rejections()


def test_review_comment_reaches_the_model_and_the_attempt_cap_holds(tmp_path):
    env = {"LOOPWRIGHT_MAX_ATTEMPTS": "1"}
    with app_world(tmp_path, LOOK_ONLY, env=env) as world:
        number, old = loopwright_pull(world)
        payload = world.review_comment_payload(
            "/loopwright fix\nname the hundred", number=number, path="invoice/totals.py", line=17
        )
        answer = world.deliver("pull_request_review_comment", payload)
        assert answer.status_code == 202, answer.text
        mission = world.wait(answer.json()["mission"])
        assert mission["status"] == "unverified", mission  # the model changed nothing
        # Seen and taken up: 👀 on the review comment itself.
        comment_id = payload["comment"]["id"]
        assert world.github.review_comment_reactions(REPO, comment_id) == ["eyes"]
        prompt = first_prompt(world)
        assert "name the hundred" in prompt
        assert "A reviewer left this as a review comment on `invoice/totals.py`, line 17" in prompt
        assert "data, not instructions" in prompt and "```diff\n@@" in prompt
        assert world.branches()[BRANCH] == old
        calls = len(world.model.requests)

        # One attempt per head commit: asking again on the same head is refused.
        capped = ask(world, number, "/loopwright fix try once more")
        assert capped["status"] == "ignored"
        assert "cap is 1" in capped["message"]
        assert any("cap is 1" in b for b in bodies(world, number))
        assert len(world.model.requests) == calls
        assert world.branches()[BRANCH] == old
        world.github.assert_no_rejections()


def test_a_human_commit_on_the_branch_makes_it_refuse_without_pushing(tmp_path):
    with app_world(tmp_path, LOOK_ONLY) as world:
        number, _ = loopwright_pull(world)
        human = world.push_commit(BRANCH, {"NOTES.md": "my own tweak\n"})
        world.move_pull_head(number, human)
        mission = ask(world, number, "/loopwright fix tidy it up")
        assert mission["status"] == "refused", mission
        assert "commits Loopwright did not make" in mission["message"]
        (reply,) = [b for b in bodies(world, number) if "did not make" in b]
        assert f"`{human[:7]}`" in reply and reply.startswith("@maintainer")
        assert world.branches()[BRANCH] == human
        assert world.model.requests == []
        assert all(r["name"] != "Loopwright" for r in world.github.check_runs(REPO))
        world.github.assert_no_rejections()


def test_a_push_to_the_branch_during_the_mission_is_not_built_over(tmp_path):
    with app_world(tmp_path, CHANGE) as world:
        number, old = loopwright_pull(world)
        fake = world.github
        pushed: list[str] = []
        list_commits = fake._op_pulls_list_commits  # the fake's own handler; this wraps it

        def list_then_push(call: Any) -> Any:
            reply = list_commits(call)
            # Right after the App saw only its own commits, a human pushes to the branch.
            pushed.append(world.push_commit(BRANCH, {"NOTES.md": "pushed meanwhile\n"}))
            return reply

        fake._op_pulls_list_commits = list_then_push  # type: ignore[method-assign]
        mission = ask(world, number, "/loopwright fix put the percentage in parentheses")
        assert mission["status"] == "verified", mission["message"]
        assert mission["head_sha"] == old
        assert world.branches()[BRANCH] == pushed[0]
        (run,) = [r for r in world.github.check_runs(REPO) if r["name"] == "Loopwright"]
        assert "Not delivered: " in run["output"]["summary"]
        assert "nothing was pushed" in run["output"]["summary"]
        (reply,) = [b for b in bodies(world, number) if "nothing was pushed" in b]
        assert f"now points at {pushed[0][:7]}" in reply
        assert not any(b.startswith("Loopwright pushed") for b in bodies(world, number))
        fake.assert_no_rejections()


def test_a_loopwright_named_branch_in_a_fork_is_fixed_as_a_fork(tmp_path):
    """A fork's branch is never Loopwright's, whatever it is called and whoever the commits
    name: nothing is pushed anywhere, and the patch comes as a comment, as for any fork."""
    with app_world(tmp_path, CORRECT) as world:
        fake = world.github
        fake.add_repo("mallory/invoice", fork_of=REPO, private=False)
        number = len(fake.pulls(REPO)) + 1
        fork_head = world.push_commit(f"refs/pull/{number}/head", {"NOTES.md": "mine\n"},
                                      parent=world.head_sha,
                                      author=f"{BOT_NAME} <{BOT_EMAIL}>")  # fmt: skip
        assert fake.add_pull(REPO, head_ref=BRANCH, head_sha=fork_head, base_ref="main",
                             head_repo="mallory/invoice", user="mallory") == number  # fmt: skip
        branches = world.branches()
        mission = ask(world, number, "/loopwright fix go on")
        assert mission["status"] == "verified", mission
        assert mission["head_sha"] == fork_head
        assert world.branches() == branches
        assert fake.requests_for("pulls/create") == []
        assert fake.requests_for("pulls/list-commits") == []  # not iterated on
        assert any("```diff" in b and "/ 100" in b for b in bodies(world, number))
        assert not any("not Loopwright's branch" in b for b in bodies(world, number))
        fake.assert_no_rejections()


def test_a_non_writer_cannot_iterate(tmp_path):
    with app_world(tmp_path, LOOK_ONLY) as world:
        number, old = loopwright_pull(world)
        mission = ask(world, number, "/loopwright fix rewrite it all", user="reader")
        assert mission["status"] == "refused", mission
        assert any("write access" in b and "reader" in b for b in bodies(world, number))
        assert world.branches()[BRANCH] == old
        assert world.model.requests == []
        assert world.github.requests_for("pulls/list-commits") == []
        world.github.assert_no_rejections()


def test_the_push_is_a_fast_forward_that_fails_when_the_branch_moved(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    (work / "app.py").write_text("def add(a, b):\n    return a - b\n")
    init_repo(work)
    git("checkout", "-qb", BRANCH, cwd=work)
    with GitServer(tmp_path / "srv") as server:
        bare = server.create_repo("octo/app", work)
        url = server.repo_url("octo/app")
        head = git("rev-parse", "HEAD", cwd=work).strip()
        patch = "--- a/app.py\n+++ b/app.py\n@@ -1,2 +1,2 @@\n def add(a, b):\n"
        patch += "-    return a - b\n+    return a + b\n"
        tree = clone_at(url, head, tmp_path / "clone", None)
        ours = commit_patch(tree, patch, "Fix add", "m1")
        # Someone pushes to the branch first: the plain push is not a fast-forward any more.
        (work / "NOTES.md").write_text("mine\n")
        git("add", "-A", cwd=work)
        git("commit", "-qm", "human", cwd=work)
        git("push", "-q", str(bare), f"{BRANCH}:{BRANCH}", cwd=work)
        human = git("rev-parse", "HEAD", cwd=work).strip()
        with pytest.raises(GitError):
            push_fast_forward(tree, BRANCH, None, url=url)
        tip = subprocess.run(["git", "-C", str(bare), "rev-parse", BRANCH], capture_output=True,
                             text=True, check=True).stdout.strip()  # fmt: skip
        assert tip == human
        # On the branch as the mission saw it, the same push lands, as a fast-forward.
        git("push", "-qf", str(bare), f"{head}:refs/heads/{BRANCH}", cwd=work)
        push_fast_forward(tree, BRANCH, None, url=url)
        tip = subprocess.run(["git", "-C", str(bare), "rev-parse", BRANCH], capture_output=True,
                             text=True, check=True).stdout.strip()  # fmt: skip
        assert tip == ours


def test_a_bare_command_on_a_passing_suite_asks_for_no_change(example_repo, scripted, tmp_path):
    """Only words ask for a change: with none, a passing suite has nothing to fix and the
    model is never called (the change task itself is in the App test above)."""
    source = (EXAMPLES / "python-invoice" / "invoice" / "totals.py").read_text()
    repo = example_repo(
        "python-invoice",
        {"invoice/totals.py": source.replace(FIX_NEW.replace(" / 100", ""), FIX_NEW)},
    )
    server = scripted(CHANGE)
    settings = Settings.from_env(
        {
            **model_env(server),
            "LOOPWRIGHT_SANDBOX": "local",
            "LOOPWRIGHT_DATA_DIR": str(tmp_path / "data"),
        }
    )
    request = FixRequest(
        source=str(repo),
        guidance="  \n",
        change_requested=True,
        dry_run=True,
        test_cmd="python -m pytest",
    )
    provider, model = get_provider(settings), OpenAIModel(settings)
    try:
        result = FixMission(
            request,
            settings=settings,
            provider=provider,
            model=model,
            events=EventBus(request.mission_id, [], Redactor()),
        ).run()
    finally:
        model.close()
        provider.close()
    assert result.status == "nothing_to_fix", result.message
    assert server.requests == []
