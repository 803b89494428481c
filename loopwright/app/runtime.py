"""The long-lived resources of a server process, opened and closed by the app's lifespan."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field

import structlog

from loopwright.agent.model import Model, OpenAIModel
from loopwright.app.runner import AppMissionRunner
from loopwright.config import ConfigError, Settings, warm_pool_size
from loopwright.events import EventSink
from loopwright.github import tracking
from loopwright.github.ratelimit import WriteSpacer
from loopwright.github.service import GitHubApp, GitHubError
from loopwright.redaction import Redactor
from loopwright.sandbox.base import SandboxError, SandboxProvider
from loopwright.sandbox.factory import get_provider
from loopwright.store.models import Mission
from loopwright.store.queue import MissionQueue, open_queue
from loopwright.store.repository import Store, open_store

log = structlog.get_logger("loopwright.server")


WEBHOOK_THREADS = 32


QUIET_S = 0.2
"""How long a server process must have answered no delivery of a burst before its missions
start."""
BURST_IN_FLIGHT = 3
"""Deliveries answered at once in one process that make a burst. Two at once happen by
chance in ordinary traffic: in a simulation of 20 random deliveries a second, answered in
3 ms, counting two as a burst held 43-45 % of mission starts back for the queue's whole
second; three (with stragglers bounded as below), none."""


class DeliveriesInFlight:
    """The webhook deliveries this process is answering now. The mission queue waits for
    them (`wait_answered`) before it starts missions, so a burst is acknowledged first.

    After a burst it also waits for `quiet_s` without a delivery. `serve --workers N`
    spreads a burst over processes that share one socket, and one process may finish its
    share first. Its missions would then start (token requests signed with the App's key,
    store writes) on the CPUs the other processes are still answering on. Every process
    keeps receiving deliveries until the burst ends, so a quiet moment in this process means
    the burst is over in the others too, with no signal between the processes.

    A burst is a busy spell (deliveries answered back to back, never none in flight) in
    which `burst_in_flight` were being answered at once; its last answer starts the quiet
    moment. A delivery answered outside a burst within `quiet_s` of that answer is a
    straggler and starts the quiet moment again, but stragglers do not extend the burst,
    so missions wait at most twice `quiet_s` after its last answer. Deliveries that come one
    or two at a time (ordinary traffic, a lone push) hold missions back only while one is
    being answered. So does the start of a burst: until `burst_in_flight` are in flight, a
    process cannot tell it from ordinary traffic, and a mission may start then; a process
    that has answered nothing yet waits for nothing."""

    def __init__(self, quiet_s: float = QUIET_S, burst_in_flight: int = BURST_IN_FLIGHT) -> None:
        if burst_in_flight < 2:
            raise ValueError(f"burst_in_flight must be at least 2, not {burst_in_flight}")
        self._count = 0
        self._quiet_s = quiet_s
        self._burst_in_flight = burst_in_flight
        self._in_burst = False
        """The current busy spell has had `burst_in_flight` deliveries in flight."""
        self._burst_last: float | None = None
        """When a delivery of a busy spell that was a burst was last answered."""
        self._quiet_from: float | None = None
        """When the quiet moment began: the burst's last answer, or a straggler's."""
        self._changed = threading.Condition()

    @contextmanager
    def answering(self) -> Iterator[None]:
        with self._changed:
            self._count += 1
            if self._count >= self._burst_in_flight:
                self._in_burst = True
        try:
            yield
        finally:
            with self._changed:
                self._count -= 1
                now = time.monotonic()
                if self._in_burst:
                    self._burst_last = self._quiet_from = now
                elif self._burst_last is not None and now - self._burst_last < self._quiet_s:
                    self._quiet_from = now  # a straggler of the burst
                if self._count == 0:
                    self._in_burst = False
                    self._changed.notify_all()

    def wait_answered(self, timeout: float) -> bool:
        """Block until no delivery is being answered and none of a burst was for `quiet_s`,
        or for `timeout` seconds; True if it is so."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                now = time.monotonic()
                if self._count == 0:
                    last = self._quiet_from
                    quiet_left = 0.0 if last is None else last + self._quiet_s - now
                    if quiet_left <= 0:
                        return True
                else:
                    quiet_left = deadline - now
                if now >= deadline:
                    return False
                self._changed.wait(min(quiet_left, deadline - now))


