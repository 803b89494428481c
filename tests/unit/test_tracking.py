"""The tracking comment: its checklist, outcome and inertness, and coalesced edits on the
fake GitHub."""

from __future__ import annotations

import time
from typing import Any

import pytest

from loopwright.events import STAGES, EventBus, EventList
from loopwright.github.ratelimit import WriteSpacer
from loopwright.github.render import ZWJ
from loopwright.github.service import GitHubApp
from loopwright.github.tracking import (
    MARKER,
    Outcome,
    Tracking,
    TrackingComment,
    note,
    render_tracking,
)
from loopwright.redaction import Redactor
from tests.fakes.github import FakeGitHub, generate_app_key

SHA = "0123456789abcdef0123456789abcdef01234567"
USAGE = {
    "nano": {"calls": 2, "prompt_tokens": 1000, "completion_tokens": 200, "cost_usd": 0.0012},
    "super": {"calls": 1, "prompt_tokens": 3000, "completion_tokens": 300, "cost_usd": 0.0031},
}


def state(**kwargs: Any) -> Tracking:
    values: dict[str, Any] = {
        "mission": "a1b2c3d4e5f6",
        "head_sha": SHA,
        "actor": "maintainer",
        "live_url": "http://loopwright.test/missions/a1b2c3d4e5f6",
    }
    return Tracking(**{**values, **kwargs})


def stage_events(*moves: tuple[str, str]) -> list[Any]:
    events = EventList()
    bus = EventBus("a1b2c3d4e5f6", [events], Redactor())
    for stage, status in moves:
        if status == "started":
            bus.enter(stage)  # type: ignore[arg-type]
        else:
            bus.leave(stage, status)  # type: ignore[arg-type]
    return events.events


def checklist(body: str) -> list[str]:
    return [line for line in body.splitlines() if line.startswith("- [")]


def test_a_new_comment_says_what_for_whom_links_the_live_view_and_lists_every_stage():
    body = render_tracking(state())
    assert body.startswith(MARKER)
    assert "Loopwright is fixing `0123456` for @maintainer" in body
    assert "[Watch it live](http://loopwright.test/missions/a1b2c3d4e5f6)" in body
    assert checklist(body) == [f"- [ ] **{stage}**" for stage in STAGES]
    assert "Outcome" not in body


def test_without_a_public_url_there_is_no_link_and_an_automatic_mission_names_its_check():
    body = render_tracking(state(actor=None, live_url=None, check_name="CI / tests"))
    assert "Watch it live" not in body and "](" not in body
    assert "fixing `0123456`, whose check CI / tests failed" in body
    assert "@" not in body


@pytest.mark.parametrize(
    ("moves", "expected"),
    [
        ([("prepare", "started")], ["- [ ] ⏳ **prepare**: in progress", "- [ ] **plan**"]),
        (
            [("prepare", "started"), ("prepare", "reproduced"), ("plan", "started")],
            ["- [x] ✅ **prepare**: reproduced", "- [ ] ⏳ **plan**: in progress"],
        ),
        (
            [("prepare", "started"), ("prepare", "nothing_to_fix")],
            ["- [ ] ⏹️ **prepare**: nothing to fix", "- [ ] **plan**"],
        ),
        (
            [("verify", "started"), ("verify", "unverified")],
            ["- [ ] ❌ **verify**: unverified", "- [ ] **deliver**"],
        ),
        (
            [("loop", "started"), ("loop", "budget_exceeded")],
            ["- [ ] ❌ **loop**: budget exceeded", "- [ ] **verify**"],
        ),
        (
            [("deliver", "started"), ("deliver", "delivered")],
            ["- [x] ✅ **deliver**: delivered"],
        ),
    ],
    ids=["enter", "leave-then-enter", "stopped", "failed", "budget", "delivered"],
)
def test_stage_events_move_the_checklist(moves, expected):
    tracking = state()
    for event in stage_events(*moves):
        tracking.apply(event)
    lines = checklist(render_tracking(tracking))
    for line in expected:
        assert line in lines


def test_other_events_and_detected_stages_change_nothing():
    tracking = state()
    bus = EventBus("m", [lambda e: tracking.apply(e)], Redactor())
    bus.enter("prepare")
    before = render_tracking(tracking)
    bus.emit("stage", "prepare", status="detected", test_command="pytest")
    bus.emit("error", message="x")
    assert render_tracking(tracking) == before


def test_a_verified_mission_ends_with_the_pull_request_cost_and_tier():
    outcome = Outcome.from_result(
        {"status": "verified", "usage": USAGE, "cost_usd": 0.0043, "final_tier": "super"},
        kind="pull_request",
        url="http://github.test/acme/invoice/pull/2",
    )
    body = render_tracking(state(outcome=outcome))
    assert "Loopwright worked on `0123456`" in body
    assert (
        "**Outcome:** ✅ verified fix in [this pull request](http://github.test/acme/invoice/pull/2)"
        in body
    )
    assert "**Cost:** $0.0043 · 4,500 tokens · **tier reached:** `super`" in body


