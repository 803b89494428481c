"""Boot a repository's web app inside its sandbox and screenshot it with headless Chromium.

The app runs only inside the sandbox, started by verification (never by the model). The
browser runs on the host and reaches the app through `Sandbox.run_service`, which yields a
loopback URL. For Docker that URL is a relay on the host's loopback that forwards every
connection over `docker exec` into the container (a few lines of Python reading stdin and
writing stdout there). We chose the relay over attaching the container to a Docker network
because it keeps the verification container at `network: none`: no interface, no route, no
DNS, so "no egress" holds by construction rather than by firewall rules, the app cannot be
reached by other containers, and it works the same when the engine is remote. The price is
one `docker exec` per browser connection (about 0.1 s), which a single page load hardly notices.
Chromium itself resolves every host name except 127.0.0.1 to nothing, so a page that pulls
from the internet shows up as console errors instead of traffic.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loopwright.clip import truncate_middle
from loopwright.events import EventBus
from loopwright.repo_config import AppConfig, RepoConfig
from loopwright.sandbox.base import FileToolError, Sandbox

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--no-proxy-server",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",
)
DEFAULT_PORT = 3000
"""The port a `scripts.start` app is told to use through `PORT` (the Node convention)."""
BOOT_TIMEOUT_S = 30.0
PAGE_TIMEOUT_S = 30.0
APP_LOG = ".loopwright/app.log"
VIEWPORT = {"width": 1280, "height": 800}
LOG_CHARS = 3_000


@dataclass(frozen=True)
class WebCheck:
    """What booting and loading the app showed."""

    ok: bool
    http_status: int | None
    console_errors: list[str] = field(default_factory=list)
    screenshot: Path | None = None
    output: str = ""
    """The tail of the app's own output (stdout and stderr)."""
    reason: str = ""
    """Why the check failed; empty when it passed."""
    command: str = ""
    port: int = 0
    path: str = "/"

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "http_status": self.http_status,
            "console_errors": list(self.console_errors),
            "screenshot": str(self.screenshot) if self.screenshot else None,
            "output": self.output,
            "reason": self.reason,
            "command": self.command,
            "port": self.port,
            "path": self.path,
        }


@dataclass(frozen=True)
class _Page:
    status: int | None
    console_errors: list[str]
    error: str = ""


