"""What every `loopwright` command shares: exit codes, usage errors, the failure report."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any, NoReturn, Protocol

if TYPE_CHECKING:
    pass


EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_NOTHING_TO_FIX, EXIT_FLAKY, EXIT_ENVIRONMENT = range(6)
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report Ctrl-C
EXIT_CODES = """exit codes:
  0  verified (or the command succeeded)
  1  not verified (the fix failed verification, or a budget ran out), or a failure of
     Loopwright's own (the message says so)
  2  usage or configuration error (bad flags or settings, not a directory, not a git
     repository, a bad .loopwright.yml, no test command found)
  3  nothing to fix (the tests already pass)
  4  flaky (the failing tests pass on a re-run with no change)
  5  environment problem (Docker unreachable, the sandbox image missing, the setup or test
     command cannot run, the model endpoint not answering)
  130  Ctrl-C: the mission was cancelled (with --json, its result says cancelled)"""
# What a mission's `error` event names as its cause, by exit code.
USAGE_ERROR_KINDS = frozenset({"ConfigError", "DetectionError", "WorkspaceError"})
ENVIRONMENT_ERROR_KINDS = frozenset({"SandboxError", "ModelError"})


class FixResultLike(Protocol):
    """What the CLI prints of a fix or build result."""

    @property
    def mission(self) -> str: ...

    @property
    def status(self) -> str: ...

    @property
    def message(self) -> str: ...

    @property
    def summary(self) -> str: ...

    @property
    def patch(self) -> str: ...

    @property
    def verification(self) -> dict[str, Any] | None: ...

    def to_dict(self) -> dict[str, Any]: ...


class UsageError(Exception):
    """Bad flags or settings; printed as one line, exit code 2."""


class Parser(argparse.ArgumentParser):
    """Reports bad flags as a `UsageError`, so `--json` still prints its one object."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see `{self.prog} --help`)")


def add_output_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--json", action="store_true", help="print the result as one JSON object on stdout"
    )
    parser.add_argument(
        "-q", "--quiet", action="store_true", help="print only the verdict line on stderr"
    )
    parser.add_argument(
        "-v", "--verbose", action="store_true", help="also print debug logs on stderr"
    )


def report_failure(as_json: bool, code: int, message: str, mission: str | None = None) -> int:
    """A run that ends before any result: one line on stderr, and with --json the one
    object stdout carries."""
    print(f"loopwright: {message}", file=sys.stderr)
    if as_json:
        failure: dict[str, Any] = {"status": "error", "exit_code": code, "message": message}
        if mission is not None:
            failure["mission"] = mission
        print(json.dumps(failure, indent=2))
    return code


def exit_code(status: str, message: str, error_kind: str | None) -> int:
    """The exit code of a mission that ran (see EXIT_CODES)."""
    if status == "verified":
        return EXIT_OK
    if status == "cancelled":
        return EXIT_INTERRUPTED
    if status == "nothing_to_fix":
        return EXIT_NOTHING_TO_FIX
    if status == "flaky":
        return EXIT_FLAKY
    if status == "error":
        if error_kind in USAGE_ERROR_KINDS:
            return EXIT_USAGE
        if error_kind in ENVIRONMENT_ERROR_KINDS or message.startswith("environment problem"):
            return EXIT_ENVIRONMENT
    return EXIT_FAILED
