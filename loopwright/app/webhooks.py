"""`POST /webhooks/github`: verify, record, decide, store, answer — in milliseconds.

The signature is checked on the raw bytes before anything is parsed. The delivery id is
the replay guard (GitHub signatures carry no timestamp). The decision is the pure
`triggers.decide`; anything that needs GitHub's API (the repository config on the default
branch, the commenter's permission) is the runner's first step, so the mission is stored
before the answer and survives a crash right after it.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import json
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any, TypeVar

import msgspec
import structlog
from githubkit.webhooks import verify
from litestar import Litestar, asgi
from litestar.enums import ScopeType
from litestar.status_codes import (
    HTTP_200_OK,
    HTTP_202_ACCEPTED,
    HTTP_400_BAD_REQUEST,
    HTTP_401_UNAUTHORIZED,
    HTTP_405_METHOD_NOT_ALLOWED,
    HTTP_413_REQUEST_ENTITY_TOO_LARGE,
)
from litestar.types import (
    HTTPResponseBodyEvent,
    HTTPResponseStartEvent,
    Receive,
    Scope,
    Send,
)
from structlog.typing import FilteringBoundLogger

from loopwright.app.commands import CommentCommands, retry_request
from loopwright.app.metrics import Metrics
from loopwright.app.params import header_token, json_problem
from loopwright.app.runtime import Runtime
from loopwright.app.views import SECURITY_HEADERS
from loopwright.github.triggers import (
    CommandComment,
    Decision,
    Ignore,
    NeedsPermission,
    Reply,
    TriggerContext,
    decide,
)
from loopwright.repo_config import RepoConfig
from loopwright.request import MissionRequest
from loopwright.store.deliveries import Accepted
from loopwright.store.repository import Store

MAX_WEBHOOK_BYTES = 25 * 1024 * 1024
CHECK_ON_LOOP_MAX_BYTES = 256 * 1024
"""A larger body is verified and parsed on a thread: the event loop serves every other
request (live streams, the dashboard) and must not stop for a large document."""
# auto_fix is decided by the runner from the default branch's config; here a CI failure
# is only a candidate.
CANDIDATE_CONFIG = RepoConfig(auto_fix=True)

log = structlog.get_logger("loopwright.webhooks")
T = TypeVar("T")
Answer = tuple[int, dict[str, Any]]
"""A status code and the JSON body that goes with it."""

_HEADERS = frozenset(
    {b"x-hub-signature-256", b"x-github-event", b"x-github-delivery", b"content-length"}
)
_ANSWER_HEADERS = [
    (b"content-type", b"application/json"),
    *(
        (h.name.lower().encode("latin-1"), (h.value or "").encode("latin-1"))
        for h in SECURITY_HEADERS
    ),
]


class _HeadAttempts(Mapping[str, int]):
    """Missions already stored per head SHA of one repository, read on demand."""

    def __init__(self, store: Store, repo: str) -> None:
        self._store = store
        self._repo = repo

    def __getitem__(self, sha: str) -> int:
        return self._store.attempts_for_head(self._repo, sha)

    def __iter__(self) -> Iterator[str]:
        return iter(())

    def __len__(self) -> int:
        return 0


def _answer(code: int, /, **body: Any) -> Answer:
    return code, body


@asgi("/webhooks/github", copy_scope=False)
async def github_webhook(scope: Scope, receive: Receive, send: Send) -> None:
    """`POST /webhooks/github`, as a plain ASGI route: Litestar's request, parameter and
    response machinery cost an ignored delivery 0.14 ms of its 1.2 (measured through
    uvicorn), and a burst of deliveries pays them for every one. The route keeps Litestar's
    routing, its exception handling (an error is a 500) and the app's middleware."""
    if scope["type"] != ScopeType.HTTP:
        return  # a WebSocket handshake: the server refuses one the app does not accept
    if scope["method"] != "POST":
        refused = _answer(HTTP_405_METHOD_NOT_ALLOWED, error="GitHub deliveries are POSTed")
        await _send(send, refused, ((b"allow", b"POST"),))
        return
    headers: dict[bytes, str] = {}
    for name, value in scope["headers"]:
        name = name.lower()
        if name in _HEADERS and name not in headers:
            headers[name] = value.decode("latin-1")
    try:
        body = await _read_body(receive, headers.get(b"content-length"))
    except _Disconnected:
        return  # the sender hung up before the body was whole: nothing to answer
    if body is None:
        answer = _answer(
            HTTP_413_REQUEST_ENTITY_TOO_LARGE,
            error=f"the body is over {MAX_WEBHOOK_BYTES // (1024 * 1024)} MiB; GitHub caps "
            "webhook payloads at 25 MB",
        )
    else:
        client = scope.get("client")
        answer = await _answer_delivery(
            Litestar.from_scope(scope).state, headers, body, client[0] if client else None
        )
    await _send(send, answer)


