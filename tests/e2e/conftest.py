"""A live view on loopback (uvicorn in a thread) and Debian's Chromium driven by Playwright."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from loopwright.app.server import create_app, serve_in_thread
from loopwright.app.stream import LiveHub, StreamTiming
from loopwright.config import Settings
from loopwright.store.repository import Store

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",
]
FAST = StreamTiming(
    ping_s=1.0,
    poll_s=0.25,
    max_stream_s=600,
    retry_ms=200,
    list_min_interval_s=0.1,
    auth_check_s=0.5,
)
DOCS = Path(__file__).resolve().parents[2] / "docs"


def screenshot_path(name: str, tmp_path: Path) -> Path:
    """Where a test saves a page picture: `docs/` for the README when
    LOOPWRIGHT_UPDATE_SCREENSHOTS=1, otherwise the test's own directory."""
    if os.environ.get("LOOPWRIGHT_UPDATE_SCREENSHOTS") == "1":
        return DOCS / name
    return tmp_path / name


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    """Debian's Chromium; mandatory in CI, skipped on a machine without it."""
    if not Path(CHROMIUM).is_file():
        if os.environ.get("CI"):
            pytest.fail(f"CI=true but {CHROMIUM} is missing; install Debian's chromium package")
        pytest.skip(f"no {CHROMIUM}")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1440, "height": 1080}, device_scale_factor=1)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.js_errors = errors
    try:
        yield page
    finally:
        context.close()


@dataclass
class LiveServer:
    url: str
    store: Store
    hub: LiveHub
    settings: Settings

    def tasks(self) -> int:
        """Asyncio tasks alive in the server's event loop right now."""
        loop = self.hub.loop
        assert loop is not None

        async def count() -> int:
            return len(asyncio.all_tasks())

        return asyncio.run_coroutine_threadsafe(count(), loop).result(5) - 1

    def wait_for(self, check: Callable[[], bool], timeout: float = 10, what: str = "") -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if check():
                return
            time.sleep(0.05)
        raise AssertionError(f"timed out waiting for {what or check}")


@pytest.fixture
def live_server(tmp_path: Path) -> Iterator[Callable[..., LiveServer]]:
    """Start the view in `local` mode (no GitHub App) with short stream timings."""
    stack: list[Any] = []

    def start(*, token: str | None = None, timing: StreamTiming = FAST) -> LiveServer:
        env = {"LOOPWRIGHT_DATA_DIR": str(tmp_path / f"data-{len(stack)}")}
        if token:
            env["LOOPWRIGHT_DASHBOARD_TOKEN"] = token
        settings = Settings.from_env(env)
        app = create_app(settings, mode="local", timing=timing)
        served = serve_in_thread(app)
        url = served.__enter__()
        stack.append(served)
        return LiveServer(url, app.state.store, app.state.hub, settings)

    yield start
    for served in reversed(stack):
        served.__exit__(None, None, None)


def app_screenshot(browser: Any, out: Path) -> Path:
    """A screenshot of a small invoice app, standing in for the one verification takes."""
    context = browser.new_context(viewport={"width": 800, "height": 500})
    page = context.new_page()
    page.set_content(
        "<html><body style='font-family:sans-serif;margin:32px;background:#fafafa'>"
        "<h1 style='color:#234'>Invoice #2024-117</h1>"
        "<table style='border-collapse:collapse;width:100%;font-size:18px'>"
        "<tr style='border-bottom:1px solid #ccc'><th align=left>Item</th><th>Qty</th>"
        "<th align=right>Price</th><th align=right>Discount</th><th align=right>Total</th></tr>"
        "<tr><td>Consulting</td><td align=center>1</td><td align=right>100.00</td>"
        "<td align=right>10 %</td><td align=right><b>90.00</b></td></tr>"
        "<tr><td>Support</td><td align=center>2</td><td align=right>50.00</td>"
        "<td align=right>0 %</td><td align=right><b>100.00</b></td></tr>"
        "<tr style='border-top:2px solid #234'><td colspan=4>VAT 20 %</td>"
        "<td align=right>38.00</td></tr><tr><td colspan=4><b>Total</b></td>"
        "<td align=right><b>228.00</b></td></tr></table></body></html>"
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(out))
    context.close()
    return out