@dataclass
class Runtime:
    settings: Settings
    store: Store
    queue: MissionQueue
    github: GitHubApp
    provider: SandboxProvider | None
    """None in a server in front of SAQ workers: it runs no mission, so it has no sandboxes."""
    deliveries: DeliveriesInFlight = field(default_factory=DeliveriesInFlight)
    webhook_threads: ThreadPoolExecutor = field(
        default_factory=lambda: ThreadPoolExecutor(
            WEBHOOK_THREADS, thread_name_prefix="loopwright-webhook"
        )
    )
    """Where deliveries whose decision reads the store are handled. They spend most of their
    time waiting for the group commit, so a burst needs more of them than the event loop's
    default executor has (CPUs + 4): with six, six red checks at a time shared a commit."""
    _background: list[threading.Thread] = field(default_factory=list)

    def in_background(self, name: str, work: Callable[[], None]) -> None:
        """Run a short side task (a reply comment) without holding up the webhook answer."""

        def guarded() -> None:
            try:
                work()
            except (GitHubError, SandboxError) as exc:
                log.error("background task failed", task=name, error=str(exc))

        thread = threading.Thread(target=guarded, name=name, daemon=True)
        self._background.append(thread)
        thread.start()


def default_model(settings: Settings) -> Model:
    return OpenAIModel(settings)


@contextmanager
def open_runtime(
    settings: Settings,
    *,
    provider_factory: Callable[[Settings], SandboxProvider] = get_provider,
    model_factory: Callable[[Settings], Model] = default_model,
    extra_sinks: Callable[[str], list[EventSink]] | None = None,
    recover: bool = True,
    webhooks: bool = True,
    write_spacer: WriteSpacer | None = None,
    start_up: bool = True,
    poll_queued: float | None = None,
    worker: bool = False,
    concurrency: int | None = None,
) -> Iterator[Runtime]:
    """Open the store, the sandbox provider, the GitHub client and the queue; recover
    missions a previous process left behind; close everything on the way out.

    `extra_sinks(mission_id)` adds event sinks to every mission (the live view's channel).
    `recover=False` is for additional workers: only the server, which knows no mission of
    its own can still be running, marks `running` missions interrupted at start.
    `webhooks=False` is for a worker, which receives none and needs no webhook secret.

    A server keeps a warm pool (`warm_pool_size`, 2 unless LOOPWRIGHT_WARM_POOL says
    otherwise); a provider that records pool claims records them in the store, so the next
    process (a restarted server, another worker) knows which mission each one serves.

    `start_up=False` is for a worker process of `serve --workers N`: the parent already did
    the start-up work (`start_up_once`), so this process neither marks missions interrupted
    nor reaps sandboxes at its start; it runs the `queued` missions it finds. Every process
    with a sandbox provider reaps on a timer (`reap_now_and_then`). `poll_queued` (seconds)
    keeps taking `queued` missions from the shared store, whichever process stored them.

    With `settings.queue_url` a server (`worker=False`) only submits missions to SAQ: no
    sandbox provider (no Docker socket), no warm pool, no mission of its own, and nothing
    marked interrupted, since workers elsewhere may be running missions; a `worker=True`
    process consumes from SAQ, and takes over the missions of workers that were lost.
    `concurrency`: missions this process runs at once (default
    `settings.max_concurrent_missions`).
    """
    missing = settings.github.missing(webhooks=webhooks)
    if missing:
        raise ConfigError(f"the server needs {', '.join(missing)}; see README → GitHub App")
    assert settings.github.app_id is not None and settings.github.private_key is not None
    runs_missions = worker or settings.queue_url is None
    store = open_store(settings)
    provider: SandboxProvider | None = None
    queue: MissionQueue | None = None
    stop_feeding = threading.Event()
    feeder: threading.Thread | None = None
    reaper: threading.Thread | None = None
    runtime: Runtime | None = None
    try:
        github = GitHubApp(
            settings.github.app_id,
            settings.github.private_key,
            settings.github.api_url,
            spacer=write_spacer or WriteSpacer(settings.github.write_interval_s),
        )
        runner: AppMissionRunner | None = None
        if runs_missions:
            provider = provider_factory(
                settings.with_overrides(warm_pool=warm_pool_size(settings, server=True))
            )
            record_claims_in = getattr(provider, "record_claims_in", None)
            if callable(record_claims_in):
                record_claims_in(store)
            runner = AppMissionRunner(
                settings=settings,
                store=store,
                github=github,
                provider=provider,
                model_factory=model_factory,
                extra_sinks=extra_sinks,
            )
        lost = _LostMissions()
        deliveries = DeliveriesInFlight()
        # Every process on the store may run up to the cap; the store's slots keep all of
        # them together under it, and each installation under its own cap.
        queue = open_queue(
            settings,
            store,
            runner,
            concurrency or settings.max_concurrent_missions,
            redactor=Redactor(settings.secrets()),
            on_lost=lost,
            yield_to=deliveries.wait_answered if webhooks else None,
        )
        interrupted = queue.recover() if recover and start_up else []
        if start_up and provider is not None:
            # Sandboxes of the previous (dead) server process go, its pool members and
            # claimed pool containers included; live CLI runs and workers keep theirs.
            provider.reap_abandoned()
        elif not start_up:
            for mission_id in store.queued_mission_ids():
                queue.submit(mission_id)
        for mission in interrupted:
            log.warning("mission interrupted by a restart", mission=mission.id)
        runtime = Runtime(settings, store, queue, github, provider, deliveries)
        lost.runtime = runtime
        _finish_interrupted_checks(runtime, [m.id for m in interrupted])
        queue.start()
        if provider is not None and settings.sandbox_reap_every_s > 0:
            reaper = threading.Thread(
                target=reap_now_and_then,
                args=(provider, stop_feeding, settings.sandbox_reap_every_s),
                name="loopwright-sandbox-reaper",
                daemon=True,
            )
            reaper.start()
        if poll_queued is not None:
            feeder = threading.Thread(
                target=feed_from_store,
                args=(runtime, stop_feeding, poll_queued),
                name="loopwright-queued-missions",
                daemon=True,
            )
            feeder.start()
        yield runtime
    finally:
        if runtime is not None:
            runtime.webhook_threads.shutdown(wait=False, cancel_futures=True)
        stop_feeding.set()
        if feeder is not None:
            feeder.join(timeout=5)
        if reaper is not None:
            # A round under way is not waited for long: it runs on to its end on its daemon
            # thread, and removes only other processes' sandboxes (never this one's, whose
            # missions may run on past the grace below).
            reaper.join(timeout=REAPER_STOP_S)
        if queue is not None and not queue.stop(timeout=STOP_GRACE_S) and worker:
            # A server's missions end with it (the next start marks them interrupted); a
            # worker's run on, so a SIGTERM costs no retry.
            _wait_for_missions(queue)
        try:
            if provider is not None:
                provider.close()
        finally:
            store.close()  # its pending writes flushed, whatever the provider's close raised


