"""The live view in a real browser while a scripted mission plays into the server."""

from __future__ import annotations

import datetime
import time
from typing import Any

import httpx
import pytest

from loopwright.app.stream import StreamTiming
from tests.e2e.conftest import app_screenshot, screenshot_path
from tests.e2e.scripted_mission import (
    PR_URL,
    Player,
    create_mission,
    fix_mission_script,
    model_call,
    stage,
)

pytestmark = pytest.mark.browser


def seqs_in_page(page: Any) -> list[int]:
    """The sequence numbers rendered, sorted (results sit inside their tool call's item);
    a duplicate would show up twice."""
    values = page.eval_on_selector_all("#timeline [data-seq]", "els => els.map(e => e.dataset.seq)")
    return sorted(int(v) for v in values)


def test_mission_page_follows_a_running_mission(browser, page, live_server, tmp_path):
    server = live_server()
    mission_id = create_mission(server.store)
    shot = app_screenshot(
        browser, server.settings.data_dir / "missions" / mission_id / "screenshot.png"
    )
    script = fix_mission_script(shot)
    player = Player(server.store, server.hub, mission_id, script, pace_s=0.04)
    page.goto(f"{server.url}/missions/{mission_id}")
    page.wait_for_selector("#live:not([hidden])")

    # Watch the pipeline from the page itself, so no transition is missed between polls.
    page.evaluate("""() => {
        window.__stages = [];
        const seen = () => {
          const a = document.querySelector('#pipeline .stage.active');
          const name = a ? a.dataset.stage : null;
          const stages = window.__stages;
          if (name && stages[stages.length - 1] !== name) stages.push(name);
        };
        new MutationObserver(seen).observe(document.getElementById('pipeline'),
          {subtree: true, attributes: true, attributeFilter: ['class']});
    }""")
    player.start()
    player.join()
    page.wait_for_selector("#mission[data-ended='true']", timeout=15_000)

    assert page.evaluate("window.__stages") == ["prepare", "plan", "loop", "verify", "deliver"]
    classes = page.eval_on_selector_all("#pipeline .stage", "els => els.map(e => e.className)")
    assert all("done" in c for c in classes), classes

    # Every event exactly once, in order.
    assert seqs_in_page(page) == list(range(1, len(script) + 1))
    assert page.get_attribute("#mission", "data-duplicates") == "0"

    # Tool calls in order, each with its result.
    tools = page.eval_on_selector_all("#timeline li.tool", "els => els.map(e => e.dataset.tool)")
    assert tools == [f["tool"] for t, _s, f in script if t == "tool_call"]
    summaries = page.eval_on_selector_all(
        "#timeline li.tool", "els => els.map(e => e.querySelector('.what').textContent)"
    )
    assert summaries == [f["summary"] for t, _s, f in script if t == "tool_call"]
    failed = page.locator("#timeline li.tool.failed").first
    assert "assert 81.0 == 90.0" in failed.locator("pre.out").inner_text()
    assert failed.locator(".badge").inner_text() == "failed · exit 1"
    assert failed.locator("pre.out span.ansi-fg-1").count() > 0  # ANSI red rendered
    assert page.locator("#timeline li.tool.refused").count() == 1

    # Untrusted text stays text.
    assert "<script>window.__pwned = 1</script>" in failed.locator("pre.out").inner_text()
    assert page.evaluate("window.__pwned") is None
    assert page.locator("pre.out script, pre.out img").count() == 0

    # Long output is cut, and can be shown whole.
    read = page.locator("#timeline li.tool", has_text="invoice/totals.py").first
    read.locator("details.result > summary").click()  # file reads start collapsed
    assert "more lines" in read.locator("pre.out").inner_text()
    read.locator("button.show-all").click()
    assert "helper 40:" in read.locator("pre.out").inner_text()

    phase = page.locator("#timeline li.phase-ev")
    assert phase.locator(".what").inner_text() == "patch export"
    assert phase.locator(".meta").inner_text() == "0.04s"

    escalation = page.locator("#timeline li.escalation")
    assert escalation.count() == 1
    assert "nano → super" in escalation.inner_text()

    rows = page.locator("#verification table.verify tbody tr")
    assert rows.count() == 4
    assert page.locator("#verification .row-fixed").count() == 2
    assert "Verified" in page.locator("#verification .verdict-line").inner_text()
    page.wait_for_function(
        "() => { const i = document.getElementById('screenshot'); "
        "return i.complete && i.naturalWidth > 0; }"
    )
    assert page.locator("#screenshot-card").is_visible()

    assert page.locator("#status").inner_text() == "verified"
    assert "Fix verified" in page.locator("#verdict").inner_text()
    assert page.get_attribute("#pr-link", "href") == PR_URL
    assert page.locator("#tier").inner_text() == "super"
    assert page.locator("#plan li.done").count() == 3
    assert page.js_errors == []


