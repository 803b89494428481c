import io
import json
import logging
import logging.config
import os
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import structlog
import uvicorn.config
from structlog.testing import capture_logs

from loopwright.logs import logging_configured
from loopwright.redaction import Redactor


@contextmanager
def configured_alone(redactor: Redactor, **options) -> Iterator[list[logging.LogRecord]]:
    """`logging_configured` with Loopwright's handler the root logger's only one, as in a
    server or a command (pytest adds handlers of its own): yields the records that handler
    was handed, which a line written straight to stderr never is."""
    root = logging.getLogger()
    options = {"level": logging.INFO, "renderer": "json", **options}
    with logging_configured(redactor, **options):
        others = [h for h in root.handlers if type(h).__name__ != "_StderrHandler"]
        (ours,) = [h for h in root.handlers if h not in others]
        handed: list[logging.LogRecord] = []

        def keep(record: logging.LogRecord) -> bool:
            handed.append(record)
            return True

        ours.addFilter(keep)
        for other in others:
            root.removeHandler(other)
        try:
            yield handed
        finally:
            for other in others:
                root.addHandler(other)
            ours.removeFilter(keep)


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
    # The event itself, for whatever formats it there, rendered by no one before.
    assert record.msg["event"] == "after" and record.msg["level"] == "warning"


def test_own_lines_go_straight_to_stderr_rendered_once_in_either_renderer(capsys):
    log = structlog.get_logger("loopwright.test.straight")
    with configured_alone(Redactor(["hunter2-secret-value"])) as handed:
        log.info("delivery", note="key hunter2-secret-value", attempt=1)
        logging.getLogger("uvicorn.error").info("a library's line")
    with configured_alone(Redactor(), renderer="console") as handed_console:
        log.warning("readable", attempt=2)
    err = capsys.readouterr().err.splitlines()
    own = json.loads(err[0])
    assert own["event"] == "delivery" and own["note"] == "key [REDACTED]" and own["attempt"] == 1
    assert (own["level"], own["logger"]) == ("info", "loopwright.test.straight")
    assert json.loads(err[1])["event"] == "a library's line"
    # The library's record went through the handler; Loopwright's lines did not.
    assert [r.name for r in handed] == ["uvicorn.error"] and handed_console == []
    (console,) = err[2:]
    assert "readable" in console and "attempt=2" in console and not console.startswith("{")


def test_each_command_renders_with_its_own_level_and_secrets_through_a_kept_logger(capsys):
    """structlog keeps a module's logger once used: the second command's level and secrets
    still decide its lines, and each is rendered once."""
    log = structlog.get_logger("loopwright.test.kept")
    with configured_alone(Redactor(["first-secret-value"]), level=logging.WARNING):
        log.debug("hidden at warning")
        log.warning("first", value="first-secret-value")
    with configured_alone(Redactor(["pässwörd-second"]), level=logging.DEBUG):
        log.debug("shown at debug", value="pässwörd-second")
    with logging_configured(Redactor(["pässwörd-third"]), level=logging.DEBUG, renderer="json"):
        # pytest's handlers are on the root logger here: the line goes through `logging`.
        log.error("through logging", value="pässwörd-third")
    lines = [json.loads(line) for line in capsys.readouterr().err.splitlines()]
    assert [line["event"] for line in lines] == ["first", "shown at debug", "through logging"]
    assert [line["value"] for line in lines] == ["[REDACTED]"] * 3
    assert [line["level"] for line in lines] == ["warning", "debug", "error"]


@pytest.mark.parametrize("stream", [None, "closed"])
def test_a_line_that_cannot_be_written_never_fails_the_code_that_logs_it(monkeypatch, stream):
    broken = io.StringIO()
    broken.close()
    with configured_alone(Redactor()):
        monkeypatch.setattr(sys, "stderr", None if stream is None else broken)
        structlog.get_logger("loopwright.test.nowhere").info("no stderr to write to")


class Chunky(io.StringIO):
    """A stream that takes a line in pieces, letting other threads run in between, as a
    pipe's writes can."""

    def write(self, text: str) -> int:
        for start in range(0, len(text), 7):
            super().write(text[start : start + 7])
            time.sleep(0)
        return len(text)