REAPER_STOP_S = 2.0
"""How long a stopping process waits for a reaping round under way before it goes on to
its missions and closes the provider (the round runs on to its end, or to the process's)."""

STOP_GRACE_S = 30.0
"""How long a stopping process waits for its running missions before it stops their queue
(a worker's missions then run on; see `_wait_for_missions`)."""


def _wait_for_missions(queue: MissionQueue) -> None:
    """Missions still running after the grace period run to their end: their store
    heartbeat keeps going, so no other worker takes them over, and the sandbox provider and
    the store are closed only once they are done (SIGKILL ends the process at once, and its
    missions are retried elsewhere as a lost worker's)."""
    left = queue.running()
    if not left:
        return
    log.warning(
        "missions still running after the grace period; the process exits once they end "
        "(SIGKILL ends it now, and they are retried elsewhere)",
        missions=left,
    )
    while queue.running():
        time.sleep(0.5)


class _LostMissions:
    """What a worker does for a mission whose worker was lost, before it runs again: the
    lost process's sandboxes on this engine go (owner labels name dead processes); a
    mission lost for good gets its check run completed and its tracking comment told."""

    runtime: Runtime | None = None

    def __call__(self, mission: Mission, interrupted: bool) -> None:
        runtime = self.runtime
        if runtime is None:
            return
        if runtime.provider is not None:
            try:
                removed = runtime.provider.reap_abandoned()
            except SandboxError as exc:
                log.error("sandboxes of a lost worker not reaped", error=str(exc))
            else:
                if removed:
                    log.info(
                        "reaped the sandboxes of a lost worker",
                        mission=mission.id,
                        runner=mission.runner,
                        containers=len(removed),
                    )
        if interrupted:
            _finish_interrupted_checks(runtime, [mission.id], why=WORKER_LOST)


def reap_now_and_then(provider: SandboxProvider, stop: threading.Event, every_s: float) -> None:
    """Until `stop`, remove the sandboxes of gone processes about every `every_s` seconds: a
    worker on another host that stopped for good (scaled down, not replaced) leaves idle
    pool members that no start-up and no lost mission would reap (`reap_abandoned`).
    Each wait is drawn within `REAP_JITTER` of `every_s`: workers started together (a
    deploy, a scale-up) would otherwise all run their rounds, each a root `docker exec` or
    two per pool member of another host, at the same moments on a shared engine."""
    while not stop.wait(every_s * random.uniform(1 - REAP_JITTER, 1 + REAP_JITTER)):
        try:
            removed = provider.reap_abandoned()
        except Exception as exc:  # noqa: BLE001 - logged; the next round tries again
            log.error("sandboxes of gone processes not reaped", error=str(exc))
            continue
        if removed:
            log.info("reaped the sandboxes of gone processes", containers=len(removed))


