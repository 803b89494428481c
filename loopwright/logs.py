"""Log configuration: one formatter on stderr for Loopwright's own logs and for the libraries'
(Alembic, uvicorn, httpx), every value redacted before it is written."""

from __future__ import annotations

import logging
import os
import sys
import threading
from collections.abc import Callable, Iterator, MutableMapping
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partialmethod
from typing import Any, Literal

import structlog

from loopwright.redaction import Redactor

Renderer = Literal["json", "console"]


class _StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever `sys.stderr` is at the time of the record, so a replaced stderr
    (a test's capture, a redirected CLI) gets the line rather than a stale stream."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    def createLock(self) -> None:
        # One lock for every line on stderr: a library's (through this handler) and
        # Loopwright's own (`_StderrLines`) never interleave.
        self.lock = _STDERR_LOCK

    def handleError(self, record: logging.LogRecord) -> None:
        # logging prints record.msg (Loopwright's raw, unredacted event) with the traceback.
        record.msg, record.args = "<a log record that could not be formatted>", ()
        super().handleError(record)

    @property
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, _value: Any) -> None:
        pass


LIBRARY_LOGGERS = (
    "alembic",
    "uvicorn",
    "uvicorn.error",
    "uvicorn.access",
    "httpx",
    "httpx2",
    "httpcore",
    "litestar",
)
"""Libraries whose records Loopwright formats and redacts like its own."""


_STDERR_LOCK = threading.RLock()
# A child forked while another thread held the lock must not inherit it held (logging
# does the same for the locks its handlers make themselves).
os.register_at_fork(after_in_child=_STDERR_LOCK._at_fork_reinit)  # type: ignore[attr-defined]


@dataclass(frozen=True)
class _Configured:
    """What `configure_logging` set up, read by every line as it is made: structlog keeps
    a module's logger, processors included, once it is used, so a logger first used under
    one command's configuration must not carry that configuration into the next."""

    level: int
    handler: _StderrHandler
    redact: Callable[[Any, str, MutableMapping[str, Any]], MutableMapping[str, Any]]
    final: structlog.typing.Processor


_configured: _Configured | None = None
# structlog's method names and their levels, with the aliases its bound loggers also offer.
_METHOD_LEVELS = {
    **structlog.processors.NAME_TO_LEVEL,
    "msg": logging.INFO,
    "err": logging.ERROR,
    "fatal": logging.CRITICAL,
}