class _Disconnected(Exception):
    """The sender went away before its body was whole."""


async def _read_body(receive: Receive, length: str | None) -> bytes | None:
    """The whole body, or None when it is (or says it is) over MAX_WEBHOOK_BYTES. A
    Content-Length that is not a number is left to the count of what arrives."""
    length = (length or "").strip()
    # ASCII digits only (`"²".isdigit()` is True) and few enough for int() to take.
    if (
        length.isascii()
        and length.isdigit()
        and len(length) < 20
        and int(length) > MAX_WEBHOOK_BYTES
    ):
        return None
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            raise _Disconnected
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_WEBHOOK_BYTES:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


async def _send(send: Send, answer: Answer, extra: tuple[tuple[bytes, bytes], ...] = ()) -> None:
    code, body = answer
    data = json.dumps(body, separators=(",", ":")).encode()
    start: HTTPResponseStartEvent = {
        "type": "http.response.start",
        "status": code,
        "headers": [*_ANSWER_HEADERS, (b"content-length", str(len(data)).encode()), *extra],
    }
    end: HTTPResponseBodyEvent = {"type": "http.response.body", "body": data, "more_body": False}
    await send(start)
    await send(end)


async def _answer_delivery(
    state: Any, headers: Mapping[bytes, str], body: bytes, client: str | None
) -> Answer:
    """Checks and the decision on the event loop; the store's write awaited, not waited for
    on a thread. A red check's attempt count is read in its write (`_count_and_accept`).
    A comment (its retry reads the store; a command, a reply or a permission check starts
    work) is decided and answered on a thread."""
    runtime: Runtime = state.runtime
    metrics: Metrics = state.metrics
    secret = runtime.settings.github.webhook_secret or ""
    if len(body) > CHECK_ON_LOOP_MAX_BYTES:
        checked = await _on_thread(runtime.webhook_threads, _check, headers, client, body, secret)
    else:
        checked = _check(headers, client, body, secret)
    if not isinstance(checked, _Checked):
        answer = checked
    else:
        # Only signed deliveries hold missions back (see DeliveriesInFlight).
        with runtime.deliveries.answering():
            decision = _decide(checked, runtime, _NoStoreReads())
            if isinstance(decision, Ignore):
                answer = await _ignore(checked, decision, runtime)
            elif isinstance(decision, _NeedsStore):
                answer = await _count_and_accept(checked, runtime)
            else:
                answer = await _on_thread(runtime.webhook_threads, _handle_work, checked, runtime)
    metrics.count_delivery(*answer)
    return answer


async def _on_thread(threads: ThreadPoolExecutor, work: Callable[..., T], *args: object) -> T:
    """`work(*args)` on one of the webhook's threads, in this request's context."""
    context = contextvars.copy_context()
    return await asyncio.get_running_loop().run_in_executor(
        threads, functools.partial(context.run, work, *args)
    )


@dataclass(frozen=True)
class _Checked:
    """A delivery whose signature, headers and body passed the checks."""

    delivery: str
    event: str
    action: str | None
    payload: Any
    bound: FilteringBoundLogger