def test_finished_mission_replays_from_the_log(page, live_server):
    server = live_server()
    mission_id = create_mission(server.store)
    script = fix_mission_script(None)
    player = Player(server.store, server.hub, mission_id, script, pace_s=0)
    player.play()
    player.finish()
    page.goto(f"{server.url}/missions/{mission_id}")
    page.wait_for_selector("#mission[data-ended='true']")
    assert seqs_in_page(page) == list(range(1, len(script) + 1))
    assert page.locator("#status").inner_text() == "verified"
    # Which repository instructions the model got: one line under the test command.
    assert page.locator("#timeline .instructions").all_inner_texts() == [
        "Repository instructions: AGENTS.md (2.1 kB)"
    ]


def test_phone_layout_stacks_the_pipeline(browser, live_server):
    server = live_server()
    mission_id = create_mission(server.store)
    player = Player(server.store, server.hub, mission_id, fix_mission_script(None), pace_s=0)
    player.play()
    player.finish()
    context = browser.new_context(
        viewport={"width": 390, "height": 844},
        is_mobile=True,
        has_touch=True,
        device_scale_factor=2,
    )
    try:
        page = context.new_page()
        page.goto(f"{server.url}/missions/{mission_id}")
        page.wait_for_selector("#mission[data-ended='true']")
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= 390, "the page scrolls sideways on a phone"
        boxes = [
            page.locator(f"#pipeline [data-stage='{s}']").bounding_box()
            for s in ("prepare", "plan")
        ]
        assert boxes[1]["y"] > boxes[0]["y"]  # stacked, not squeezed side by side
    finally:
        context.close()


def test_list_page_updates_without_reload(page, live_server):
    server = live_server()
    old = create_mission(server.store, repo="acme/ledger", sha="1111", pr=3)
    Player(server.store, server.hub, old, fix_mission_script(None), pace_s=0).finish()
    page.goto(server.url + "/")
    page.wait_for_selector(f"tr[data-id='{old}']")
    page.evaluate("window.__same_document = true")

    mission_id = create_mission(server.store, running=False)
    row = page.locator(f"tr[data-id='{mission_id}']")
    row.wait_for(timeout=10_000)
    assert "queued" in row.inner_text()

    server.store.mark_running(mission_id)
    script = fix_mission_script(None)
    player = Player(server.store, server.hub, mission_id, script, pace_s=0.02)
    player.play(12)  # into the loop stage, one nano call made
    page.wait_for_function(
        f"() => {{ const r = document.querySelector(\"tr[data-id='{mission_id}']\"); "
        "return r && r.textContent.includes('loop') && r.textContent.includes('nano'); }",
        timeout=10_000,
    )
    assert "running" in row.inner_text()
    player.play()
    player.finish()
    page.wait_for_function(
        f"() => document.querySelector(\"tr[data-id='{mission_id}'] .status\")"
        ".textContent === 'verified'",
        timeout=10_000,
    )
    assert "$0.0105" in row.inner_text()
    assert "super" in row.inner_text()
    assert page.evaluate("window.__same_document") is True

    # Filters: only the other repository's mission.
    page.goto(server.url + "/?repo=acme%2Fledger")
    page.wait_for_selector(f"tr[data-id='{old}']")
    assert page.locator(f"tr[data-id='{mission_id}']").count() == 0