def find_app(tree: Path, repo: RepoConfig) -> AppConfig | None:
    """How to start the app in `tree`: `.loopwright.yml` `app`, else package.json `scripts.start`.

    None when the repository has no start command (then there is nothing to screenshot).
    """
    if repo.app is not None:
        return repo.app
    try:
        package = json.loads((tree / "package.json").read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    scripts = package.get("scripts") if isinstance(package, dict) else None
    start = scripts.get("start") if isinstance(scripts, dict) else None
    if isinstance(start, str) and start.strip():
        return AppConfig("npm start", DEFAULT_PORT, "/")
    return None


def screenshot_app(
    sandbox: Sandbox,
    app: AppConfig,
    out_path: Path,
    *,
    boot_timeout_s: float = BOOT_TIMEOUT_S,
    events: EventBus | None = None,
    chromium: str = CHROMIUM,
) -> WebCheck:
    """Start `app` in `sandbox`, wait for its port, load `app.path` and save a full-page PNG.

    The app gets `PORT=<app.port>` in its environment and is stopped before this returns.
    A failed check is a result (`ok=False` with a reason), never an exception, unless the
    sandbox itself fails.
    """
    env = {"PORT": str(app.port)}
    path = app.path if app.path.startswith("/") else f"/{app.path}"
    common: dict[str, Any] = {"command": app.start, "port": app.port, "path": path}
    with sandbox.run_service(app.start, port=app.port, env=env, log=APP_LOG) as base_url:
        waited = sandbox.exec(_wait_script(app.port, boot_timeout_s), timeout_s=boot_timeout_s + 30)
        if waited.exit_code != 0:
            exit_code = _read_text(sandbox, f"{APP_LOG}.exit").strip()
            why = (
                f"`{app.start}` exited with code {exit_code} before it did"
                if waited.exit_code == 3 and exit_code
                else f"`{app.start}` was still running"
            )
            check = WebCheck(
                ok=False,
                http_status=None,
                output=_app_output(sandbox),
                reason=f"the app did not open port {app.port} within {boot_timeout_s:g} s; {why}",
                **common,
            )
        else:
            page = _load_in_thread(base_url, path, out_path, chromium)
            shot = out_path if out_path.is_file() else None
            if page.error:
                reason = page.error
            elif page.status is None or page.status >= 500:
                reason = f"the app answered HTTP {page.status} at {path}"
            else:
                reason = ""
            check = WebCheck(
                ok=not reason,
                http_status=page.status,
                console_errors=page.console_errors,
                screenshot=shot,
                output=_app_output(sandbox),
                reason=reason,
                **common,
            )
    if events is not None:
        events.emit(
            "screenshot",
            path=str(check.screenshot) if check.screenshot else None,
            http_status=check.http_status,
            console_errors=check.console_errors,
            ok=check.ok,
            reason=check.reason,
            url_path=path,
        )
    return check


def _wait_script(port: int, timeout_s: float) -> str:
    """Exit 0 once the port accepts connections, 3 if the app exited, 1 on timeout."""
    return (
        f"end=$((SECONDS + {max(int(timeout_s), 1)}))\n"
        "while ((SECONDS < end)); do\n"
        f"  (exec 3<>/dev/tcp/127.0.0.1/{int(port)}) 2>/dev/null && exit 0\n"
        f"  [[ -f {APP_LOG}.exit ]] && exit 3\n"
        "  sleep 0.2\n"
        "done\n"
        "exit 1\n"
    )


def _read_text(sandbox: Sandbox, path: str) -> str:
    try:
        return sandbox.read_file(path).decode("utf-8", errors="replace")
    except FileToolError:
        return ""


def _app_output(sandbox: Sandbox) -> str:
    text = _read_text(sandbox, APP_LOG)
    return text[-LOG_CHARS:] if len(text) > LOG_CHARS else text


def _load_in_thread(base_url: str, path: str, out_path: Path, chromium: str) -> _Page:
    # Playwright's sync API refuses to run on a thread with a running event loop (the App's
    # workers have one), so the browser always gets a thread of its own.
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="screenshot") as pool:
        return pool.submit(_load, base_url, path, out_path, chromium).result()


def _load(base_url: str, path: str, out_path: Path, chromium: str) -> _Page:
    if not Path(chromium).is_file():
        return _Page(
            None,
            [],
            f"Chromium is not installed at {chromium}; install Debian's `chromium` package "
            "(scripts/bootstrap.sh does)",
        )
    from playwright.sync_api import Error as PlaywrightError
    from playwright.sync_api import sync_playwright

    errors: list[str] = []

    def on_console(message: Any) -> None:
        if message.type == "error":
            errors.append(str(message.text))

    out_path.parent.mkdir(parents=True, exist_ok=True)
    try:
        with (
            tempfile.TemporaryDirectory(prefix="loopwright-chromium-") as profile,
            sync_playwright() as pw,
        ):
            context = pw.chromium.launch_persistent_context(
                profile,
                executable_path=chromium,
                headless=True,
                args=list(CHROMIUM_ARGS),
                viewport=VIEWPORT,  # type: ignore[arg-type]
                timeout=PAGE_TIMEOUT_S * 1000,
            )
            try:
                page = context.pages[0] if context.pages else context.new_page()
                page.on("console", on_console)
                page.on("pageerror", lambda exc: errors.append(str(exc)))
                timeout_ms = PAGE_TIMEOUT_S * 1000
                response = page.goto(base_url + path, wait_until="load", timeout=timeout_ms)
                # A page that keeps polling never goes idle; it is still a page to capture.
                with contextlib.suppress(PlaywrightError):
                    page.wait_for_load_state("networkidle", timeout=2_000)
                page.screenshot(path=str(out_path), full_page=True)
            finally:
                context.close()
    except PlaywrightError as exc:
        message = truncate_middle(str(exc), 1_000)
        return _Page(None, errors, f"the page at {path} could not be loaded: {message}")
    return _Page(response.status if response else None, errors)