REAP_JITTER = 0.1
"""How far, as a share of the interval, one wait of `reap_now_and_then` may be from it."""


def feed_from_store(runtime: Runtime, stop: threading.Event, poll: float) -> None:
    """Until `stop`, hand every `queued` mission of the shared store to this process's
    queue every `poll` seconds. Several processes may feed from one store: a mission is
    claimed by one conditional update, so it runs exactly once."""
    submitted: set[str] = set()
    while not stop.is_set():
        oldest_first = runtime.store.queued_mission_ids()
        for mission_id in oldest_first:  # the queue admits them in the order handed in
            if mission_id not in submitted:
                runtime.queue.submit(mission_id)
        queued = set(oldest_first)
        # Forget ids that left the queue, so a re-queued mission runs again.
        submitted = (submitted | queued) & (queued | set(runtime.queue.running()))
        stop.wait(poll)


def start_up_once(
    settings: Settings,
    *,
    provider_factory: Callable[[Settings], SandboxProvider] = get_provider,
    write_spacer: WriteSpacer | None = None,
) -> list[str]:
    """The start-up work of a server that runs several worker processes, done once by the
    parent before any worker starts: migrate the store, mark the missions the previous
    server left `running` as interrupted (their check runs completed, their tracking
    comments told, their slots freed), reap the sandboxes of dead processes. Returns the
    interrupted ids."""
    missing = settings.github.missing()
    if missing:
        raise ConfigError(f"the server needs {', '.join(missing)}; see README → GitHub App")
    assert settings.github.app_id is not None and settings.github.private_key is not None
    store = open_store(settings)
    provider: SandboxProvider | None = None
    try:
        provider = provider_factory(settings)
        github = GitHubApp(
            settings.github.app_id,
            settings.github.private_key,
            settings.github.api_url,
            spacer=write_spacer or WriteSpacer(settings.github.write_interval_s),
        )
        interrupted = [m.id for m in store.interrupt_running()]
        provider.reap_abandoned()
        for mission_id in interrupted:
            log.warning("mission interrupted by a restart", mission=mission_id)
        runtime = Runtime(settings, store, _NoQueue(), github, provider)
        _finish_interrupted_checks(runtime, interrupted)
        for thread in runtime._background:
            thread.join(60)
        return interrupted
    finally:
        try:
            if provider is not None:
                provider.close()
        finally:
            store.close()


class _NoQueue:
    """The queue of a process that runs no missions (the parent of the workers)."""

    submit_blocks = False

    def submit(self, mission_id: str) -> None:
        raise RuntimeError(f"mission {mission_id}: this process runs no missions")

    def start(self) -> None:
        pass

    def stop(self, timeout: float | None = None) -> bool:
        return True

    def running(self) -> list[str]:
        return []

    def recover(self) -> list[Mission]:
        return []


SERVER_RESTARTED = "the server restarted while this mission ran"
WORKER_LOST = "the worker running this mission was lost twice"


def _finish_interrupted_checks(
    runtime: Runtime, mission_ids: list[str], *, why: str = SERVER_RESTARTED
) -> None:
    """Complete the check runs of missions a restart interrupted, so none spins forever."""
    from loopwright.request import MissionRequest

    for mission_id in mission_ids:
        mission = runtime.store.get_mission(mission_id)
        if mission is None or mission.check_run_id is None:
            continue
        request = MissionRequest.from_dict(dict(mission.request))
        if request.installation_id is None:
            continue
        check_id = int(mission.check_run_id)
        comment_id = mission.tracking_comment_id

        def finish(
            request: MissionRequest = request,
            check_id: int = check_id,
            comment_id: int | None = comment_id,
            mission_id: str = mission_id,
        ) -> None:
            session = runtime.github.session(request.installation_id or 0, request.repo)
            session.finish_check(
                check_id,
                "neutral",
                {
                    "title": "Loopwright was interrupted",
                    "summary": f"{why[0].upper()}{why[1:]}; comment "
                    "`/loopwright fix` on the pull request to try again.",
                },
            )
            if comment_id is not None:
                tracking.note(
                    mission_id,
                    f"⚠️ **Interrupted:** {why}; comment `/loopwright fix` to try again.",
                    session=session,
                    comment_id=int(comment_id),
                )

        runtime.in_background(f"finish-check-{mission_id}", finish)