def test_reconnect_mid_mission_shows_every_event_once(page, live_server):
    # The server recycles each stream after 0.4 s: the browser reconnects several times
    # during the mission, each time with Last-Event-ID.
    server = live_server(timing=StreamTiming(ping_s=1, poll_s=0.1, max_stream_s=0.4, retry_ms=50))
    mission_id = create_mission(server.store)
    script = fix_mission_script(None)
    streams: list[str] = []
    page.on("request", lambda r: streams.append(r.url) if "/events" in r.url else None)
    player = Player(server.store, server.hub, mission_id, script, pace_s=0.05)
    page.goto(f"{server.url}/missions/{mission_id}")
    page.wait_for_selector("#live:not([hidden])")
    player.start()
    player.join()
    page.wait_for_selector("#mission[data-ended='true']", timeout=15_000)

    assert len(streams) >= 4, streams
    assert seqs_in_page(page) == list(range(1, len(script) + 1))
    assert page.get_attribute("#mission", "data-duplicates") == "0"
    assert page.get_attribute("#mission", "data-received") == str(len(script))


def test_script_reconnect_resumes_after_the_last_event(page, live_server):
    server = live_server()
    mission_id = create_mission(server.store)
    script = fix_mission_script(None)
    player = Player(server.store, server.hub, mission_id, script, pace_s=0.01)
    page.goto(f"{server.url}/missions/{mission_id}")
    page.wait_for_selector("#live:not([hidden])")
    player.play(15)
    page.wait_for_function("() => document.getElementById('mission').dataset.lastSeq === '15'")
    # The network drops: the page's stream is gone while the mission goes on.
    page.context.set_offline(True)
    page.evaluate("() => {}")
    player.play(10)
    page.context.set_offline(False)
    player.play()
    player.finish()
    page.wait_for_selector("#mission[data-ended='true']", timeout=15_000)
    assert seqs_in_page(page) == list(range(1, len(script) + 1))
    assert page.get_attribute("#mission", "data-duplicates") == "0"


def test_without_the_token_pages_and_streams_answer_401(page, live_server):
    token = "dash-token-5f1c9a7e"
    server = live_server(token=token)
    mission_id = create_mission(server.store)
    Player(server.store, server.hub, mission_id, [stage("prepare", "started")], pace_s=0).play()
    paths = [
        "/",
        f"/missions/{mission_id}",
        "/costs",
        f"/missions/{mission_id}/events",
        "/missions/stream",
        "/api/missions",
        f"/api/missions/{mission_id}",
        f"/api/missions/{mission_id}/events",
        f"/api/missions/{mission_id}/patch",
        f"/api/missions/{mission_id}/changes",
        "/api/costs",
        f"/missions/{mission_id}/screenshot.png",
    ]
    with httpx.Client(base_url=server.url, timeout=5) as client:
        for path in paths:
            for headers in (
                {},
                {"Authorization": "Bearer wrong"},
                {"Cookie": "loopwright_session=1.x"},
            ):
                assert client.get(path, headers=headers).status_code == 401, (path, headers)
        assert (
            client.get("/api/missions", headers={"Authorization": f"Bearer {token}"}).status_code
            == 200
        )
        assert "text/event-stream" not in client.get(f"/missions/{mission_id}/events").headers.get(
            "content-type", ""
        )

    answer = page.goto(f"{server.url}/missions/{mission_id}")
    assert answer.status == 401
    assert page.locator("form[action='/login']").is_visible()
    page.fill("#token", "not the token")
    page.click("form[action='/login'] button")
    assert page.locator(".error").inner_text() == "That token is not right."

    page.fill("#token", token)
    page.click("form[action='/login'] button")
    page.wait_for_url(f"{server.url}/missions/{mission_id}")
    page.wait_for_function("() => document.getElementById('mission').dataset.lastSeq === '1'")
    cookie = next(c for c in page.context.cookies() if c["name"] == "loopwright_session")
    assert cookie["httpOnly"] is True and cookie["sameSite"] == "Lax"
    assert token not in cookie["value"]

    page.click(".logout button")
    page.wait_for_url(f"{server.url}/login")
    assert page.goto(f"{server.url}/").status == 401


