import json
import logging
import logging.config
import sys

import structlog
import uvicorn.config

from loopwright.logs import (
    _record_lookups,
    _set_record_lookups,
    configure_logging,
    logging_configured,
)
from loopwright.redaction import Redactor


def test_logs_are_json_lines_with_secrets_masked(capsys):
    lookups = _record_lookups()
    configure_logging(Redactor(["hunter2-secret-value"]))
    try:
        structlog.get_logger("t").bind(delivery="d-1").info(
            "github.request", token="ghs_abcdefghijklmnopqrst", note="key hunter2-secret-value"
        )
        line = capsys.readouterr().err.strip().splitlines()[-1]
        record = json.loads(line)
        assert record["event"] == "github.request"
        assert record["delivery"] == "d-1"
        assert record["level"] == "info"
        assert "ghs_" not in line and "hunter2-secret-value" not in line
    finally:
        structlog.reset_defaults()
        _set_record_lookups(lookups)


class Kept(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def test_records_skip_the_lookups_no_line_shows_only_while_configured(capsys):
    kept = Kept()
    logger = logging.getLogger("loopwright.test.lookups")
    logger.addHandler(kept)
    try:
        with logging_configured(Redactor(), level=logging.INFO, renderer="json"):
            logger.info("configured")
        logger.warning("after")
    finally:
        logger.removeHandler(kept)
    lines = [json.loads(x) for x in capsys.readouterr().err.splitlines() if x.startswith("{")]
    (line,) = [x for x in lines if x["event"] == "configured"]
    # The rendered line has all it had before.
    assert (line["event"], line["logger"], line["level"]) == ("configured", logger.name, "info")
    configured, after = kept.records
    # While configured: no caller frame walked, no thread or process looked up.
    assert (configured.lineno, configured.threadName, configured.process) == (0, None, None)
    # The command's configuration does not outlive it: pytest's own reports show callers.
    assert (
        after.lineno > 0
        and after.funcName == "test_records_skip_the_lookups_no_line_shows_only_while_configured"
    )
    assert after.threadName == "MainThread" and after.process is not None
    assert after.processName == "MainProcess"


def test_library_records_share_the_formatter_and_the_redaction(capsys):
    root = logging.getLogger()
    before = (root.level, list(root.handlers))
    # As if libraries had configured their own loggers earlier in the process: uvicorn's
    # default config, and a handler of its own on Alembic's logger that does not propagate.
    names = ("uvicorn", "uvicorn.error", "uvicorn.access", "alembic")
    loggers = [logging.getLogger(name) for name in names]
    saved = [(lg.level, list(lg.handlers), lg.propagate, lg.disabled) for lg in loggers]
    logging.config.dictConfig(uvicorn.config.LOGGING_CONFIG)
    own = logging.StreamHandler(sys.stderr)
    logging.getLogger("alembic").addHandler(own)
    logging.getLogger("alembic").propagate = False
    configured = [(lg.level, list(lg.handlers), lg.propagate) for lg in loggers]
    try:
        with logging_configured(
            Redactor(["hunter2-secret-value"]), level=logging.INFO, renderer="json"
        ):
            logging.getLogger("alembic.runtime.migration").info(
                "Running upgrade -> 0001 for %s", "hunter2-secret-value"
            )
            logging.getLogger("uvicorn.error").warning("Started server process")
            logging.getLogger("httpx").debug("below the level")
        lines = capsys.readouterr().err.strip().splitlines()
        assert "hunter2-secret-value" not in "\n".join(lines)
        alembic, uv = (json.loads(line) for line in lines if line.startswith("{"))
        assert len(lines) == 2, lines  # nothing printed around the formatter
        assert alembic["event"] == "Running upgrade -> 0001 for [REDACTED]"
        assert alembic["logger"] == "alembic.runtime.migration"
        assert alembic["level"] == "info" and alembic["timestamp"].endswith("Z")
        assert uv["event"] == "Started server process" and uv["level"] == "warning"
        assert "below the level" not in "\n".join(lines)
        # the command's configuration does not outlive it
        assert (root.level, root.handlers) == before
        assert [(lg.level, list(lg.handlers), lg.propagate) for lg in loggers] == configured
    finally:
        for lg, (level, handlers, propagate, disabled) in zip(loggers, saved, strict=True):
            lg.setLevel(level)
            lg.handlers[:] = handlers
            lg.propagate = propagate
            lg.disabled = disabled
