"""`create_app(settings)`: the Litestar application, its routes and its lifespan.

Two modes share the views, the API and the streams:

- `app` (the default, `loopwright serve`): the GitHub App runtime (webhooks, queue,
  sandboxes) runs in the lifespan and every mission's events are published to the channels.
- `local` (`loopwright fix --serve`): only the store and the channels; the CLI runs the
  mission itself and publishes its events through `app.state.hub`.
"""

from __future__ import annotations

import asyncio
import gc
import socket
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AsyncExitStack, asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any, Literal

import structlog
from litestar import Litestar, Router
from litestar.channels import ChannelsPlugin
from litestar.datastructures import State
from litestar.di import Provide
from litestar.exceptions import NotAuthorizedException
from litestar.openapi import OpenAPIConfig
from litestar.plugins.jinja import JinjaTemplateEngine
from litestar.static_files import create_static_files_router
from litestar.template.config import TemplateConfig
from litestar.types import ControllerRouterHandler

from loopwright import __version__
from loopwright.agent.model import Model
from loopwright.app.api import (
    GitHubSessions,
    costs,
    current_viewer,
    get_mission,
    healthz,
    list_missions,
    mission_changes,
    mission_events,
    mission_patch,
    require_token,
    screenshot,
)
from loopwright.app.cancel import cancel_mission
from loopwright.app.decisions import post_decision
from loopwright.app.fanout import open_fanout
from loopwright.app.hosts import only_hosts
from loopwright.app.metrics import Metrics, metrics_endpoint
from loopwright.app.readiness import readyz
from loopwright.app.runtime import Runtime, default_model, open_runtime
from loopwright.app.schema_ui import SCHEMA_PATH, OfflineSwaggerUI
from loopwright.app.signin import (
    github_callback,
    github_sign_in,
    login,
    login_form,
    logout,
    unauthorized,
)
from loopwright.app.stream import LiveHub, StreamTiming, mission_event_stream, mission_list_stream
from loopwright.app.views import SECURITY_HEADERS, costs_page, mission_page, missions_page
from loopwright.app.webhooks import MAX_WEBHOOK_BYTES, github_webhook
from loopwright.config import Settings
from loopwright.github.ratelimit import WriteSpacer
from loopwright.sandbox.base import SandboxProvider
from loopwright.sandbox.factory import get_provider
from loopwright.store.repository import Store, open_store

APP_DIR = Path(__file__).resolve().parent
Mode = Literal["app", "local"]
log = structlog.get_logger("loopwright.server")


def _runtime(state: State) -> Runtime:
    runtime: Runtime = state.runtime
    return runtime


def _store(state: State) -> Store:
    store: Store = state.store
    return store


def _settings(state: State) -> Settings:
    settings: Settings = state.settings
    return settings


def _hub(state: State) -> LiveHub:
    hub: LiveHub = state.hub
    return hub


def _metrics(state: State) -> Metrics:
    metrics: Metrics = state.metrics
    return metrics


def _timing(state: State) -> StreamTiming:
    timing: StreamTiming = state.timing
    return timing