def test_closed_tab_leaves_no_server_task(browser, live_server):
    server = live_server()
    mission_id = create_mission(server.store)
    player = Player(server.store, server.hub, mission_id, fix_mission_script(None), pace_s=0)
    player.play(5)
    server.wait_for(lambda: server.hub.streams_open == 0, what="an idle server")
    time.sleep(0.3)
    tasks_before = server.tasks()
    subscribers_before = server.hub.subscriber_count()

    context = browser.new_context()
    tabs = [context.new_page() for _ in range(3)]
    for tab in tabs[:2]:
        tab.goto(f"{server.url}/missions/{mission_id}")
    tabs[2].goto(server.url + "/")
    for tab in tabs[:2]:
        tab.wait_for_function("() => document.getElementById('mission').dataset.lastSeq === '5'")
    tabs[2].wait_for_function("() => document.getElementById('missions').dataset.updates !== '0'")
    server.wait_for(lambda: server.hub.streams_open == 3, what="three open streams")
    assert server.hub.subscriber_count() == subscribers_before + 3
    assert server.tasks() > tasks_before

    for tab in tabs:
        tab.close()
    context.close()
    server.wait_for(lambda: server.hub.streams_open == 0, what="the streams to close")
    server.wait_for(
        lambda: server.hub.subscriber_count() == subscribers_before, what="the subscriptions to go"
    )
    server.wait_for(lambda: server.tasks() <= tasks_before, what="the tasks to end")

    # The mission goes on and publishes to nobody; nothing accumulates.
    player.play()
    player.finish()
    assert server.hub.subscriber_count() == subscribers_before


def test_cost_view_shows_spend_per_tier_repository_and_day(page, live_server, tmp_path):
    server = live_server()
    store = server.store
    now = datetime.datetime.now(datetime.UTC)
    repos = ["acme/invoice", "acme/ledger", "acme/web", "globex/payments"]
    # Sixteen missions over eight days; most finish on nano, some need super, one ultra.
    for n in range(16):
        tiers = ["nano"] if n % 4 else ["nano", "super"]
        if n == 9:
            tiers = ["nano", "super", "ultra"]
        mission_id = create_mission(store, repo=repos[n % len(repos)], sha=f"{n:04x}", pr=n + 1)
        script = []
        total = 0.0
        for step, tier in enumerate([t for t in tiers for _ in range(2 + n % 3)], 1):
            call = model_call(step, tier, ["run_command"], 2000 + 400 * step, 60 + 9 * step, total)
            total += call[2]["cost_usd"]
            call[2]["total_cost_usd"] = round(total, 6)
            script.append(call)
        script.append(
            (
                "done",
                "deliver",
                {
                    "status": "verified" if n % 7 else "unverified",
                    "cost_usd": round(total, 6),
                    "steps": len(script),
                    "final_tier": tiers[-1],
                },
            )
        )
        player = Player(
            store,
            server.hub,
            mission_id,
            script,
            pace_s=0,
            status="verified" if n % 7 else "unverified",
            pr_url=None,
        )
        player.play()
        player.finish()
        _backdate(store, mission_id, now - datetime.timedelta(days=n // 2))

    page.goto(server.url + "/costs")
    kpis = page.locator(".kpi").all_inner_texts()
    assert any("finished on nano" in k.lower() and "69%" in k for k in kpis), kpis  # 11 of 16
    share = page.locator("svg.share rect")
    assert share.count() == 3
    tier_rows = page.locator("table.bars").first.locator("tbody tr").all_inner_texts()
    assert [r.split()[0] for r in tier_rows] == ["nano", "super", "ultra"]
    assert page.locator("table.bars").nth(1).locator("tbody tr").count() == 4
    assert page.locator("svg.days rect").count() == 8
    api = httpx.get(server.url + "/api/costs").json()
    assert {t["tier"] for t in api["by_tier"]} == {"nano", "super", "ultra"}
    assert page.js_errors == []
    page.screenshot(path=str(screenshot_path("costs.png", tmp_path)), full_page=True)


def _backdate(store: Any, mission_id: str, when: datetime.datetime) -> None:
    from sqlalchemy import update

    from loopwright.store.models import Mission

    with store._session.begin() as session:
        session.execute(update(Mission).where(Mission.id == mission_id).values(created_at=when))
