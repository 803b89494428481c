"""The model client: one streamed chat completion per call against an OpenAI-compatible endpoint,
with our own retries, backoff and stall detection, and an optional recording of every exchange.
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import TracebackType
from typing import Any, NoReturn, Protocol, cast

import httpx2
import openai

from loopwright.agent.json_tools import json_tool_messages
from loopwright.agent.recording import Recorder
from loopwright.agent.replies import (
    ModelReply,
    ReplyAssembler,
    as_chunk,
)
from loopwright.config import Settings, Tier
from loopwright.events import encodable
from loopwright.redaction import Redactor
from loopwright.retry_after import finite_number, parse_retry_after

BACKOFF_BASE_S = 1.0
BACKOFF_CAP_S = 30.0
MAX_RETRY_AFTER_S = 300.0
"""A `retry-after` longer than this is capped: a mission should fail visibly, not hang."""
CONNECT_TIMEOUT_S = 30.0
"""Connecting needs no model work, so it gets a shorter budget than a whole call."""
MESSAGE_LIMIT = 300
"""Characters of an endpoint's error message quoted in a ModelError."""


@dataclass(frozen=True)
class ModelRetry:
    """An attempt failed and the call will be tried again after `wait_s` seconds."""

    attempt: int
    """The attempt that failed, from 1."""
    attempts: int
    """How many attempts the call may take in all."""
    reason: str
    wait_s: float


RetryListener = Callable[[ModelRetry], None]


@dataclass(frozen=True)
class Sampling:
    """Sampling for one call: independent attempts sample with a temperature and a seed of
    their own; without it the endpoint's defaults apply."""

    temperature: float
    seed: int


class ModelError(Exception):
    """The endpoint gave no answer after retries; the message is one line saying what to fix."""


class Model(Protocol):
    def complete(
        self,
        tier: Tier,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        on_retry: RetryListener | None = None,
        sampling: Sampling | None = None,
    ) -> ModelReply: ...


