import json
import logging
import logging.config
import sys

import structlog
import uvicorn.config

from loopwright.logs import (
    logging_configured,
)
from loopwright.redaction import Redactor


def test_logs_are_json_lines_with_secrets_masked(capsys):
    with logging_configured(
        Redactor(["hunter2-secret-value"]), level=logging.INFO, renderer="json"
    ):
        structlog.get_logger("t").bind(delivery="d-1").info(
            "github.request", token="ghs_abcdefghijklmnopqrst", note="key hunter2-secret-value"
        )
    line = capsys.readouterr().err.strip().splitlines()[-1]
    record = json.loads(line)
    assert record["event"] == "github.request"
    assert record["delivery"] == "d-1"
    assert record["level"] == "info"
    assert "ghs_" not in line and "hunter2-secret-value" not in line


def test_an_exception_logged_has_its_traceback_redacted_on_the_current_stderr(capsys):
    with logging_configured(
        Redactor(["hunter2-secret-value"]), level=logging.INFO, renderer="json"
    ):
        try:
            raise RuntimeError("could not reach http://u:hunter2-secret-value@db")
        except RuntimeError:
            structlog.get_logger("loopwright.t").exception("store unreachable", attempt=2)
    line = capsys.readouterr().err.strip().splitlines()[-1]
    record = json.loads(line)
    assert (record["event"], record["level"], record["logger"]) == (
        "store unreachable",
        "error",
        "loopwright.t",
    )
    assert record["attempt"] == 2 and record["timestamp"].endswith("Z")
    assert record["exception"].startswith("Traceback (most recent call last):")
    assert "RuntimeError: could not reach http://u:[REDACTED]@db" in record["exception"]
    assert "hunter2-secret-value" not in line


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


def test_a_logger_used_during_a_command_writes_through_logging_once_it_ends(capsys):
    """structlog keeps the logger a module used: after the command its lines go where
    `logging` sends them, never to stderr under a configuration that was taken back."""
    log = structlog.get_logger("loopwright.test.outlives")
    with logging_configured(Redactor(), level=logging.INFO, renderer="json"):
        log.info("during")
    kept = Kept()
    root = logging.getLogger()
    root.addHandler(kept)
    try:
        log.warning("after")
    finally:
        root.removeHandler(kept)
    err = capsys.readouterr().err
    assert json.loads(err.strip().splitlines()[-1])["event"] == "during"
    assert '"after"' not in err
    (record,) = [r for r in kept.records if r.name == "loopwright.test.outlives"]
    assert record.levelno == logging.WARNING
    assert json.loads(record.getMessage())["event"] == "after"