@pytest.mark.parametrize(
    ("kind", "url", "reason", "expected"),
    [
        ("commit", None, "pushed abc1234 to feature", "✅ verified fix, pushed abc1234 to feature"),
        (
            "comment",
            "http://github.test/acme/invoice/pull/2#issuecomment-9",
            "",
            "offered as a patch in [this comment](http://github.test/acme/invoice/pull/2#issuecomment-9)",
        ),
        ("skipped", None, "branch has commits by someone else", "⚠️ verified, but not delivered"),
    ],
    ids=["commit", "fork-comment", "skipped"],
)
def test_each_delivery_kind_has_its_outcome(kind, url, reason, expected):
    outcome = Outcome.from_result({"status": "verified"}, kind=kind, url=url, reason=reason)
    assert expected in render_tracking(state(outcome=outcome))


def test_a_mission_that_could_not_fix_says_why_with_the_models_summary_quoted_and_inert():
    outcome = Outcome.from_result(
        {
            "status": "budget_exceeded",
            "message": "the cost cap of $0.01 was reached",
            "summary": "Ping @octocat, fixes #12, see [x](http://evil.test)\n# heading",
            "usage": USAGE,
            "cost_usd": 0.0102,
            "final_tier": "nano",
        }
    )
    body = render_tracking(state(outcome=outcome))
    assert "**Outcome:** ⚠️ Budget exceeded; nothing was delivered" in body
    assert "the cost cap of $0.01 was reached" in body
    assert f"@{ZWJ}octocat" in body and "@octocat" not in body
    assert f"#{ZWJ}12" in body and "](http://evil.test)" not in body
    assert "> \\# heading" in body
    assert "**tier reached:** `nano`" in body


@pytest.mark.parametrize(
    ("summary", "expected"),
    [
        ("Cancelled by @maintainer.", "⏹️ cancelled by @maintainer"),
        ("Cancelled from the live view.", "⏹️ cancelled from the live view"),
    ],
)
def test_a_cancelled_mission_says_who_cancelled_it(summary, expected):
    outcome = Outcome.from_result({"status": "cancelled", "summary": summary})
    body = render_tracking(state(outcome=outcome))
    assert f"**Outcome:** {expected}" in body
    assert "Loopwright stopped fixing" in body


def test_secrets_are_redacted_and_hostile_text_cannot_leave_its_place():
    token = "ghs_" + "A" * 36
    tracking = state(
        actor="not a login",
        check_name=f"tests @team <img src=x> {token}",
        live_url="javascript:alert(1)",
    )
    body = render_tracking(tracking, Redactor([token]))
    assert token not in body
    assert "<img" not in body and "javascript:" not in body
    assert "for `not a login`" in body


@pytest.fixture(scope="module")
def app_key() -> str:
    return generate_app_key()


@pytest.fixture
def fake_session(app_key):
    key = app_key
    with FakeGitHub(1, key) as github:
        github.add_installation(7, "acme", repositories=["acme/app"])
        github.add_repo("acme/app")
        number = github.add_pull(
            "acme/app", head_ref="feature", head_sha=SHA, base_ref="main", title="t", body=""
        )
        # Writes a few milliseconds apart: the spacing is not what these tests are about.
        app = GitHubApp(1, key, github.url, spacer=WriteSpacer(0.01))
        session = app.session(7, "acme/app")
        yield github, session, number