def _at_level(_: Any, method: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """Drops a line below the current configuration's level (without one, `logging`'s
    levels decide)."""
    now = _configured
    if now is not None and _METHOD_LEVELS.get(method, logging.INFO) < now.level:
        raise structlog.DropEvent
    return event


def _render(logger: Any, method: str, event: MutableMapping[str, Any]) -> Any:
    """The line itself, redacted and rendered with the current configuration, when only
    Loopwright's stderr handler is on the root logger (a server, a command). Otherwise
    (another handler is there too, or the configuration was taken back) the event goes on
    through `logging`, as a library's record does, and is rendered there."""
    now = _configured
    handlers = logging.root.handlers
    if now is None or len(handlers) != 1 or handlers[0] is not now.handler:
        if now is not None:  # whatever handler gets it, never the raw event
            event = now.redact(logger, method, event)
        return structlog.stdlib.ProcessorFormatter.wrap_for_formatter(logger, method, event)
    try:
        event = structlog.processors.format_exc_info(logger, method, event)
        return now.final(logger, method, now.redact(logger, method, event))
    except RecursionError:
        raise
    # As logging's handlers: a line that cannot be rendered (a value JSON cannot take, a
    # repr that fails) never fails the code that logs it, and says so in its place.
    except Exception as exc:  # noqa: BLE001
        unrendered = {
            "event": "a log line could not be rendered",
            "level": event.get("level", method),
            "logger": event.get("logger"),
            "timestamp": event.get("timestamp"),
            "error": type(exc).__name__,
        }
        return now.final(logger, method, unrendered)


class _StderrLines:
    """structlog's logger for Loopwright's own lines. A rendered line goes straight to
    whatever `sys.stderr` is at the time: the `logging` path made a record, which the
    formatter copied and formatted again, about half of a webhook's log line. An event
    `_render` handed on goes to the `logging` logger of the same name."""

    __slots__ = ("_logging", "name")

    def __init__(self, name: str) -> None:
        self.name = name
        self._logging = logging.getLogger(name)

    def _write(self, level: int, *args: Any, **kwargs: Any) -> None:
        if kwargs or len(args) != 1 or not isinstance(args[0], str):
            self._logging.log(level, *args, **kwargs)
            return
        with _STDERR_LOCK:
            stream = sys.stderr
            try:
                stream.write(args[0] + "\n")
                stream.flush()
            except RecursionError:
                raise
            # As in logging's handlers: a line that cannot be written (no stderr, a closed
            # or broken one) never fails the code that logs it.
            except Exception:  # noqa: BLE001
                return

    # structlog calls the method named after the level.
    debug = partialmethod(_write, logging.DEBUG)
    info = msg = partialmethod(_write, logging.INFO)
    warning = warn = partialmethod(_write, logging.WARNING)
    error = err = exception = partialmethod(_write, logging.ERROR)
    critical = fatal = partialmethod(_write, logging.CRITICAL)


def _own_lines(*names: Any) -> _StderrLines:
    return _StderrLines(str(names[0]) if names else "loopwright")


_TIMESTAMPER = structlog.processors.TimeStamper(fmt="iso", utc=True)
_OWN_PROCESSORS: list[structlog.typing.Processor] = [
    _at_level,
    structlog.contextvars.merge_contextvars,
    structlog.processors.add_log_level,
    structlog.stdlib.add_logger_name,
    _TIMESTAMPER,
    _render,
]
"""One list for every configuration: nothing in it depends on one (see `_Configured`), and
a logger structlog kept holds this very list, which `structlog.testing.capture_logs`
changes in place."""


HANDLER_LOGGED = frozenset({("POST", "/webhooks/github")})
"""Routes whose handler writes one line of its own for every answer it gives (the webhook:
delivery id, event, the sender's address and what was decided). uvicorn's access line for
a 2xx answer there says less than that line and would double the log of a burst of
deliveries, so it is dropped; a 4xx or 5xx answer keeps its access line."""


class _HandlerLogged(logging.Filter):
    """Drops uvicorn's access line of a 2xx answer on a route in `HANDLER_LOGGED`."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and len(args) == 5:
            _, method, path, _, status = args
            if isinstance(status, int) and 200 <= status < 300:
                return (method, str(path).split("?", 1)[0]) not in HANDLER_LOGGED
        return True


def _access_fields(_: Any, __: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """uvicorn's access lines as fields (client, method, path, status) rather than only a
    sentence, like Loopwright's own request lines."""
    args = event.pop("positional_args", None)
    record = event.get("_record")
    if record is None or record.name != "uvicorn.access":
        return event
    if isinstance(args, tuple) and len(args) == 5:
        client, method, path, http_version, status = args
        event.update(
            client=client, method=method, path=path, http_version=http_version, status=status
        )
    return event


def configure_logging(
    redactor: Redactor,
    *,
    level: int = logging.INFO,
    renderer: Renderer = "json",
    color: bool = False,
) -> None:
    """Called once by the server entry points (`serve`, `worker`, each worker process of
    `serve --workers N`) and, through `logging_configured`, by the CLI's commands; never on
    import.

    `json` writes one JSON object per line (servers, CI); `console` writes `key=value` lines
    for a person at a terminal. Records of the standard `logging` module go through the same
    processors, so an Alembic or uvicorn line looks like Loopwright's own and is redacted too.
    """

    def redact(_: Any, __: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
        for key, value in list(event.items()):
            event[key] = redactor.data(value)
        return event

    # Loopwright's lines and the libraries' carry the same keys (event, level, logger,
    # timestamp), so one query reads them all.
    final: structlog.typing.Processor = (
        structlog.processors.JSONRenderer()
        if renderer == "json"
        else structlog.dev.ConsoleRenderer(colors=color)
    )
    global _configured
    handler = _StderrHandler()
    # Nothing here depends on this configuration: a logger kept past it reads the one in
    # force when it writes (see `_Configured`).
    structlog.configure(
        processors=_OWN_PROCESSORS,
        wrapper_class=structlog.make_filtering_bound_logger(logging.DEBUG),
        logger_factory=_own_lines,
        cache_logger_on_first_use=True,
    )
    # The libraries' records (`logging`) get the same keys, redaction and rendering.
    formatter = structlog.stdlib.ProcessorFormatter(
        pass_foreign_args=True,
        foreign_pre_chain=[
            structlog.stdlib.add_log_level,
            structlog.stdlib.add_logger_name,
            _access_fields,
            _TIMESTAMPER,
        ],
        processors=[
            structlog.stdlib.ProcessorFormatter.remove_processors_meta,
            structlog.processors.format_exc_info,
            redact,
            final,
        ],
    )
    # No rendered line has the caller's file and line or the thread's and process's names:
    # the logging module would still look them up for every record (Logging HOWTO,
    # "Optimization"). That was a sixth of a webhook's log line, and most of uvicorn's
    # access line for a 2xx answer, which the filter below drops only once it is made.
    _set_record_lookups(_NO_RECORD_LOOKUPS)
    handler.setFormatter(formatter)
    root = logging.getLogger()
    # One swap: no moment without a handler (logging.lastResort would print the raw event).
    root.handlers[:] = [h for h in root.handlers if not isinstance(h, _StderrHandler)] + [handler]
    root.setLevel(level)
    _configured = _Configured(level, handler, redact, final)
    # A library that configured its own loggers earlier in the process (uvicorn's default
    # config, Alembic's fileConfig, a framework's logging setup) would print around the
    # formatter and the redaction: its records go to the root handler instead.
    for name in LIBRARY_LOGGERS:
        library = logging.getLogger(name)
        library.handlers.clear()
        library.propagate = True
        library.setLevel(logging.NOTSET)
    access = logging.getLogger("uvicorn.access")
    for old_filter in [f for f in access.filters if isinstance(f, _HandlerLogged)]:
        access.removeFilter(old_filter)
    access.addFilter(_HandlerLogged())


_LOOKUP_FLAGS = tuple(
    name
    for name in ("logThreads", "logProcesses", "logMultiprocessing", "logAsyncioTasks")
    if hasattr(logging, name)  # logAsyncioTasks: Python 3.12 and later
)
_RecordLookups = tuple[str | None, dict[str, bool]]
_NO_RECORD_LOOKUPS: _RecordLookups = (None, dict.fromkeys(_LOOKUP_FLAGS, False))
"""No caller frame (which also drops `stack_info=True` of a plain `logging` call: nothing
here asks for one), no thread, process or asyncio task names."""


def _record_lookups() -> _RecordLookups:
    return logging._srcfile, {name: getattr(logging, name) for name in _LOOKUP_FLAGS}


def _set_record_lookups(lookups: _RecordLookups) -> None:
    logging._srcfile, flags = lookups
    for name, value in flags.items():
        setattr(logging, name, value)


@contextmanager
def logging_configured(
    redactor: Redactor, *, level: int, renderer: Renderer = "console", color: bool = False
) -> Iterator[None]:
    """`configure_logging` for the length of one command; the previous configuration (the
    root logger's level and handlers, the libraries' loggers, the record lookups,
    structlog's defaults) is back afterwards, also when configuring fails."""
    root = logging.getLogger()
    saved_level, saved_handlers = root.level, list(root.handlers)
    libraries = [logging.getLogger(name) for name in LIBRARY_LOGGERS]
    saved_libraries = [
        (lib.level, list(lib.handlers), lib.propagate, list(lib.filters)) for lib in libraries
    ]
    saved_lookups = _record_lookups()
    saved_configured = _configured
    saved_structlog = structlog.get_config()
    try:
        configure_logging(redactor, level=level, renderer=renderer, color=color)
        yield
    finally:
        root.handlers[:] = saved_handlers
        root.setLevel(saved_level)
        for lib, (lib_level, lib_handlers, propagate, lib_filters) in zip(
            libraries, saved_libraries, strict=True
        ):
            lib.handlers[:] = lib_handlers
            lib.filters[:] = lib_filters
            lib.propagate = propagate
            lib.setLevel(lib_level)
        _set_record_lookups(saved_lookups)
        _restore_configured(saved_configured)
        if saved_configured is None:
            structlog.reset_defaults()
        else:  # an outer block's or a server's configuration: put it back, not the defaults
            structlog.configure(**saved_structlog)


def _restore_configured(configured: _Configured | None) -> None:
    global _configured
    _configured = configured
