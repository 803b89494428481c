"""The GitHub App end to end: a signed red check → a verified fix → a branch and a PR."""

from __future__ import annotations

import os
import subprocess

import pytest

from tests.conftest import SUITE_PATH, step, tool
from tests.integration.app_harness import REPO, app_world
from tests.integration.test_secrets_cli import tool_messages
from tests.scenarios import (
    CORRECT,
    EDIT,
    FIX_NEW,
    PLAN,
    assert_one_deliver_then_done,
)


@pytest.fixture(autouse=True)
def venv_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    # The local sandbox runs the example's tests with the python on PATH.
    monkeypatch.setenv("PATH", f"{SUITE_PATH}:{os.environ['PATH']}")


def test_red_check_run_becomes_a_verified_pull_request(tmp_path):
    with app_world(tmp_path, CORRECT) as world:
        answer = world.deliver("check_run", world.check_run_payload())
        assert answer.status_code == 202, answer.text
        mission_id = answer.json()["mission"]
        mission = world.wait(mission_id)

        assert mission["status"] == "verified", (
            mission["message"],
            [
                (r.method, r.path, r.status, r.body)
                for r in world.github.requests
                if r.status >= 400
            ],
        )
        pulls = [p for p in world.github.pulls(REPO) if p["head"]["ref"] == "loopwright/fix-1"]
        assert len(pulls) == 1
        pull = pulls[0]
        assert pull["base"]["ref"] == "feature"
        body = pull["body"]
        assert "test_line_with_percentage_discount" in body
        assert f"http://loopwright.test/missions/{mission_id}" in body
        assert mission["pr_url"] == pull["html_url"]

        pushed = subprocess.run(
            ["git", "-C", str(world.bare), "show", "loopwright/fix-1", "--format=%ae%n%B"],
            capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
        assert FIX_NEW.strip() in pushed
        assert "loopwright[bot]@users.noreply.github.com" in pushed
        assert f"Loopwright-Mission: {mission_id}" in pushed

        runs = [r for r in world.github.check_runs(REPO) if r["name"] == "Loopwright"]
        assert len(runs) == 1
        assert runs[0]["head_sha"] == world.head_sha
        assert (runs[0]["status"], runs[0]["conclusion"]) == ("completed", "success")
        assert runs[0]["details_url"] == f"http://loopwright.test/missions/{mission_id}"

        stored = world.client.get(f"/api/missions/{mission_id}/events").json()
        assert_one_deliver_then_done(stored, "delivered")
        assert next(e for e in stored if e["type"] == "delivery")["url"] == pull["html_url"]
        world.github.assert_no_rejections()
        # The installation token never shows up where people or models can read it.
        tokens = list(world.github.tokens)
        assert tokens
        events = world.client.get(f"/api/missions/{mission_id}").text
        for token in tokens:
            assert token not in body and token not in events
            assert all(token not in str(r) for r in world.model.requests)


TITLED = [
    step(PLAN),
    step(EDIT),
    # A title over two lines goes back to the model as an observation, not into the PR.
    step(tool("finish", summary="x", title="Divide by 100\nand more")),
    step(
        tool(
            "finish",
            summary="discount_percent is a percentage, so line_total now divides it by 100 "
            "before taking it off the gross amount of the line.",
            title="Divide discount_percent by 100 in line_total",
        )
    ),
]


def test_the_pr_carries_the_models_title_plan_and_changes(tmp_path):
    with app_world(tmp_path, TITLED) as world:
        answer = world.deliver("check_run", world.check_run_payload())
        mission = world.wait(answer.json()["mission"])
        assert mission["status"] == "verified", mission["message"]

        assert any("the title must be one line" in m for m in tool_messages(world.model))
        (created,) = world.github.requests_for("pulls/create")
        assert created.body["title"] == "Divide discount_percent by 100 in line_total"
        subject = subprocess.run(
            ["git", "-C", str(world.bare), "log", "-1", "--format=%s", "loopwright/fix-1"],
            capture_output=True, text=True, check=True,
        ).stdout.strip()  # fmt: skip
        assert subject == "Divide discount_percent by 100 in line_total"
        body = created.body["body"]
        assert "### Plan" in body and "> - [ ] fix the discount" in body
        assert "### Changes" in body and "- `invoice/totals.py` (+1 -1)" in body
        stored = world.client.get(f"/api/missions/{mission['id']}").json()
        assert stored["result"]["plan"] == [{"step": "fix the discount", "status": "in_progress"}]
        world.github.assert_no_rejections()


def test_same_delivery_twice_and_same_failure_twice_give_one_mission(tmp_path):
    with app_world(tmp_path, [step(tool("finish", summary="x"), repeat=True)]) as world:
        payload = world.check_run_payload()
        first = world.deliver("check_run", payload, delivery="d-1")
        again = world.deliver("check_run", payload, delivery="d-1")
        other = world.deliver("check_run", payload, delivery="d-2")
        assert first.status_code == 202
        assert again.status_code == 200 and again.json()["status"] == "duplicate"
        assert other.status_code == 200 and other.json()["mission"] == first.json()["mission"]
        world.wait(first.json()["mission"])
        assert len(world.client.get("/api/missions").json()) == 1


def test_auto_fix_off_ignores_red_ci_without_touching_the_repository(tmp_path):
    with app_world(tmp_path, CORRECT, config="auto_fix: false\n") as world:
        answer = world.deliver("check_run", world.check_run_payload())
        mission = world.wait(answer.json()["mission"])
        assert mission["status"] == "ignored"
        assert "auto_fix is off" in mission["message"]
        assert world.model.requests == []
        assert world.github.check_runs(REPO) == [] or all(
            r["name"] != "Loopwright" for r in world.github.check_runs(REPO)
        )


def test_comment_from_a_reader_is_refused_politely(tmp_path):
    with app_world(tmp_path, CORRECT) as world:
        answer = world.deliver(
            "issue_comment", world.comment_payload("/loopwright fix", user="reader")
        )
        assert answer.status_code == 202, answer.text
        mission = world.wait(answer.json()["mission"])
        assert mission["status"] == "refused"
        comments = world.github.comments(REPO, world.pr_number)
        assert any("write access" in c["body"] and "reader" in c["body"] for c in comments)
        assert world.model.requests == []
        world.github.assert_no_rejections()


def test_comment_from_a_writer_pins_the_head_and_opens_a_pr(tmp_path):
    with app_world(tmp_path, CORRECT) as world:
        answer = world.deliver(
            "issue_comment",
            world.comment_payload("/loopwright fix\nlook at the discount maths"),
        )
        mission = world.wait(answer.json()["mission"])
        assert mission["status"] == "verified", mission
        assert mission["head_sha"] == world.head_sha
        first_user = next(m for m in world.model.requests[0]["messages"] if m["role"] == "user")
        assert "look at the discount maths" in first_user["content"]
        assert any(p["head"]["ref"] == "loopwright/fix-1" for p in world.github.pulls(REPO))
        world.github.assert_no_rejections()


@pytest.mark.parametrize(
    ("signature", "mutate"),
    [
        (None, None),
        ("sha256=" + "0" * 64, None),
        ("sha1=0123456789abcdef0123456789abcdef01234567", None),
        ("", None),
        ("keep", "whitespace"),
    ],
    ids=["missing", "wrong", "sha1-only", "empty", "reserialized"],
)
def test_bad_signatures_are_401_and_store_nothing(tmp_path, signature, mutate):
    import json

    from tests.integration.app_harness import sign

    with app_world(tmp_path, CORRECT) as world:
        payload = world.check_run_payload()
        raw = json.dumps(payload).encode()
        headers_sig = sign(raw)
        body = json.dumps(payload, indent=2).encode() if mutate == "whitespace" else raw
        if signature is None:
            answer = world.client.post(
                "/webhooks/github", content=body,
                headers={"X-GitHub-Event": "check_run", "X-GitHub-Delivery": "x"},
            )  # fmt: skip
        else:
            answer = world.deliver(
                "check_run", payload, body=body,
                signature=headers_sig if signature == "keep" else signature,
            )  # fmt: skip
        assert answer.status_code == 401
        assert world.client.get("/api/missions").json() == []
        assert world.model.requests == []
