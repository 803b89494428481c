"""`create_app(settings)`: the Litestar application, its routes and its lifespan."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from litestar import Litestar
from litestar.datastructures import State
from litestar.di import Provide
from litestar.openapi import OpenAPIConfig

from loopwright import __version__
from loopwright.agent.model import Model
from loopwright.app.api import get_mission, healthz, list_missions, screenshot
from loopwright.app.runtime import Runtime, default_model, default_provider, open_runtime
from loopwright.app.webhooks import MAX_WEBHOOK_BYTES, github_webhook
from loopwright.config import Settings
from loopwright.sandbox.base import SandboxProvider


def _runtime(state: State) -> Runtime:
    runtime: Runtime = state.runtime
    return runtime


def create_app(
    settings: Settings,
    *,
    provider_factory: Callable[[Settings], SandboxProvider] = default_provider,
    model_factory: Callable[[Settings], Model] = default_model,
) -> Litestar:
    """The server. Nothing is opened until the lifespan starts; everything is closed after."""

    @asynccontextmanager
    async def lifespan(app: Litestar) -> AsyncIterator[None]:
        with open_runtime(
            settings, provider_factory=provider_factory, model_factory=model_factory
        ) as runtime:
            app.state.runtime = runtime
            yield

    return Litestar(
        route_handlers=[github_webhook, list_missions, get_mission, screenshot, healthz],
        lifespan=[lifespan],
        dependencies={"runtime": Provide(_runtime, sync_to_thread=False)},
        request_max_body_size=MAX_WEBHOOK_BYTES,
        openapi_config=OpenAPIConfig(title="Loopwright", version=__version__, path="/schema"),
    )