def create_app(
    settings: Settings,
    *,
    provider_factory: Callable[[Settings], SandboxProvider] = get_provider,
    model_factory: Callable[[Settings], Model] = default_model,
    mode: Mode = "app",
    timing: StreamTiming | None = None,
    channels: ChannelsPlugin | None = None,
    hub: LiveHub | None = None,
    allowed_hosts: frozenset[str] | None = None,
    write_spacer: WriteSpacer | None = None,
    start_up: bool = True,
    poll_queued: float | None = None,
    freeze_heap: bool = False,
) -> Litestar:
    """The server. Nothing is opened until the lifespan starts; everything is closed after.

    `allowed_hosts`: when given, a request whose `Host` names another host gets a 421
    (the local dashboard on loopback passes `LOOPBACK_HOSTS`; see loopwright/app/hosts.py).

    `hub` carries the live events. By default a server (`app`) with `settings.queue_url`
    shares the queue's backend with every worker and server on the queue (`open_fanout`);
    otherwise, and always in `local` mode, it is in this process's memory, on `channels`
    when given.

    `write_spacer` replaces the spacing of GitHub writes that
    `settings.github.write_interval_s` sets (a test with a clock of its own).

    `start_up=False` and `poll_queued` are for one worker process of several
    (`loopwright serve --workers N`; see `open_runtime`).

    `freeze_heap` (`loopwright serve`, a process that runs one server): once started,
    every object alive is moved out of the garbage collector's generations (`gc.freeze`)
    until the server stops, so that a full collection, which a burst of deliveries
    triggers, does not walk the modules, routes and engine again. A process that starts
    many apps (tests) leaves it off: the freeze is the whole process's.
    """
    if hub is None:
        hub = open_fanout(settings) if mode == "app" and channels is None else LiveHub(channels)
    metrics = Metrics()

    @asynccontextmanager
    async def lifespan(app: Litestar) -> AsyncIterator[None]:
        async with AsyncExitStack() as stack:
            # The channels start before any mission can run and stop after the last one:
            # that order is why the plugin is entered here rather than registered.
            await stack.enter_async_context(hub.channels)
            loop = asyncio.get_running_loop()
            hub.bind(loop)
            stack.push_async_callback(hub.unbind)
            if mode == "app":
                runtime = stack.enter_context(
                    open_runtime(
                        settings,
                        provider_factory=metrics.counting(provider_factory),
                        model_factory=model_factory,
                        extra_sinks=lambda mission_id: [hub.sink(mission_id)],
                        write_spacer=write_spacer,
                        start_up=start_up,
                        poll_queued=poll_queued,
                    )
                )
                app.state.runtime = runtime
                app.state.store = runtime.store
                # Which event loop uvicorn chose (uvloop when installed): a webhook
                # delivery's CPU depends on it (docs/benchmarks.md).
                loop_type = type(loop)
                log.info("app started", event_loop=f"{loop_type.__module__}.{loop_type.__name__}")
            else:
                app.state.store = stack.enter_context(open_store(settings))
            app.state.github_sessions = GitHubSessions(app.state.store)
            metrics.store = app.state.store
            stack.callback(setattr, metrics, "store", None)
            if freeze_heap:
                # A full collection took about 130 ms of a burst of deliveries; with what
                # start-up left frozen, about 11 ms.
                gc.collect()
                gc.freeze()
                stack.callback(gc.unfreeze)
            yield

    handlers: list[ControllerRouterHandler] = [
        missions_page,
        mission_page,
        costs_page,
        login_form,
        login,
        logout,
        github_sign_in,
        github_callback,
        mission_list_stream,
        mission_event_stream,
        list_missions,
        get_mission,
        mission_events,
        mission_patch,
        mission_changes,
        costs,
        screenshot,
        healthz,
        readyz,
        metrics_endpoint,
        create_static_files_router(
            path="/static", directories=[APP_DIR / "static"], include_in_schema=False
        ),
    ]
    if mode == "app":
        handlers.insert(0, github_webhook)
        handlers.append(cancel_mission)
        handlers.append(post_decision)
    dependencies: dict[str, Any] = {
        "store": Provide(_store, sync_to_thread=False),
        "settings": Provide(_settings, sync_to_thread=False),
        "hub": Provide(_hub, sync_to_thread=False),
        "timing": Provide(_timing, sync_to_thread=False),
        "metrics": Provide(_metrics, sync_to_thread=False),
        "viewer": Provide(current_viewer),
    }
    if mode == "app":
        dependencies["runtime"] = Provide(_runtime, sync_to_thread=False)
    return Litestar(
        route_handlers=handlers,
        lifespan=[lifespan],
        dependencies=dependencies,
        state=State(
            {
                "settings": settings,
                "hub": hub,
                "timing": timing or StreamTiming(),
                "mode": mode,
                "metrics": metrics,
            }
        ),
        template_config=TemplateConfig(directory=APP_DIR / "templates", engine=JinjaTemplateEngine),
        exception_handlers={NotAuthorizedException: unauthorized},
        response_headers=SECURITY_HEADERS,
        request_max_body_size=MAX_WEBHOOK_BYTES,
        openapi_config=OpenAPIConfig(
            title="Loopwright",
            version=__version__,
            path=SCHEMA_PATH,
            render_plugins=[OfflineSwaggerUI(path="/")],
            # The description and its UI are behind the same sign-in as the API.
            openapi_router=Router(
                SCHEMA_PATH, route_handlers=[], guards=[require_token], include_in_schema=False
            ),
        ),
        # Litestar's default config would give the root logger a format of its own;
        # loopwright.logs configures one formatter for every library instead.
        logging_config=None,
        middleware=[only_hosts(allowed_hosts)] if allowed_hosts is not None else [],
    )


@contextmanager
def serve_in_thread(
    app: Litestar,
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    startup_timeout_s: float = 30.0,
    graceful_s: int = 2,
) -> Iterator[str]:
    """Run `app` with uvicorn on a background thread; yields its base URL.

    The socket is bound here, so a busy port fails at once and port 0 picks a free one.
    Open streams get `graceful_s` to finish when the block exits, then they are cut.
    """
    import uvicorn

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    bound = sock.getsockname()[1]
    config = uvicorn.Config(
        app,
        log_level="warning",
        timeout_graceful_shutdown=graceful_s,
        lifespan="on",
        access_log=False,
        log_config=None,
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(
        target=server.run, kwargs={"sockets": [sock]}, name="loopwright-view", daemon=True
    )
    thread.start()
    deadline = time.monotonic() + startup_timeout_s
    while not server.started and thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    if not server.started:
        server.should_exit = True
        thread.join(5)
        sock.close()
        raise RuntimeError("the live view did not start; see the log above")
    shown = f"[{host}]" if ":" in host else host
    try:
        yield f"http://{shown}:{bound}"
    finally:
        server.should_exit = True
        thread.join(15)
        sock.close()