def test_lines_from_many_threads_stay_whole(monkeypatch):
    log = structlog.get_logger("loopwright.test.threads")
    library = logging.getLogger("httpx")
    payload = "x" * 100
    stream = Chunky()

    def write(n: int) -> None:
        for i in range(50):
            log.info("own", thread=n, i=i, payload=payload)
            library.info("library %s %s %s", n, i, payload)

    with configured_alone(Redactor(), level=logging.INFO):
        monkeypatch.setattr(sys, "stderr", stream)
        threads = [threading.Thread(target=write, args=(n,)) for n in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        monkeypatch.undo()
    lines = stream.getvalue().splitlines()
    assert len(lines) == 4 * 50 * 2
    events = [json.loads(line)["event"] for line in lines]
    assert events.count("own") == 200


def test_a_line_that_cannot_be_rendered_says_so_in_its_place(capsys):
    with configured_alone(Redactor()):
        structlog.get_logger("loopwright.test.odd").info("odd", data={(1, 2): "a tuple key"})
    line = json.loads(capsys.readouterr().err.splitlines()[-1])
    assert line["event"] == "a log line could not be rendered"
    assert (line["error"], line["level"], line["logger"]) == (
        "TypeError",
        "info",
        "loopwright.test.odd",
    )


def test_another_handler_on_the_root_logger_gets_the_event_already_redacted(capsys):
    kept = Kept()
    root = logging.getLogger()
    with logging_configured(
        Redactor(["hunter2-secret-value"]), level=logging.INFO, renderer="json"
    ):
        root.addHandler(kept)
        try:
            structlog.get_logger("loopwright.test.shared").warning("x", key="hunter2-secret-value")
        finally:
            root.removeHandler(kept)
    (record,) = [r for r in kept.records if r.name == "loopwright.test.shared"]
    assert record.msg["key"] == "[REDACTED]"
    assert json.loads(capsys.readouterr().err.splitlines()[-1])["key"] == "[REDACTED]"


def test_a_nested_command_gives_the_outer_configuration_back(capsys):
    with logging_configured(Redactor(["outer-secret-value"]), level=logging.INFO, renderer="json"):
        with logging_configured(Redactor(), level=logging.DEBUG, renderer="console"):
            pass
        structlog.get_logger("loopwright.test.after-inner").info("x", key="outer-secret-value")
    captured = capsys.readouterr()
    assert captured.out == ""
    assert json.loads(captured.err.splitlines()[-1])["key"] == "[REDACTED]"


def test_a_library_record_that_cannot_be_formatted_is_reported_without_its_text(capsys):
    secret = "-".join(["hunter2", "secret", "value"])  # logging's report quotes this line
    message = f"token {secret} %d"
    with configured_alone(Redactor([secret])):
        logging.getLogger("httpx").warning(message, "not a number")
    err = capsys.readouterr().err
    assert "--- Logging error ---" in err  # logging's own report, as for any handler
    assert "hunter2-secret-value" not in err


def test_capture_logs_sees_a_logger_kept_from_an_earlier_command():
    kept = structlog.get_logger("loopwright.test.captured")
    with logging_configured(Redactor(), level=logging.INFO, renderer="json"):
        kept.info("first use: structlog keeps this logger")
    with (
        logging_configured(Redactor(), level=logging.INFO, renderer="json"),
        capture_logs() as logs,
    ):
        kept.info("seen")
    assert [entry["event"] for entry in logs] == ["seen"]


def test_a_child_forked_while_a_line_is_being_written_can_write_its_own():
    from loopwright import logs

    holding, release = threading.Event(), threading.Event()

    def hold() -> None:
        with logs._STDERR_LOCK:
            holding.set()
            release.wait(10)

    holder = threading.Thread(target=hold)
    holder.start()
    holding.wait(10)
    try:
        with configured_alone(Redactor()):
            pid = os.fork()
            if pid == 0:  # the child: the holding thread does not exist here
                structlog.get_logger("loopwright.test.child").info("from the child")
                os._exit(0)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                done, status = os.waitpid(pid, os.WNOHANG)
                if done:
                    break
                time.sleep(0.05)
            else:
                os.kill(pid, 9)
                os.waitpid(pid, 0)
                pytest.fail("the forked child hung on the lock it inherited held")
    finally:
        release.set()
        holder.join()
    assert os.waitstatus_to_exitcode(status) == 0
