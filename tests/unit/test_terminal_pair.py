"""`TerminalPair` without a person: answers typed as lines into a pipe (`--pair-lines`),
keys typed into a pseudo-terminal, stdin that ends, requests nobody answers, and the
terminal's settings after each."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import termios
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from loopwright.agent.pair import ApprovalRequest, Decision
from loopwright.cancellation import Cancellation, Cancelled
from loopwright.cli.pair import CLOSED, PROMPT, TerminalPair

ROOT = Path(__file__).resolve().parents[2]
REQUEST = ApprovalRequest(
    id="1-call_1",
    tool="run_command",
    rule="network",
    what="Run `pip install httpx`",
    why="`pip install httpx` needs the network",
    command="pip install httpx",
    network=True,
)
WRITE = ApprovalRequest(
    id="2-call_2",
    tool="edit_file",
    rule="ask_path",
    what="Change migrations/0001.sql",
    why="migrations/** is in ask_paths",
    diff="\n".join(
        [
            "--- a/migrations/0001.sql",
            "+++ b/migrations/0001.sql",
            "-create table a;",
            "+create table b;",
        ]
    ),
)


class Pipe:
    """stdin as a pipe the test writes lines into."""

    def __init__(self) -> None:
        self.read, self.write = os.pipe()

    def send(self, text: str) -> None:
        os.write(self.write, text.encode())

    def end(self) -> None:
        if self.write >= 0:
            os.close(self.write)
            self.write = -1


@pytest.fixture
def pipe() -> Iterator[Pipe]:
    made = Pipe()
    yield made
    made.end()
    os.close(made.read)


def lines_pair(pipe: Pipe, out: io.StringIO, expiry_s: float = 10.0) -> TerminalPair:
    return TerminalPair(stdin=pipe.read, out=out, expiry_s=expiry_s, interactive=False)


def test_lines_answer_the_requests_in_order_and_g_lines_are_guidance(pipe):
    out = io.StringIO()
    pipe.send("g Look at rounding.\ny\nn we vendor them\nr Only touch src/.\n")
    with lines_pair(pipe, out) as pair:
        cancellation = Cancellation()
        assert pair.ask(REQUEST, cancellation) == Decision("approve", "terminal")
        assert pair.ask(REQUEST, cancellation) == Decision("reject", "terminal", "we vendor them")
        assert pair.ask(WRITE, cancellation) == Decision("redirect", "terminal", "Only touch src/.")
        assert pair.guidance() == [Decision("redirect", "terminal", "Look at rounding.")]
        assert pair.guidance() == []
    shown = out.getvalue()
    assert "answer each request with a line" in shown
    assert "command: pip install httpx" in shown
    assert "+create table b;" in shown and "-create table a;" in shown
    assert shown.count(PROMPT) == 3


def test_a_line_that_is_no_answer_is_named_and_skipped(pipe):
    out = io.StringIO()
    pipe.send("maybe later\ny\n")
    with lines_pair(pipe, out) as pair:
        assert pair.ask(REQUEST, Cancellation()).kind == "approve"
    assert "cannot read 'maybe later' as an answer" in out.getvalue()


def test_the_end_of_stdin_rejects_every_request_at_once(pipe):
    out = io.StringIO()
    pipe.end()
    with lines_pair(pipe, out, expiry_s=60) as pair:
        started = time.monotonic()
        assert pair.ask(REQUEST, Cancellation()) == Decision("reject", "terminal", CLOSED)
        assert pair.ask(WRITE, Cancellation()) == Decision("reject", "terminal", CLOSED)
        assert time.monotonic() - started < 5  # no wait for the expiry
    assert "Stdin is closed, so nobody can approve it: rejected." in out.getvalue()


def test_an_answer_before_the_end_of_stdin_still_counts(pipe):
    pipe.send("y")  # no newline: the last line of a file
    pipe.end()
    with lines_pair(pipe, io.StringIO()) as pair:
        assert pair.ask(REQUEST, Cancellation()).kind == "approve"
        assert pair.ask(REQUEST, Cancellation()).text == CLOSED


def test_no_answer_within_the_expiry_is_a_reject_by_expiry(pipe):
    out = io.StringIO()
    with lines_pair(pipe, out, expiry_s=0.3) as pair:
        decision = pair.ask(REQUEST, Cancellation())
    assert decision == Decision("reject", "expiry", "nobody decided within 0.3s")
    assert "(no answer in 0.3s rejects it)" in out.getvalue()
    assert "No answer within 0.3s: rejected (expiry)." in out.getvalue()


def test_a_cancel_while_the_prompt_waits_raises_cancelled(pipe):
    cancellation = Cancellation()
    threading.Timer(0.2, cancellation.cancel, args=("Cancelled with Ctrl-C.",)).start()
    out = io.StringIO()
    with lines_pair(pipe, out) as pair, pytest.raises(Cancelled):
        pair.ask(REQUEST, cancellation)
    assert "The mission is cancelled; the request is not run." in out.getvalue()


class Pty:
    def __init__(self) -> None:
        self.master, self.slave = os.openpty()
        self.settings = termios.tcgetattr(self.slave)

    def type(self, keys: str) -> None:
        os.write(self.master, keys.encode())


@pytest.fixture
def pty() -> Iterator[Pty]:
    made = Pty()
    yield made
    os.close(made.master)
    os.close(made.slave)


def tty_pair(pty: Pty, out: io.StringIO, expiry_s: float = 10.0) -> TerminalPair:
    return TerminalPair(stdin=pty.slave, out=out, expiry_s=expiry_s, interactive=True)


def wait_for(out: io.StringIO, text: str, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while text not in out.getvalue():
        assert time.monotonic() < deadline, out.getvalue()
        time.sleep(0.01)


def test_keys_typed_outside_a_prompt_approve_nothing(pty):
    out = io.StringIO()
    with tty_pair(pty, out, expiry_s=0.5) as pair:
        pty.type("yyy")
        time.sleep(0.3)  # read by now, with no prompt waiting
        assert pair.ask(REQUEST, Cancellation()).by == "expiry"
    assert termios.tcgetattr(pty.slave) == pty.settings


def test_a_key_answers_the_prompt_and_the_settings_come_back_after_an_error(pty):
    out = io.StringIO()
    with pytest.raises(RuntimeError), tty_pair(pty, out) as pair:
        assert termios.tcgetattr(pty.slave)[3] & termios.ICANON == 0
        threading.Timer(0.2, pty.type, args=("y",)).start()
        assert pair.ask(REQUEST, Cancellation()) == Decision("approve", "terminal")
        raise RuntimeError("the mission failed")
    assert termios.tcgetattr(pty.slave) == pty.settings


def test_g_reads_a_line_of_guidance_with_the_terminal_s_own_line_editing(pty):
    out = io.StringIO()
    with tty_pair(pty, out) as pair:
        pty.type("g")
        wait_for(out, "Guidance for the model's next step")
        assert termios.tcgetattr(pty.slave)[3] & termios.ICANON  # echo and editing on
        pty.type("Look at rounding.\r")
        wait_for(out, "Guidance queued")
        assert pair.guidance() == [Decision("redirect", "terminal", "Look at rounding.")]
        assert termios.tcgetattr(pty.slave)[3] & termios.ICANON == 0  # keys again
    assert termios.tcgetattr(pty.slave) == pty.settings


def test_an_answer_typed_after_the_expiry_is_too_late(pty):
    out = io.StringIO()
    with tty_pair(pty, out, expiry_s=0.5) as pair:
        pty.type("\x00")  # nothing
        threading.Timer(0.1, pty.type, args=("n",)).start()
        decision = pair.ask(REQUEST, Cancellation())
        assert decision.by == "expiry"
        pty.type("a reason typed too slowly\r")
        wait_for(out, "Too late: that request was already decided.")


def test_a_terminal_that_hangs_up_rejects_the_request(pty):
    out = io.StringIO()
    master = pty.master
    with tty_pair(pty, out) as pair:
        os.close(master)
        pty.master = os.open(os.devnull, os.O_RDWR)  # the fixture closes this one instead
        assert pair.ask(REQUEST, Cancellation()) == Decision("reject", "terminal", CLOSED)


def run_fix(*flags: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("LOOPWRIGHT_")}
    return subprocess.run(
        [sys.executable, "-m", "loopwright.cli", "fix", str(ROOT), *flags],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**clean, "PYTHONPATH": str(ROOT), **(env or {})},
        timeout=60,
    )


@pytest.mark.parametrize(
    ("flags", "env", "says"),
    [
        (
            ("--pair",),
            {},
            "--pair reads your answers from a terminal, and stdin is not one; run it in a "
            "terminal, or add --pair-lines",
        ),
        (("--pair", "--pair-lines", "--json"), {}, "cannot run with --json"),
        (("--pair-lines",), {}, "--pair-lines only applies to --pair"),
        (
            ("--pair", "--pair-lines"),
            {"LOOPWRIGHT_PAIR_EXPIRY_S": "0"},
            "LOOPWRIGHT_PAIR_EXPIRY_S='0' must be greater than 0",
        ),
    ],
    ids=["stdin-not-a-terminal", "json", "lines-without-pair", "expiry-zero"],
)
def test_pair_refuses_what_it_cannot_do_with_exit_2(flags, env, says):
    run = run_fix(*flags, env=env)
    assert run.returncode == 2, run.stderr
    assert says in run.stderr
    assert "Traceback" not in run.stderr


def test_help_explains_pair_mode():
    run = subprocess.run(
        [sys.executable, "-m", "loopwright.cli", "fix", "--help"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200"},
        timeout=60,
    )
    assert "--pair " in run.stdout and "--pair-lines" in run.stdout
    assert "press g at any time" in run.stdout
    assert "LOOPWRIGHT_PAIR_EXPIRY_S" in run.stdout
