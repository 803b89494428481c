"""Runs one stored App mission: admit it, report a check run, fix, verify, deliver.

Admission happens here, not in the webhook handler, because it needs GitHub: the
repository config is read from the default branch, a comment's author is checked against
the collaborator-permission endpoint, and the pull request's head commit is pinned. The
handler only stores the mission, so it can answer GitHub at once.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import structlog
from sqlalchemy.exc import SQLAlchemyError

from loopwright.agent.model import Model
from loopwright.agent.pair import PairMode
from loopwright.app.commands import NON_WRITER_REPLY_WINDOW_S
from loopwright.app.pair import StorePair
from loopwright.cancellation import Cancellation
from loopwright.config import ConfigError, Settings
from loopwright.events import EventBus, EventSink
from loopwright.github import render
from loopwright.github.delivery import Delivered, GitHubDelivery
from loopwright.github.gitops import GitError, clone_at
from loopwright.github.iterate import foreign_commits, mission_guidance, someone_else_pushed
from loopwright.github.service import Conclusion, GitHubApp, GitHubError, RepoSession
from loopwright.github.tracking import Outcome, Tracking, TrackingComment
from loopwright.github.triggers import NeedsPermission, Reply, TriggerContext, authorize
from loopwright.missions.delivery import Deliverer, DeliveryOutcome
from loopwright.missions.fix import FixMission, FixRequest
from loopwright.missions.result import MissionResult
from loopwright.redaction import Redactor, redacted_result
from loopwright.repo_config import RepoConfig
from loopwright.request import MissionRequest
from loopwright.sandbox.base import SandboxProvider
from loopwright.sandbox.hosttree import discard_tree
from loopwright.store.missions import MissionTakenOver, current_claim
from loopwright.store.repository import Store

CONCLUSIONS: dict[str, Conclusion] = {
    "verified": "success",
    "unverified": "neutral",
    "flaky": "neutral",
    "nothing_to_fix": "neutral",
    "budget_exceeded": "neutral",
    "error": "failure",
    "cancelled": "cancelled",
}
CANCEL_POLL_S = 0.5
"""How often a running mission looks in the store for a cancel request."""


@contextmanager
def watch_for_cancel(
    store: Store, mission_id: str, poll_s: float = CANCEL_POLL_S
) -> Iterator[Cancellation]:
    """Poll the store for a cancel request while the mission runs: the request may come from
    a webhook or the live view of any process sharing the store. A failed poll (the database
    restarting, a lock) is logged and the next one tried, so a cancel still reaches the
    mission once the store answers again.

    A mission run under a claim (a queue's worker) is also stopped, at its next stage, once
    the claim is no longer its run: another worker took it over."""
    cancellation = Cancellation()
    claim = current_claim(mission_id)  # a context variable: read here, not in the thread
    stopped = threading.Event()
    log = structlog.get_logger("loopwright.mission").bind(mission=mission_id)

    def watch() -> None:
        failing = False
        while not stopped.wait(poll_s):
            try:
                summary = store.cancel_requested(mission_id)
                if summary is None and claim is not None and not store.owns(claim):
                    log.warning("this worker no longer owns the mission; it stops")
                    summary = str(MissionTakenOver(claim))
            except SQLAlchemyError as exc:
                if not failing:  # once per outage, not every poll
                    log.warning("cancel_poll_failed", error=f"{type(exc).__name__}: {exc}")
                failing = True
                continue
            if failing:
                log.info("cancel_poll_recovered")
                failing = False
            if summary is not None:
                cancellation.cancel(summary)
                return

    watcher = threading.Thread(target=watch, name=f"cancel-watch-{mission_id}", daemon=True)
    watcher.start()
    try:
        yield cancellation
    finally:
        stopped.set()
        watcher.join()


class AppMissionRunner:
    """The work function the mission queue calls with a mission id."""

    def __init__(
        self,
        *,
        settings: Settings,
        store: Store,
        github: GitHubApp,
        provider: SandboxProvider,
        model_factory: Callable[[Settings], Model],
        extra_sinks: Callable[[str], list[EventSink]] | None = None,
    ) -> None:
        self.settings = settings
        self.store = store
        self.github = github
        self.provider = provider
        self.model_factory = model_factory
        self.extra_sinks = extra_sinks or (lambda _id: [])
        self._cancellations: dict[str, Cancellation] = {}

    def __call__(self, mission_id: str) -> None:
        with self._watch_for_cancel(mission_id):
            self._start(mission_id)

    @contextmanager
    def _watch_for_cancel(self, mission_id: str) -> Iterator[None]:
        with watch_for_cancel(self.store, mission_id) as cancellation:
            self._cancellations[mission_id] = cancellation
            try:
                yield
            finally:
                self._cancellations.pop(mission_id, None)

    def _start(self, mission_id: str) -> None:
        mission = self.store.get_mission(mission_id)
        if mission is None:
            return
        request = MissionRequest.from_dict(dict(mission.request))
        log = structlog.get_logger("loopwright.mission").bind(
            mission=mission_id, repo=request.repo, delivery=request.extra.get("delivery")
        )
        if request.installation_id is None:
            self.store.set_status(mission_id, "error", message="the event named no installation")
            return
        try:
            session = self.github.session(request.installation_id, request.repo, log=log)
        except GitHubError as exc:
            self.store.set_status(mission_id, "error", message=str(exc))
            return
        redactor = Redactor([*self.settings.secrets(), session.token])
        bus = EventBus(
            mission_id,
            [self.store.event_sink(mission_id), *self.extra_sinks(mission_id)],
            redactor,
            # A mission run again after its worker was lost continues its log.
            seq_after=self.store.last_event_seq(mission_id),
        )
        try:
            self._run(mission_id, request, session, bus, redactor)
        except (GitHubError, GitError) as exc:
            bus.emit("error", message=str(exc), kind=type(exc).__name__)
            self.store.set_status(mission_id, "error", message=redactor.text(str(exc)))

    # -- the steps -------------------------------------------------------------------------

    def _run(
        self,
        mission_id: str,
        request: MissionRequest,
        session: RepoSession,
        bus: EventBus,
        redactor: Redactor,
    ) -> None:
        try:
            config = session.read_config()
        except ConfigError as exc:
            if request.head_sha:
                check = session.start_check(request.head_sha, self._url(mission_id), mission_id)
                session.finish_check(
                    check,
                    "failure",
                    {"title": "Invalid Loopwright configuration", "summary": str(exc)},
                )
            self.store.set_status(mission_id, "error", message=f"invalid configuration: {exc}")
            return
        if request.trigger == "comment":
            admitted = self._authorize(mission_id, request, session)
            if admitted is None:
                return
            request = admitted
            if request.iterate and not self._branch_is_ours(mission_id, request, session):
                return
        elif not config.auto_fix:
            self.store.set_status(
                mission_id, "ignored", message="auto_fix is off in .github/loopwright.yml"
            )
            return
        elif session.commit_is_loopwrights(request.head_sha):
            # A red check on Loopwright's own commit must not start a chain of missions
            # (SECURITY 24); a check_run payload cannot tell, so the commit is read back.
            self.store.set_status(
                mission_id,
                "ignored",
                message=f"commit {request.head_sha[:7]} was authored by Loopwright",
            )
            return

        tracker = self._track(mission_id, request, session, bus, redactor)
        taken_over = False
        try:
            self._work(mission_id, request, session, config, bus, redactor, tracker)
        except MissionTakenOver:
            taken_over = True  # the new run reports to GitHub, not this one
            raise
        except (GitHubError, GitError) as exc:
            if tracker is not None:
                tracker.finish(Outcome("error", message=str(exc)))
            raise
        finally:
            if tracker is not None and not tracker.finished and not taken_over:
                tracker.finish(Outcome("error", message="the mission stopped unexpectedly"))

    def _work(
        self,
        mission_id: str,
        request: MissionRequest,
        session: RepoSession,
        config: RepoConfig,
        bus: EventBus,
        redactor: Redactor,
        tracker: TrackingComment | None,
    ) -> None:
        # A mission run again after its worker was lost reports to the check run its
        # first start opened, which nobody completed.
        stored = self.store.get_mission(mission_id)
        check_id = (
            int(stored.check_run_id)
            if stored is not None and stored.check_run_id is not None
            else session.start_check(request.head_sha, self._url(mission_id), mission_id)
        )
        self.store.set_links(mission_id, check_run_id=check_id)
        workdir = self.settings.data_dir / "missions" / mission_id
        if stored is not None and stored.attempts > 1:
            # This start begins from nothing: whatever a lost worker's start left goes.
            discard_tree(workdir)
        github_delivery = GitHubDelivery(
            request=request,
            session=session,
            checkout=lambda: workdir / "checkout",
            bus=bus,
            redactor=redactor,
            mission_url=self._url(mission_id),
            tracked=tracker is not None,
        )

        def delivery(result: MissionResult) -> DeliveryOutcome:
            # No pull request for a run another worker took over: it delivers its own.
            self.store.check_owner(mission_id)
            return github_delivery(result)

        try:
            result = self._fix(
                mission_id, request, session, config, bus, workdir, delivery, redactor
            )
            # Nor a check run, a tracking comment or a stored result.
            self.store.check_owner(mission_id)
            delivered = github_delivery.delivered
            failure = delivered.reason if delivered.kind == "failed" else ""
            try:
                self._finish_check(session, check_id, result, delivered, redactor)
            except GitHubError as exc:
                # The mission has ended (`done` was its last event), so the failed
                # check-run update is the stored status, not another event.
                failure = str(exc)
            finally:
                if tracker is not None:
                    tracker.finish(
                        Outcome.from_result(
                            result.to_dict(),
                            kind=delivered.kind,
                            url=delivered.url,
                            reason=delivered.reason,
                        )
                    )
                # The result is stored last (after GitHub shows it) but always, even when
                # delivery or the check-run update failed; the link first, so a client that
                # sees the final status sees the pull request too.
                if delivered.url:
                    self.store.set_links(mission_id, pr_url=delivered.url)
                self.store.mark_finished(redacted_result(result, redactor))
                if failure:
                    self.store.set_status(mission_id, "error", message=redactor.text(failure))
        finally:
            discard_tree(workdir / "checkout")

    def _track(
        self,
        mission_id: str,
        request: MissionRequest,
        session: RepoSession,
        bus: EventBus,
        redactor: Redactor,
    ) -> TrackingComment | None:
        """Post the tracking comment of a mission for a pull request, before any work, and
        follow the mission's stages in it. A comment GitHub refuses is logged, and the
        mission goes on without one."""
        if not request.pr_number:
            return None
        tracker = TrackingComment(
            session,
            request.pr_number,
            Tracking(
                mission=mission_id,
                head_sha=request.head_sha,
                actor=request.actor if request.trigger == "comment" else None,
                check_name=request.check_name,
                live_url=self._url(mission_id),
            ),
            redactor,
            interval_s=self.settings.github.comment_interval_s,
        )
        stored = self.store.get_mission(mission_id)
        earlier = stored.tracking_comment_id if stored is not None else None
        try:
            comment_id = tracker.post(int(earlier) if earlier is not None else None)
        except GitHubError as exc:
            structlog.get_logger("loopwright.mission").warning(
                "no tracking comment", mission=mission_id, error=str(exc)
            )
            return None
        self.store.set_links(mission_id, tracking_comment_id=comment_id)
        bus.sinks.append(tracker.sink)
        return tracker

    def _react(self, request: MissionRequest, session: RepoSession) -> None:
        """👀 on the command's comment, an issue comment or a review comment on the diff:
        seen, and taken up."""
        try:
            if request.review is not None:
                session.react_to_review_comment(request.review.id, "eyes")
            elif request.comment_id is not None:
                session.react(request.comment_id, "eyes")
        except GitHubError as exc:
            structlog.get_logger("loopwright.mission").warning(
                "no reaction on the command",
                comment=request.review.id if request.review else request.comment_id,
                error=str(exc),
            )

    def _finish_check(
        self,
        session: RepoSession,
        check_id: int,
        result: MissionResult,
        delivered: Delivered,
        redactor: Redactor,
    ) -> None:
        output = render.check_run_output(result.to_dict(), redactor=redactor)
        if result.status == "cancelled":
            # The summary is Loopwright's own ("Cancelled by @login."), not the model's.
            output = {
                "title": "Cancelled",
                "summary": f"{result.summary} The sandbox was removed; nothing was delivered.",
                "text": output["text"],
            }
        if delivered.url:
            output["summary"] += f"\n\n{delivered.kind.replace('_', ' ')}: {delivered.url}"
        elif delivered.reason and result.status == "verified":
            output["summary"] += f"\n\nNot delivered: {delivered.reason}"
        session.finish_check(
            check_id,
            CONCLUSIONS.get(result.status, "neutral"),
            {"title": output["title"], "summary": output["summary"], "text": output["text"]},
        )

    def _may_answer_non_writer(self, mission_id: str, request: MissionRequest, number: int) -> bool:
        delivery = request.extra.get("delivery")
        if not isinstance(delivery, str) or not delivery:
            return True
        key = f"non-writer reply on {request.repo}#{number}"
        self.store.decide_delivery(delivery, key, mission_id=mission_id)
        return self.store.recent_deliveries(key, NON_WRITER_REPLY_WINDOW_S) <= 1

    def _authorize(
        self, mission_id: str, request: MissionRequest, session: RepoSession
    ) -> MissionRequest | None:
        number = request.pr_number or 0
        permission = session.permission(request.actor or "")
        pull = session.pull_data(number)
        # The attempt cap is the last check: it is made by the write that pins the head, in
        # one transaction with its count (a count read first could be stale by the write).
        ctx = TriggerContext(
            app_slug=self.settings.github.app_slug,
            max_attempts=self.settings.github.max_attempts,
        )
        pending = NeedsPermission(request, request.actor or "")
        decision = authorize(pending, permission, pull, ctx)
        if isinstance(decision, MissionRequest):
            used = self.store.pin_within_cap(mission_id, decision, ctx.max_attempts)
            if used is None:
                self._react(decision, session)
                return decision
            capped = replace(ctx, attempts={decision.head_sha: used})
            decision = authorize(pending, permission, pull, capped)
            if isinstance(decision, MissionRequest):  # the count is at the cap: never so
                raise RuntimeError(f"a mission was admitted past the attempt cap: {decision}")
        if isinstance(decision, Reply):
            writer = permission in ("write", "maintain", "admin")
            refused = not writer or decision.refused
            if not writer:
                # A non-writer gets one reply and nothing else, and at most one such reply
                # per pull request in the window (as for the other commands), so no one
                # without write access can make the App fill a thread with refusals.
                if self._may_answer_non_writer(mission_id, request, decision.issue_number):
                    session.comment(decision.issue_number, decision.body)
            else:
                self._react(request, session)
                comment_id, _ = session.post_comment(decision.issue_number, decision.body)
                self.store.set_links(mission_id, tracking_comment_id=comment_id)
            self.store.set_status(
                mission_id,
                "refused" if refused else "ignored",
                message=f"{request.actor} has {permission} permission"
                if permission not in ("write", "maintain", "admin")
                else decision.body,
            )
            return None
        self.store.set_status(mission_id, "ignored", message=decision.reason)
        return None

    def _branch_is_ours(
        self, mission_id: str, request: MissionRequest, session: RepoSession
    ) -> bool:
        """Iteration adds to Loopwright's branch only while every commit on it past the
        base is Loopwright's; otherwise one reply says why and the mission is refused."""
        number = request.pr_number or 0
        foreign = foreign_commits(session.pull_commits(number))
        if not foreign:
            return True
        body = someone_else_pushed(request.actor or "", request.head_ref or "", foreign, number)
        session.comment(number, body)
        self.store.set_status(
            mission_id,
            "refused",
            message=f"{request.head_ref} has commits Loopwright did not make: "
            + ", ".join(foreign),
        )
        return False

    def _fix(
        self,
        mission_id: str,
        request: MissionRequest,
        session: RepoSession,
        config: RepoConfig,
        bus: EventBus,
        workdir: Path,
        delivery: Deliverer,
        redactor: Redactor,
    ) -> MissionResult:
        settings = config.narrow(self.settings)
        # The checkout is the pull request's head; the instructions, like the config, come
        # from the default branch.
        try:
            instructions = session.read_instructions()
        except GitHubError as exc:
            # The file is optional: a failed read costs the guidance, not the mission.
            structlog.get_logger("loopwright.mission").warning(
                "repository instructions not read", mission=mission_id, error=str(exc)
            )
            instructions = None
        tree = clone_at(request.clone_url, request.head_sha, workdir / "checkout", session.token)
        model = self.model_factory(settings)
        try:
            return FixMission(
                FixRequest(
                    source=str(tree),
                    guidance=mission_guidance(request),
                    mission_id=mission_id,
                    repo_config=config,
                    instructions=instructions,
                    # Only words ask for a change; a bare command re-checks the fix.
                    change_requested=request.iterate and bool((request.guidance or "").strip()),
                ),
                settings=settings,
                provider=self.provider,
                model=model,
                events=bus,
                deliver=delivery,
                cancellation=self._cancellations.get(mission_id),
                # On where the repository config sets `pair: true`; decisions come
                # through the store from whichever server a person decided on.
                pair=PairMode(
                    StorePair(self.store, mission_id, settings.pair_expiry_s, redactor),
                    expiry_s=settings.pair_expiry_s,
                ),
            ).run()
        finally:
            close = getattr(model, "close", None)
            if callable(close):
                close()

    def _url(self, mission_id: str) -> str | None:
        base = self.settings.github.public_url
        return f"{base}/missions/{mission_id}" if base else None