class _NeedsStore:
    """The decision needs a count from the store: it is made again with the store's counts
    (in the delivery's write, `_count_and_accept`)."""

    __slots__ = ()


_NEEDS_STORE = _NeedsStore()


class _CountAsked(Exception):
    """Raised by `_NoStoreReads` and caught by `_decide`, which returns `_NEEDS_STORE`
    instead: the exception's traceback holds the deciding frames, and one kept past its
    handler makes a cycle that holds the whole parsed payload until a full garbage
    collection."""


class _NoStoreReads(Mapping[str, int]):
    """Attempts per head for a decision made on the event loop, which must not block on
    the store: asking for one means the decision is made again with the store's counts."""

    def __getitem__(self, sha: str) -> int:
        raise _CountAsked(sha)

    def __iter__(self) -> Iterator[str]:
        return iter(())

    def __len__(self) -> int:
        return 0


def _check(
    headers: Mapping[bytes, str], client: str | None, body: bytes, secret: str
) -> Answer | _Checked:
    signature = headers.get(b"x-hub-signature-256", "")
    if not signature.startswith("sha256=") or not header_token(signature):
        return _answer(
            HTTP_401_UNAUTHORIZED,
            error="missing or malformed X-Hub-Signature-256 (sha256=<hex digest>); only "
            "sha256 signatures are accepted",
        )
    if not verify(secret, body, signature):
        return _answer(
            HTTP_401_UNAUTHORIZED,
            error="signature does not match; LOOPWRIGHT_WEBHOOK_SECRET must equal the webhook "
            "secret in the GitHub App's settings (Settings → Developer settings → GitHub Apps)",
        )
    event = headers.get(b"x-github-event", "")
    delivery = headers.get(b"x-github-delivery", "")
    if not event or not delivery:
        return _answer(HTTP_400_BAD_REQUEST, error="missing X-GitHub-Event or X-GitHub-Delivery")
    # Headers arrive as latin-1; GitHub's event names and delivery GUIDs are plain ASCII.
    for name, value in (("X-GitHub-Event", event), ("X-GitHub-Delivery", delivery)):
        if not header_token(value):
            return _answer(
                HTTP_400_BAD_REQUEST,
                error=f"{name} must be printable ASCII without spaces, at most 200 characters "
                "(GitHub sends an event name and a GUID)",
            )
    payload, problem = _parse(body)
    if problem is not None:
        return _answer(HTTP_400_BAD_REQUEST, error=problem)
    action = payload.get("action") if isinstance(payload, dict) else None
    action = action if isinstance(action, str) else None
    # `event` is the line's own message key in structlog; the GitHub event is `github_event`.
    # The sender's address: uvicorn's access line, which had it, is left out for a 2xx.
    bound = log.bind(delivery=delivery, github_event=event, action=action, client=client)
    return _Checked(delivery, event, action, payload, bound)


def _decide(
    checked: _Checked, runtime: Runtime, attempts: Mapping[str, int]
) -> Decision | _NeedsStore:
    github = runtime.settings.github
    ctx = TriggerContext(
        app_slug=github.app_slug,
        allowed_bots=frozenset(github.allowed_bots),
        attempts=attempts,
        max_attempts=github.max_attempts,
    )
    try:
        return decide(checked.event, checked.payload, CANDIDATE_CONFIG, ctx)
    except _CountAsked:
        return _NEEDS_STORE


async def _ignore(checked: _Checked, decision: Ignore, runtime: Runtime) -> Answer:
    accepted = await asyncio.wrap_future(
        runtime.store.accept_delivery_later(
            checked.delivery, checked.event, checked.action, decision=f"ignored: {decision.reason}"
        )
    )
    if not accepted.new_delivery:
        checked.bound.info("duplicate delivery")
        return _answer(HTTP_200_OK, status="duplicate", delivery=checked.delivery)
    checked.bound.info("ignored", reason=decision.reason)
    return _answer(HTTP_200_OK, status="ignored", reason=decision.reason)


class _NotAMission(Exception):
    """A decision made with the store's counts that is neither a mission nor an ignore."""


