import json

import structlog

from loopwright.logs import configure_logging
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