def _wait_for(predicate: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("timed out")
        time.sleep(0.01)


def test_edits_are_coalesced_to_the_interval_and_the_last_state_is_always_written(
    fake_session,
):
    github, session, number = fake_session
    # The tracker's clock only moves when the test moves it; the writer rereads it at least
    # every interval of real time.
    now = [100.0]
    tracker = TrackingComment(
        session, number, state(), Redactor(), interval_s=0.05, clock=lambda: now[0]
    )
    comment_id = tracker.post()
    bus = EventBus("a1b2c3d4e5f6", [tracker.sink], Redactor())
    for stage in STAGES:  # ten stage changes inside one interval
        bus.enter(stage)
        bus.leave(stage, "done")
    # The first edit waits for the interval: none while the clock stands still ...
    time.sleep(0.3)
    assert github.requests_for("issues/update-comment") == []
    # ... then, once it has passed, one edit carries all ten changes at once.
    now[0] += 0.05
    _wait_for(lambda: len(github.requests_for("issues/update-comment")) == 1)
    (first,) = github.requests_for("issues/update-comment")
    assert checklist(first.body["body"]) == [f"- [x] ✅ **{s}**: done" for s in STAGES]
    bus.emit("stage", "deliver", status="delivered")
    # The next change waits for the next slot; finishing writes it at once, with the outcome.
    tracker.finish(Outcome("verified", delivered_kind="commit", delivered_reason="pushed"))
    edits = github.requests_for("issues/update-comment")
    assert len(edits) == 2 and tracker.edits == 2
    (comment,) = [c for c in github.comments("acme/app", number) if c["id"] == comment_id]
    assert comment["body"] == edits[-1].body["body"]
    assert "- [x] ✅ **deliver**: delivered" in comment["body"]
    assert "**Outcome:** ✅ verified fix, pushed" in comment["body"]
    github.assert_no_rejections()


def test_the_outcome_is_the_last_edit_even_while_an_earlier_edit_waits_to_retry(fake_session):
    """An edit held up by a rate limit (GitHub's retry-after) must not land after the
    outcome and put an older body back, however briefly finish waits for the writer."""
    github, session, number = fake_session
    now = [100.0]
    tracker = TrackingComment(
        session, number, state(), Redactor(), interval_s=0.05, clock=lambda: now[0],
        stop_timeout_s=0.01,
    )  # fmt: skip
    comment_id = tracker.post()
    bus = EventBus("a1b2c3d4e5f6", [tracker.sink], Redactor())
    limit = github.inject_rate_limit("issues/update-comment", kind="retry_after", retry_after=1)
    bus.enter("prepare")
    now[0] += 1
    _wait_for(lambda: limit.hits == 1)  # the writer's edit now waits a second to retry
    tracker.finish(Outcome("verified", delivered_kind="commit", delivered_reason="pushed"))
    time.sleep(1.5)  # past the retry: had the held edit been sent after the outcome, it is now
    edits = [r for r in github.requests_for("issues/update-comment") if r.status == 200]
    assert "**Outcome:** ✅ verified fix, pushed" in edits[-1].body["body"]
    (comment,) = [c for c in github.comments("acme/app", number) if c["id"] == comment_id]
    assert "**Outcome:** ✅ verified fix, pushed" in comment["body"]
    github.assert_no_rejections()


def test_note_adds_a_line_to_a_running_mission_and_to_a_stored_comment(fake_session):
    github, session, number = fake_session
    tracker = TrackingComment(session, number, state(), Redactor(), interval_s=0.01)
    comment_id = tracker.post()
    assert note("a1b2c3d4e5f6", "a first note")
    tracker.finish(Outcome("error", message="stopped"))
    assert note("a1b2c3d4e5f6", "no running mission and no comment to edit") is False
    assert note("a1b2c3d4e5f6", "a later note", session=session, comment_id=comment_id)
    body = github.comments("acme/app", number)[0]["body"]
    assert body.index("- a first note") < body.index("- a later note") < body.index("Outcome")
    github.assert_no_rejections()


def test_text_with_bytes_that_are_not_utf8_reaches_github_as_u_fffd(fake_session):
    """A lone surrogate (a byte of a Latin-1 name or patch) cannot be sent in a UTF-8
    request body: the session sends U+FFFD in its place instead of failing the write."""
    github, session, number = fake_session
    comment_id, _ = session.post_comment(number, "fixed caf\udce9.txt")
    session.comment(number, "see caf\udce9.txt")
    check = session.start_check(SHA, "http://loopwright.test/m", "a1b2c3d4e5f6")
    session.finish_check(
        check, "success", {"title": "caf\udce9", "summary": "s\udce9", "text": "t\udce9"}
    )
    session.update_pull(number, "Fix caf\udce9", "Changes caf\udce9.txt")
    bodies = sorted(c["body"] for c in github.comments("acme/app", number))
    assert bodies == ["fixed caf\ufffd.txt", "see caf\ufffd.txt"]
    session.edit_comment(comment_id, "edited caf\udce9")
    assert session.comment_body(comment_id) == "edited caf\ufffd"
    (run,) = github.check_runs("acme/app")
    assert (run["output"]["title"], run["output"]["summary"]) == ("caf\ufffd", "s\ufffd")
    assert run["output"]["text"] == "t\ufffd"
    pull = github.pull("acme/app", number)
    assert (pull["title"], pull["body"]) == ("Fix caf\ufffd", "Changes caf\ufffd.txt")
    github.set_branch("acme/app", "main", SHA)
    github.set_branch("acme/app", "loopwright/fix", SHA)
    opened = session.open_pull("loopwright/fix", "main", "Fix caf\udce9", "Body caf\udce9")
    pull = github.pull("acme/app", opened.number)
    assert (pull["title"], pull["body"]) == ("Fix caf\ufffd", "Body caf\ufffd")
    github.assert_no_rejections()