async def _count_and_accept(checked: _Checked, runtime: Runtime) -> Answer:
    """A decision that needs the attempt count (a red check): the count is read, the
    decision made and the delivery stored in one unit of the store's group commit, which
    this awaits: no read of its own, and a thread only to hand a new mission to a queue
    whose submit waits on the network (SAQ)."""
    repo = _repo_name(checked.payload)
    decided: list[Decision | _NeedsStore] = []

    def decide(attempts: Mapping[str, int]) -> tuple[str, MissionRequest | None]:
        decision = _decide(checked, runtime, attempts)
        decided[:] = [decision]  # the unit may run twice: the last decision is the stored one
        if isinstance(decision, Ignore):
            return f"ignored: {decision.reason}", None
        if isinstance(decision, MissionRequest):
            extra = {**decision.extra, "delivery": checked.delivery}
            return "mission", replace(decision, extra=extra)
        raise _NotAMission(repr(decision))

    try:
        accepted = await asyncio.wrap_future(
            runtime.store.accept_delivery_deciding_later(
                checked.delivery, checked.event, checked.action, repo=repo, decide=decide
            )
        )
    except _NotAMission:  # no trigger decides so today; the general path handles any
        return await _on_thread(runtime.webhook_threads, _handle_work, checked, runtime)
    decision = decided[-1]
    if accepted.new_delivery and isinstance(decision, Ignore):
        checked.bound.info("ignored", reason=decision.reason)
        return _answer(HTTP_200_OK, status="ignored", reason=decision.reason)
    if accepted.created and runtime.queue.submit_blocks:  # not from the event loop
        return await _on_thread(runtime.webhook_threads, _queued, accepted, checked, runtime)
    return _queued(accepted, checked, runtime)


def _queued(accepted: Accepted, checked: _Checked, runtime: Runtime) -> Answer:
    """The answer for a stored mission delivery; a new mission is handed to the queue."""
    mission = accepted.mission_id
    if not accepted.new_delivery or mission is None:
        checked.bound.info("duplicate delivery")
        return _answer(HTTP_200_OK, status="duplicate", delivery=checked.delivery)
    if not accepted.created:
        checked.bound.info("same failure already has a mission", mission=mission)
        return _answer(HTTP_200_OK, status="duplicate", mission=mission)
    runtime.queue.submit(mission)
    checked.bound.info("mission queued", mission=mission)
    return _answer(HTTP_202_ACCEPTED, status="queued", mission=mission)


def _handle_work(checked: _Checked, runtime: Runtime) -> Answer:
    """On a thread: a decision that reads the store, then the write, then the work."""
    store = runtime.store
    delivery, event, action, bound = checked.delivery, checked.event, checked.action, checked.bound
    repo = _repo_name(checked.payload)
    decision = _decide(checked, runtime, _HeadAttempts(store, repo) if repo else {})
    if isinstance(decision, _NeedsStore):  # the store's own mapping never asks
        raise RuntimeError("the store's attempt counts were refused to a decision")
    if isinstance(decision, Ignore):
        accepted = store.accept_delivery(
            delivery, event, action, decision=f"ignored: {decision.reason}"
        )
        if not accepted.new_delivery:
            bound.info("duplicate delivery")
            return _answer(HTTP_200_OK, status="duplicate", delivery=delivery)
        bound.info("ignored", reason=decision.reason)
        return _answer(HTTP_200_OK, status="ignored", reason=decision.reason)
    if isinstance(decision, Reply):
        if not store.accept_delivery(delivery, event, action, decision="reply").new_delivery:
            bound.info("duplicate delivery")
            return _answer(HTTP_200_OK, status="duplicate", delivery=delivery)
        return _reply(runtime, decision, checked.payload, delivery, bound)
    if isinstance(decision, CommandComment):
        retry = retry_request(store, decision) if decision.command.name == "retry" else None
        if retry is None:
            return _command(runtime, decision, event, action, delivery, bound)
        decision = NeedsPermission(retry, decision.user)
    request_ = decision.request if isinstance(decision, NeedsPermission) else decision
    request_ = replace(request_, extra={**request_.extra, "delivery": delivery})
    accepted = store.accept_delivery(delivery, event, action, decision="mission", request=request_)
    return _queued(accepted, checked, runtime)


