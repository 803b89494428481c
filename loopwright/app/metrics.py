"""`/metrics` in Prometheus text format: missions by status, model tokens and cost by tier,
queue depth (read from the store at each scrape, so every process sharing the store agrees),
this process's sandbox starts and webhook deliveries by outcome (counters), and its warm
pool: idle sandboxes (a gauge) and pool sandboxes claimed by missions (a counter)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from litestar import Response, get
from litestar.di import NamedDependency
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from loopwright.app.api import require_full_access
from loopwright.config import Settings
from loopwright.sandbox.base import Sandbox, SandboxProvider
from loopwright.store.models import MISSION_STATUSES
from loopwright.store.repository import Store


class StoreCollector(Collector):
    """Reads the mission totals from the store when Prometheus scrapes."""

    def __init__(self, store: Callable[[], Store | None]) -> None:
        self._store = store

    def collect(self) -> Iterator[Metric]:
        store = self._store()
        if store is None:  # before the lifespan opened it
            return
        by_status = store.count_by_status()
        missions = GaugeMetricFamily(
            "loopwright_missions", "Stored missions by status", labels=["status"]
        )
        for status in sorted(MISSION_STATUSES):
            missions.add_metric([status], by_status.get(status, 0))
        yield missions
        yield GaugeMetricFamily(
            "loopwright_queue_depth",
            "Missions queued and waiting for a worker",
            value=by_status.get("queued", 0),
        )
        tokens = CounterMetricFamily(
            "loopwright_model_tokens", "Model tokens by tier and kind", labels=["tier", "kind"]
        )
        cost = CounterMetricFamily(
            "loopwright_model_cost_usd", "Model spend in US dollars by tier", labels=["tier"]
        )
        calls = CounterMetricFamily(
            "loopwright_model_calls", "Model calls by tier", labels=["tier"]
        )
        for tier in store.costs_by_tier():
            tokens.add_metric([tier["tier"], "prompt"], tier["prompt_tokens"])
            tokens.add_metric([tier["tier"], "completion"], tier["completion_tokens"])
            cost.add_metric([tier["tier"]], tier["cost_usd"])
            calls.add_metric([tier["tier"]], tier["calls"])
        yield tokens
        yield cost
        yield calls


class SandboxPoolCollector(Collector):
    """Reads the warm pool of this process's sandbox provider when Prometheus scrapes (a
    backend without a pool reports nothing)."""

    def __init__(self, provider: Callable[[], SandboxProvider | None]) -> None:
        self._provider = provider

    def collect(self) -> Iterator[Metric]:
        provider = self._provider()
        if provider is None:
            return
        idle = getattr(provider, "pool_size", None)
        claims = getattr(provider, "pool_claims", None)
        if isinstance(idle, int):
            yield GaugeMetricFamily(
                "loopwright_sandbox_pool_idle",
                "Idle warm-pool sandboxes of this process, ready to be claimed",
                value=idle,
            )
        if isinstance(claims, int):
            yield CounterMetricFamily(
                "loopwright_sandbox_pool_claims",
                "Warm-pool sandboxes this process handed to missions",
                value=claims,
            )


class Metrics:
    """One registry per app (no process-wide globals, so two apps in a test never mix)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.store: Store | None = None
        self.provider: SandboxProvider | None = None
        """The provider the last `counting` factory made (the runtime's)."""
        self.registry.register(StoreCollector(lambda: self.store))
        self.registry.register(SandboxPoolCollector(lambda: self.provider))
        self.sandbox_starts = Counter(
            "loopwright_sandbox_starts",
            "Sandboxes started by this process, by backend",
            ["backend"],
            registry=self.registry,
        )
        self.webhook_deliveries = Counter(
            "loopwright_webhook_deliveries",
            "Webhook deliveries received by this process, by outcome",
            ["outcome"],
            registry=self.registry,
        )

    def count_delivery(self, status_code: int | None, body: Any) -> None:
        """The outcome of one webhook answer: queued, ignored, duplicate, reply, or the
        refusal (unauthorized for a bad signature, rejected for a malformed delivery)."""
        status_code = status_code or 200
        if status_code == 401:
            outcome = "unauthorized"
        elif status_code >= 400:
            outcome = "rejected"
        else:
            outcome = str(body.get("status", "other")) if isinstance(body, dict) else "other"
        self.webhook_deliveries.labels(outcome=outcome).inc()

    def counting(
        self, factory: Callable[[Settings], SandboxProvider]
    ) -> Callable[[Settings], SandboxProvider]:
        """Wrap a provider factory so every sandbox it starts is counted."""

        def make(settings: Settings) -> SandboxProvider:
            provider = CountingProvider(factory(settings), self.sandbox_starts)
            self.provider = provider
            return provider

        return make


class CountingProvider:
    """A sandbox provider that counts the sandboxes it starts; everything else is the inner
    provider's."""

    def __init__(self, inner: SandboxProvider, starts: Counter) -> None:
        self.inner = inner
        self.kind = str(getattr(inner, "kind", "other"))
        self._starts = starts

    def create(self, mission_id: str, tree: Path, *, network: bool) -> Sandbox:
        sandbox = self.inner.create(mission_id, tree, network=network)
        self._starts.labels(backend=self.kind).inc()
        return sandbox

    def close(self) -> None:
        self.inner.close()

    def __getattr__(self, name: str) -> Any:
        # reap_abandoned and backend-specific extras
        return getattr(self.inner, name)


@get("/metrics", guards=[require_full_access], sync_to_thread=True, summary="Prometheus metrics")
def metrics_endpoint(metrics: NamedDependency[Metrics]) -> Response[bytes]:
    """Prometheus text exposition. Like `/api/costs` it totals every repository, so when
    LOOPWRIGHT_DASHBOARD_TOKEN is set it needs that token as a bearer header."""
    # Litestar adds the charset to text types itself.
    media_type = CONTENT_TYPE_LATEST.replace("; charset=utf-8", "")
    return Response(generate_latest(metrics.registry), media_type=media_type)
