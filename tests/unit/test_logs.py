import json
import logging

import structlog

from loopwright.logs import configure_logging, logging_configured
from loopwright.redaction import Redactor


def test_logs_are_json_lines_with_secrets_masked(capsys):
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


def test_library_records_share_the_formatter_and_the_redaction(capsys):
    root = logging.getLogger()
    before = (root.level, list(root.handlers))
    with logging_configured(
        Redactor(["hunter2-secret-value"]), level=logging.INFO, renderer="json"
    ):
        logging.getLogger("alembic.runtime.migration").info(
            "Running upgrade -> 0001 for %s", "hunter2-secret-value"
        )
        logging.getLogger("uvicorn.error").warning("Started server process")
        logging.getLogger("httpx").debug("below the level")
    lines = capsys.readouterr().err.strip().splitlines()
    alembic, uvicorn = (json.loads(line) for line in lines[-2:])
    assert alembic["event"] == "Running upgrade -> 0001 for [REDACTED]"
    assert alembic["logger"] == "alembic.runtime.migration"
    assert alembic["level"] == "info" and alembic["timestamp"].endswith("Z")
    assert uvicorn["event"] == "Started server process" and uvicorn["level"] == "warning"
    assert "below the level" not in "\n".join(lines)
    # the command's configuration does not outlive it
    assert (root.level, root.handlers) == before
