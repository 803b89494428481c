"""Log configuration: one formatter on stderr for Loopwright's own logs and for the libraries'
(Alembic, uvicorn, httpx), every value redacted before it is written."""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator, MutableMapping
from contextlib import contextmanager
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


class _StderrLines:
    """structlog's logger for Loopwright's own lines: the rendered line goes straight to
    whatever `sys.stderr` is at the time, under the stderr handler's lock, so a line of a
    library (through `logging`) and one of Loopwright's never interleave.

    Loopwright's lines used to take the `logging` path too: a record made, copied by the
    formatter and formatted again, about half of a webhook's log line. structlog keeps a
    module's logger once used, so one used during a command's `logging_configured` outlives
    it: once its handler is no longer the root logger's, its lines go to `logging` as they
    did before, not to stderr past the configuration that was taken back."""

    __slots__ = ("_handler", "name")

    def __init__(self, name: str, handler: logging.Handler) -> None:
        self.name = name
        self._handler = handler

    def _write(self, level: int, line: str) -> None:
        handler = self._handler
        if handler not in logging.root.handlers:
            logging.getLogger(self.name).log(level, line)
            return
        with handler.lock:  # type: ignore[union-attr] # Handler.__init__ makes the lock
            stream = sys.stderr
            stream.write(line + "\n")
            stream.flush()

    # structlog calls the method named after the level with the rendered line.
    debug = partialmethod(_write, logging.DEBUG)
    info = msg = partialmethod(_write, logging.INFO)
    warning = warn = partialmethod(_write, logging.WARNING)
    error = err = exception = partialmethod(_write, logging.ERROR)
    critical = fatal = partialmethod(_write, logging.CRITICAL)


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

    timestamper = structlog.processors.TimeStamper(fmt="iso", utc=True)
    # Loopwright's lines and the libraries' carry the same keys (event, level, logger,
    # timestamp), so one query reads them all.
    final: structlog.typing.Processor = (
        structlog.processors.JSONRenderer()
        if renderer == "json"
        else structlog.dev.ConsoleRenderer(colors=color)
    )
    handler = _StderrHandler()

    def own_lines(*names: Any) -> _StderrLines:
        return _StderrLines(str(names[0]) if names else "loopwright", handler)

    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.stdlib.add_logger_name,
            timestamper,
            structlog.processors.format_exc_info,
            redact,
            final,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=own_lines,
        cache_logger_on_first_use=True,
    )
    # The libraries' records (`logging`) get the same keys, redaction and rendering.
    formatter = structlog.stdlib.ProcessorFormatter(
        pass_foreign_args=True,
        foreign_pre_chain=[
            structlog.stdlib.add_log_level,
            structlog.stdlib.add_logger_name,
            _access_fields,
            timestamper,
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
    for old in [h for h in root.handlers if isinstance(h, _StderrHandler)]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
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
        structlog.reset_defaults()
