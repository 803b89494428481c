"""Log configuration: JSON lines on stderr, every value redacted before it is written."""

from __future__ import annotations

import logging
import sys
from collections.abc import MutableMapping
from typing import Any

import structlog

from loopwright.redaction import Redactor


def configure_logging(redactor: Redactor, *, level: int = logging.INFO) -> None:
    """Called once by the long-running entry points (`serve`, the Action), never on import."""

    def redact(_: Any, __: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
        for key, value in list(event.items()):
            event[key] = redactor.data(value)
        return event

    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            redact,
            structlog.processors.JSONRenderer(),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.WriteLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=True,
    )