_DECODE_JSON = msgspec.json.Decoder().decode


def _parse(body: bytes) -> tuple[Any, str | None]:
    """The payload, or the reason it is refused; nothing is stored for a refused body.

    msgspec parses a red check's 14 kB in 30 us, `json.loads` in 73. It refuses a few
    documents `json.loads` takes (`NaN`, `Infinity`, a number past the largest float, an
    unpaired surrogate escape) and every one `json.loads` refuses, so any document it
    refuses, and no other, is read again by `json.loads`: the payload, or the reason it is
    refused, is the one `json.loads` gives. (One exception: a document nested within a few
    levels of the interpreter's recursion limit, which `json.loads` cannot read, is refused
    for nesting deeper than MAX_JSON_DEPTH instead: a 400 either way.) Versions of msgspec
    before 0.23 raised other errors for invalid UTF-8 and misread some integers past 64
    bits: hence its lowest version, and a fallback on any `ValueError`."""
    try:
        payload = _DECODE_JSON(body)
    except (ValueError, RecursionError):  # msgspec.DecodeError is a ValueError
        payload, refused = _parse_with_json(body)
        if refused is not None:
            return None, refused
    problem = json_problem(payload, body)
    return payload, (f"the body is not a payload GitHub sends: {problem}" if problem else None)


def _parse_with_json(body: bytes) -> tuple[Any, str | None]:
    """`json.loads`' payload of the body, or why the body is not JSON."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        return None, (
            f"the body is not UTF-8 (invalid byte at offset {exc.start}); GitHub sends JSON "
            "in UTF-8"
        )
    try:
        return json.loads(text), None
    except RecursionError:
        return None, "the body is not JSON a server can read: it nests too deeply"
    except ValueError as exc:  # JSONDecodeError, or an integer with too many digits
        return None, f"the body is not JSON ({exc})"


def _reply(
    runtime: Runtime,
    reply: Reply,
    payload: Mapping[str, Any],
    delivery: str,
    bound: FilteringBoundLogger,
) -> Answer:
    repo = _repo_name(payload)
    installation = (payload.get("installation") or {}).get("id")
    if not repo or not isinstance(installation, int):
        bound.info("ignored", reason="no repository or installation")
        return _answer(HTTP_200_OK, status="ignored", reason="no repository or installation")

    def post_reply() -> None:
        session = runtime.github.session(installation, repo)
        session.comment(reply.issue_number, reply.body)

    runtime.in_background(f"reply-{delivery}", post_reply)
    bound.info("reply queued")
    return _answer(HTTP_202_ACCEPTED, status="reply")


def _command(
    runtime: Runtime,
    comment: CommandComment,
    event: str,
    action: str | None,
    delivery: str,
    bound: FilteringBoundLogger,
) -> Answer:
    """Answer a command that starts no mission, after the permission check, off this path."""
    name = comment.command.name
    accepted = runtime.store.accept_delivery(delivery, event, action, decision=f"command {name}")
    if not accepted.new_delivery:
        bound.info("duplicate delivery")
        return _answer(HTTP_200_OK, status="duplicate", delivery=delivery)
    bound.info("command queued", command=name)
    commands = CommentCommands(runtime.settings, runtime.store, runtime.github)
    runtime.in_background(f"command-{delivery}", lambda: commands.run(comment, delivery))
    return _answer(HTTP_202_ACCEPTED, status="command", command=name)


def _repo_name(payload: Any) -> str:
    if not isinstance(payload, dict):
        return ""
    repository = payload.get("repository")
    name = repository.get("full_name") if isinstance(repository, dict) else None
    return name if isinstance(name, str) else ""


__all__ = ["MAX_WEBHOOK_BYTES", "github_webhook"]