class OpenAIModel:
    """`Model` on the `openai` package; retries are ours so stalls and errors are handled alike."""

    def __init__(
        self,
        settings: Settings,
        *,
        recorder: Recorder | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._settings = settings
        self._recorder = recorder
        self._sleep = sleep
        self._redactor = Redactor(settings.secrets())
        # The read timeout is the stall detector: httpx2 applies it to every socket read, so a
        # stream that sends nothing for stall_timeout_s raises a timeout and the attempt is
        # retried. The whole-attempt budget (model_timeout_s) is enforced by `_Deadline`.
        self._connect_timeout_s = min(CONNECT_TIMEOUT_S, settings.model_timeout_s)
        self._timeout = httpx2.Timeout(
            settings.model_timeout_s,
            connect=self._connect_timeout_s,
            read=settings.stall_timeout_s,
        )
        self._clients: dict[str, openai.OpenAI] = {}
        self._clients_lock = threading.Lock()

    def _client(self, tier: Tier) -> openai.OpenAI:
        """One HTTP client per endpoint. Only the shared endpoint gets the API key: a tier's
        own endpoint (a local server, say) never sees it."""
        url = self._settings.endpoint(tier)
        with self._clients_lock:
            client = self._clients.get(url)
            if client is None:
                key = self._settings.model_api_key if tier.base_url is None else None
                client = openai.OpenAI(
                    base_url=url, api_key=key or "unused", max_retries=0, timeout=self._timeout
                )
                self._clients[url] = client
            return client

    def close(self) -> None:
        with self._clients_lock:
            clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            client.close()

    def __enter__(self) -> OpenAIModel:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def complete(
        self,
        tier: Tier,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        on_retry: RetryListener | None = None,
        sampling: Sampling | None = None,
    ) -> ModelReply:
        """One reply; `on_retry` hears of each failed attempt before the wait for the next."""
        started = time.monotonic()
        attempts = self._settings.model_retries + 1
        for attempt in range(attempts):
            try:
                reply = self._attempt(tier, messages, tools, started, sampling)
            except _Retryable as failure:
                if attempt + 1 == attempts:
                    times = "1 time" if attempts == 1 else f"{attempts} times"
                    message = f"{failure.message} (tried {times})"
                    raise ModelError(self._redactor.text(message)) from None
                wait_s = _backoff(attempt, failure.wait_s)
                if on_retry is not None:
                    reason = self._redactor.text(failure.message)
                    on_retry(ModelRetry(attempt + 1, attempts, reason, round(wait_s, 3)))
                self._sleep(wait_s)
                continue
            if self._recorder is not None:
                self._recorder.record(tier, reply)
            return reply
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _attempt(
        self,
        tier: Tier,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        started: float,
        sampling: Sampling | None = None,
    ) -> ModelReply:
        deadline = _Deadline(self._settings.model_timeout_s)
        reply = ReplyAssembler(tier.model)
        url = self._settings.endpoint(tier).rstrip("/")
        where = _where(tier)
        json_format = tier.tool_format == "json" and bool(tools)
        sent = json_tool_messages(messages, tools) if json_format else _sendable(messages)
        # A tool's answer may quote a file name that is not UTF-8 (a lone surrogate here),
        # which the client's strict encoding of the request would refuse.
        sent = encodable(sent)
        native = tools and not json_format
        try:
            # An empty tools array is a 400 at OpenAI, so a tool-less call omits both fields.
            stream = self._client(tier).chat.completions.create(
                model=tier.model,
                messages=cast(Any, sent),
                tools=cast(Any, tools) if native else openai.omit,
                tool_choice="auto" if native else openai.omit,
                temperature=sampling.temperature if sampling else openai.omit,
                seed=sampling.seed if sampling else openai.omit,
                stream=True,
                stream_options={"include_usage": True},
            )
            with stream, deadline.armed(stream.response.close):
                # Some servers ignore `stream` and answer with one JSON completion, in which
                # the SDK's event stream would find nothing at all.
                if "json" in stream.response.headers.get("content-type", ""):
                    reply.add(as_chunk(json.loads(stream.response.read())))
                else:
                    for chunk in stream:
                        reply.add(chunk)
        except openai.APITimeoutError as exc:
            if isinstance(exc.__cause__, httpx2.ConnectTimeout | httpx2.PoolTimeout):
                raise _Retryable(
                    f"model endpoint {url} unreachable: no connection within "
                    f"{self._connect_timeout_s:g}s; "
                    f"check {where}"
                ) from None
            raise _Retryable(
                f"model endpoint {url} stalled: nothing received for "
                f"{self._settings.stall_timeout_s:g}s; check the endpoint's health or raise "
                "LOOPWRIGHT_STALL_TIMEOUT_S"
            ) from None
        except openai.APIConnectionError as exc:
            if deadline.expired:
                raise _Retryable(
                    f"model endpoint {url} was still streaming after "
                    f"{self._settings.model_timeout_s:g}s; raise LOOPWRIGHT_MODEL_TIMEOUT_S "
                    "or pick a faster tier"
                ) from None
            raise _Retryable(
                f"model endpoint {url} unreachable: {_cause(exc)}; check {where}"
            ) from None
        except openai.APIStatusError as exc:
            self._raise_for_status(exc, tier, url)
        except openai.APIError as exc:
            # An error event inside an otherwise successful stream: the provider failed mid-answer.
            raise _Retryable(
                f"model endpoint {url} failed mid-stream: {_quote(exc.message)}"
            ) from None
        except json.JSONDecodeError as exc:
            raise _Retryable(
                f"model endpoint {url} sent a malformed stream ({exc.msg}); "
                f"check {where} points at an OpenAI-compatible /v1 endpoint"
            ) from None
        except RecursionError:
            raise _Retryable(
                f"model endpoint {url} sent JSON nested too deeply to read; "
                f"check {where} points at an OpenAI-compatible /v1 endpoint"
            ) from None
        return reply.reply(messages, tools, time.monotonic() - started, json_format=json_format)

    def _raise_for_status(self, exc: openai.APIStatusError, tier: Tier, url: str) -> NoReturn:
        where = _where(tier)
        status = exc.status_code
        detail = _quote(_error_message(exc))
        if status == 429:
            raise _Retryable(
                f"model endpoint {url} is rate limiting (429): {detail}; wait, run fewer "
                "missions at once, or raise LOOPWRIGHT_MODEL_RETRIES",
                _retry_after(exc.response.headers),
            )
        if status >= 500 or status == 408:
            raise _Retryable(
                f"model endpoint {url} failed with {status}: {detail}; the provider may be "
                f"down, retry later or point {where} elsewhere",
                _retry_after(exc.response.headers),
            )
        if status == 401:
            message = f"401 from model endpoint {url}: {detail}; check LOOPWRIGHT_MODEL_API_KEY"
        elif status == 403:
            message = (
                f"403 from model endpoint {url} for model id {tier.model!r}: {detail}; check "
                "that LOOPWRIGHT_MODEL_API_KEY has access to it, or change LOOPWRIGHT_MODEL_TIERS"
            )
        elif status == 404 and _mentions_model(exc):
            message = (
                f"model id {tier.model!r} (tier {tier.name}) not found at endpoint {url}: "
                f"{detail}; check LOOPWRIGHT_MODEL_TIERS"
            )
        elif status == 404:
            message = (
                f"no chat completions endpoint at {url} (404): {detail}; check "
                f"{where} (it usually ends in /v1)"
            )
        elif any(word in detail.lower() for word in ("context", "too long", "maximum")):
            message = (
                f"model endpoint {url} refused the request as too long ({status}): "
                f"{detail}; lower LOOPWRIGHT_CONTEXT_TOKENS"
            )
        else:
            message = (
                f"model endpoint {url} rejected the request ({status}) for model id "
                f"{tier.model!r}: {detail}; check that it supports tool calling, or change "
                "LOOPWRIGHT_MODEL_TIERS"
            )
        raise ModelError(self._redactor.text(message)) from None


class _Deadline:
    """Closes a response still streaming after `seconds`.

    The read timeout only catches silence; an endpoint that trickles keep-alive bytes (or
    tokens) forever would pass it, so the whole attempt also gets a wall-clock budget.
    Closing the response from the timer thread makes the reading thread's iteration fail.
    """

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.expired = False

    @contextmanager
    def armed(self, close: Callable[[], None]) -> Iterator[None]:
        def expire() -> None:
            self.expired = True
            close()

        timer = threading.Timer(self.seconds, expire)
        timer.daemon = True
        timer.start()
        try:
            yield
        finally:
            timer.cancel()


class _Retryable(Exception):
    """One attempt failed in a way worth retrying; `wait_s` is the endpoint's own hint."""

    def __init__(self, message: str, wait_s: float | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.wait_s = wait_s


def _sendable(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The conversation with every earlier call's arguments as a JSON object.

    A reply cut off mid-call (a token cap) leaves arguments that do not parse; the tool
    answered that as an error, but servers that re-parse the history (llama.cpp) refuse the
    whole request with a 500. Such arguments travel as `{"unparsed_arguments": RAW}`; the
    same history always becomes the same request, so caching is unaffected."""
    if not any(_has_bad_arguments(m) for m in messages):
        return messages
    fixed: list[dict[str, Any]] = []
    for message in messages:
        if not _has_bad_arguments(message):
            fixed.append(message)
            continue
        calls = []
        for call in message["tool_calls"]:
            function = dict(call.get("function") or {})
            raw = function.get("arguments")
            if isinstance(raw, str) and not _is_json_object(raw):
                function["arguments"] = json.dumps({"unparsed_arguments": raw})
            calls.append({**call, "function": function})
        fixed.append({**message, "tool_calls": calls})
    return fixed


def _has_bad_arguments(message: dict[str, Any]) -> bool:
    for call in message.get("tool_calls") or ():
        raw = (call.get("function") or {}).get("arguments") if isinstance(call, dict) else None
        if isinstance(raw, str) and not _is_json_object(raw):
            return True
    return False


def _is_json_object(text: str) -> bool:
    try:
        return isinstance(json.loads(text), dict)
    except (ValueError, RecursionError):
        return False


def _where(tier: Tier) -> str:
    """The setting that names a tier's endpoint, for error messages."""
    return "LOOPWRIGHT_MODEL_TIERS" if tier.base_url else "LOOPWRIGHT_MODEL_BASE_URL"


def _backoff(attempt: int, hint_s: float | None) -> float:
    """Seconds to wait before retry number `attempt + 1`: the endpoint's hint, else exponential."""
    if hint_s is not None:
        return min(max(hint_s, 0.0), MAX_RETRY_AFTER_S)
    ceiling = min(BACKOFF_CAP_S, BACKOFF_BASE_S * 2.0**attempt)
    # Half fixed, half random: spreads simultaneous missions apart without ever retrying at once.
    return ceiling / 2 + random.uniform(0, ceiling / 2)


def _retry_after(headers: httpx2.Headers) -> float | None:
    """Seconds the endpoint asked us to wait (`retry-after-ms`, `retry-after` seconds or date)."""
    millis = finite_number(headers.get("retry-after-ms"))
    if millis is not None:
        return millis * 0.001
    return parse_retry_after(headers.get("retry-after"), time.time())


def _error_message(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and isinstance(inner.get("message"), str):
            return str(inner["message"])
        if isinstance(body.get("message"), str):
            return str(body["message"])
    return exc.response.reason_phrase or str(exc.status_code)


def _mentions_model(exc: openai.APIStatusError) -> bool:
    """Whether a 404 is about the model id rather than the URL path."""
    body = exc.body
    inner = body.get("error", body) if isinstance(body, dict) else None
    if isinstance(inner, dict) and (
        inner.get("code") == "model_not_found" or inner.get("param") == "model"
    ):
        return True
    return isinstance(inner, dict) and "model" in _error_message(exc).lower()


def _quote(text: str) -> str:
    """`text` on one line, shortened: errors are shown in one-line events and logs."""
    line = " ".join(text.split())
    return line if len(line) <= MESSAGE_LIMIT else line[: MESSAGE_LIMIT - 1] + "…"


def _cause(exc: BaseException) -> str:
    """The innermost reason for a connection failure, e.g. 'connection refused'."""
    reason = exc
    while (inner := reason.__cause__ or reason.__context__) is not None:
        reason = inner
    if isinstance(reason, ConnectionRefusedError):
        return "connection refused"
    return _quote(str(reason)) or type(reason).__name__
