"""The six tools offered to the model, with their schemas and the rules enforced on them.

Arguments are validated where they enter; anything wrong (unknown tool, malformed JSON, a
refused command or path) becomes an error observation the model can act on. Only sandbox
infrastructure failures raise.
"""

from __future__ import annotations

import contextlib
import difflib
import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from loopwright.agent.call_summary import MAX_ARGUMENT_NESTING, json_problem
from loopwright.agent.change_review import ChangeReview, finish_request
from loopwright.agent.context import PlanItem
from loopwright.agent.pair import ApprovalRequest, NeedsApproval
from loopwright.agent.policy import (
    Ask,
    AskRules,
    Refusal,
    WriteTarget,
    ask_path_for,
    check_ask,
    check_command,
    protected_write_refusal,
    target_protected_by,
    write_targets,
)
from loopwright.agent.testguard import TestEditGuard
from loopwright.events import LONE_SURROGATE
from loopwright.jsonshape import nests_within
from loopwright.protected_paths import protected_by
from loopwright.sandbox.base import ExecResult, FileToolError, OutputCallback, Sandbox
from loopwright.sandbox.hosttree import path_problem
from loopwright.sandbox.paths import normalize_relative
from loopwright.sandbox.workspace import PatchTooLarge

Status = Literal["ok", "failed", "refused", "error"]

MAX_READ_CHARS = 60_000
MAX_WRITE_BYTES = 2_000_000
MAX_RESOLVED_TARGETS = 8
"""A command's write targets resolved in the sandbox (one round trip each) before it runs."""


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class PlanEntry(_Args):
    step: str = Field(min_length=1, max_length=500)
    status: Literal["pending", "in_progress", "done"]


class UpdatePlanArgs(_Args):
    items: list[PlanEntry] = Field(min_length=1, max_length=30)


class ReadFileArgs(_Args):
    path: str
    start_line: int | None = Field(default=None, ge=1)
    end_line: int | None = Field(default=None, ge=1)


class WriteFileArgs(_Args):
    path: str
    content: str


class EditFileArgs(_Args):
    path: str
    old: str = Field(min_length=1)
    new: str


class RunCommandArgs(_Args):
    command: str = Field(min_length=1)
    timeout_s: float | None = Field(default=None, gt=0)


TITLE_LIMIT = 71
"""A pull-request title or commit subject stays under 72 characters."""


class FinishArgs(_Args):
    summary: str = Field(min_length=1)
    title: str | None = Field(
        default=None,
        description="A short imperative subject for the pull request and commit, one line "
        f"of at most {TITLE_LIMIT} characters (e.g. 'Divide discount_percent by 100').",
    )

    @field_validator("title")
    @classmethod
    def _one_short_line(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if "\n" in value or "\r" in value:
            raise ValueError("the title must be one line; put details in the summary")
        title = value.strip()
        if not title:
            raise ValueError("the title is empty; omit it or write a short subject")
        if len(title) > TITLE_LIMIT:
            raise ValueError(
                f"the title has {len(title)} characters; keep it under {TITLE_LIMIT + 1}"
            )
        return title


def _function(name: str, description: str, model: type[BaseModel]) -> dict[str, Any]:
    schema = model.model_json_schema()
    return {
        "type": "function",
        "function": {"name": name, "description": description, "parameters": schema},
    }


TOOLS: dict[str, tuple[type[_Args], str]] = {
    "update_plan": (
        UpdatePlanArgs,
        "Replace the plan with this checklist. Call it first, and again whenever a step's "
        "status changes.",
    ),
    "read_file": (
        ReadFileArgs,
        "Read a file of the repository (path relative to the repository root), optionally "
        "only lines start_line..end_line (1-based, inclusive).",
    ),
    "write_file": (
        WriteFileArgs,
        "Create or overwrite a file of the repository with the given content.",
    ),
    "edit_file": (
        EditFileArgs,
        "Replace the exact text `old` with `new` in a file. `old` must occur exactly once; "
        "include enough surrounding lines to make it unique.",
    ),
    "run_command": (
        RunCommandArgs,
        "Run a shell command (bash) in the repository root and return its output and exit "
        "code. No network. Servers, background jobs and kill are refused.",
    ),
    "finish": (
        FinishArgs,
        "Declare the task done, with a short summary of the root cause and the fix. An "
        "independent run of the tests then decides whether the fix is accepted.",
    ),
}

TOOL_SPECS: list[dict[str, Any]] = [
    _function(name, description, model) for name, (model, description) in TOOLS.items()
]


@dataclass
class ToolOutcome:
    """What a tool call did: the observation for the model plus data for events and policy."""

    status: Status
    observation: str
    exit_code: int | None = None
    finished: str | None = None
    plan: list[PlanItem] | None = None
    timed_out: bool = False
    truncated: bool = False
    duration_s: float = 0.0
    invalid: bool = False
    """The call itself was wrong (unknown tool, malformed or invalid arguments)."""
    output: str | None = None
    """A command's raw output, before it is rendered into the observation (run_command
    only); events record it in place of the observation."""


class Toolbox:
    """Executes validated tool calls against one sandbox."""

    def __init__(
        self,
        sandbox: Sandbox,
        *,
        command_timeout_s: float,
        protected_paths: Sequence[str],
        on_output: OutputCallback | None = None,
        test_command: str | None = None,
        test_guard: TestEditGuard | None = None,
        ask_rules: AskRules | None = None,
        network_on: bool = False,
        review: ChangeReview | None = None,
    ) -> None:
        """`ask_rules` (pair mode) names the actions that raise `NeedsApproval` instead of
        running; `network_on` says the sandbox keeps its network during the loop; `review`
        (pair mode) judges the whole change when the model finishes."""
        self._sandbox = sandbox
        self._ask_rules = ask_rules
        self._review = review
        self._network_on = network_on
        self._approved: ApprovalRequest | None = None
        self._test_guard = test_guard
        self._command_timeout_s = command_timeout_s
        self._protected = tuple(protected_paths)
        self._on_output = on_output
        self.test_command = test_command
        self.plan: list[PlanItem] = []
        """The latest plan the model sent."""
        self.title: str | None = None
        """The pull-request title the model gave with `finish`, if any."""
        self._handlers: dict[str, Callable[[Any], ToolOutcome]] = {
            "update_plan": self._update_plan,
            "read_file": self._read_file,
            "write_file": self._write_file,
            "edit_file": self._edit_file,
            "run_command": self._run_command,
            "finish": self._finish,
        }

    def run(
        self, name: str, raw_arguments: str, *, approved: ApprovalRequest | None = None
    ) -> ToolOutcome:
        """Run one tool call; `approved` is the request a person approved for this very
        call, which then runs without asking again (with the network when it needs one)."""
        self._approved = approved
        review = self._review if approved is not None and name != "finish" else None
        before = review.state() if review is not None else {}
        try:
            return self._run(name, raw_arguments)
        finally:
            self._approved = None
            if review is not None:
                review.approved(before)

    def _run(self, name: str, raw_arguments: str) -> ToolOutcome:
        if name not in TOOLS:
            return ToolOutcome(
                "error",
                f"Unknown tool {name!r}. The available tools are: {', '.join(TOOLS)}.",
                invalid=True,
            )
        try:
            data = json.loads(raw_arguments or "{}")
        except (ValueError, RecursionError) as exc:
            return ToolOutcome(
                "error",
                f"The arguments for {name} are not valid JSON ({json_problem(exc)}). "
                "Send a JSON object matching the tool's schema.",
                invalid=True,
            )
        if not isinstance(data, dict):
            return ToolOutcome(
                "error", f"The arguments for {name} must be a JSON object.", invalid=True
            )
        if not nests_within(data, MAX_ARGUMENT_NESTING):
            return ToolOutcome(
                "error",
                f"The arguments for {name} nest deeper than {MAX_ARGUMENT_NESTING} levels. Send "
                "a JSON object matching the tool's schema.",
                invalid=True,
            )
        surrogate = _lone_surrogate(data)
        if surrogate is not None:
            return ToolOutcome(
                "error",
                f"The arguments for {name} hold \\u{ord(surrogate):04x}, half of a surrogate "
                "pair, which is not a character. Send text as the characters themselves (or "
                "as a complete pair of \\u escapes).",
                invalid=True,
            )
        model, _ = TOOLS[name]
        try:
            args = model.model_validate(data)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in err['loc']) or 'arguments'}: {err['msg']}"
                for err in exc.errors()
            )
            return ToolOutcome("error", f"Invalid arguments for {name}: {problems}.", invalid=True)
        try:
            return self._handlers[name](args)
        except FileToolError as exc:
            return ToolOutcome("refused" if _is_refusal(exc) else "error", str(exc))

    def _update_plan(self, args: UpdatePlanArgs) -> ToolOutcome:
        plan = [PlanItem(item.step, item.status) for item in args.items]
        self.plan = plan
        done = sum(1 for item in plan if item.status == "done")
        return ToolOutcome("ok", f"Plan updated ({done}/{len(plan)} done).", plan=plan)

    def _read_file(self, args: ReadFileArgs) -> ToolOutcome:
        raw = self._sandbox.read_file(args.path)
        if b"\0" in raw[:8192]:
            return ToolOutcome("error", f"{args.path} is a binary file ({len(raw)} bytes).")
        lines = raw.decode("utf-8", errors="replace").splitlines(keepends=True)
        start = args.start_line or 1
        end = min(args.end_line or len(lines), len(lines))
        if lines and start > len(lines):
            return ToolOutcome(
                "error", f"{args.path} has {len(lines)} lines; start_line {start} is past the end."
            )
        body = "".join(lines[start - 1 : end])
        note = ""
        if len(body) > MAX_READ_CHARS:
            body = body[:MAX_READ_CHARS]
            note = "\n[cut at 60000 characters; read a narrower line range for the rest]"
        header = f"{args.path} (lines {start}-{end} of {len(lines)})\n" if lines else ""
        return ToolOutcome("ok", f"{header}{body}{note}" if lines else f"{args.path} is empty.")

    def _check_writable(self, path: str) -> list[str]:
        """Refuse a write whose path, as written or once symlinks are resolved, is protected.

        The lexical form is checked first (`./.github/x`, `a/../.github/x`), then the path
        the sandbox resolves it to, so a directory symlink into `.github` or a file symlink
        to a workflow is refused before anything is written. Returns the path's spellings
        the test guard must judge: as written, and resolved when that differs.
        """
        rel = normalize_relative(path)
        problem = path_problem([rel])
        if problem is not None:
            raise FileToolError(
                f"Refused: {problem}. Loopwright cannot verify or deliver such a path; "
                "choose a shorter one."
            )
        pattern = protected_by(rel, self._protected)
        resolved = None
        if pattern is None and (self._protected or self._test_guard):
            resolved = self._sandbox.resolve_path(rel)
            pattern = protected_by(resolved, self._protected)
        if pattern is not None:
            via = (
                f" resolves through a symlink to {resolved}, which" if resolved is not None else ""
            )
            raise FileToolError(
                f"Refused: {path!r}{via} is a protected path (it matches `{pattern}`); "
                "Loopwright never changes workflows, actions, CODEOWNERS or its own config, "
                "and a patch that touches them is rejected. Leave it as it is and fix the "
                "code instead."
            )
        return [rel] if resolved in (None, rel) else [rel, resolved]

    def _check_test_edit(self, paths: Sequence[str], new: str | None) -> None:
        """Refuse a write of `new` that verification would withhold (see `agent.testguard`);
        with `new` None, whatever the content would be (an existing test file)."""
        if self._test_guard is None:
            return
        for path in paths:
            reason = (
                self._test_guard.name_refusal(path)
                if new is None
                else self._test_guard.refusal(path, new)
            )
            if reason:
                raise FileToolError(f"Refused: {reason}")

    def _check_command_writes(self, command: str) -> str | None:
        """Why a command is refused for what it writes, or None: a protected path, or an
        existing test file or test configuration (see `agent.testguard`), each judged as
        written and, for literal paths, once symlinks are resolved."""
        if not self._protected and self._test_guard is None:
            return None
        targets = write_targets(command)
        for target in targets:
            pattern = target_protected_by(target, self._protected)
            if pattern is not None:
                return _refused(protected_write_refusal(command, target.path, pattern))
        resolved: list[tuple[WriteTarget, str]] = []
        for target in [t for t in targets if not t.glob][:MAX_RESOLVED_TARGETS]:
            try:
                where = self._sandbox.resolve_path(target.path)
            except FileToolError:
                continue  # not a workspace path: the command may write it
            if where != target.path:
                resolved.append((WriteTarget(where, tree=target.tree), target.path))
        for real, written in resolved:
            pattern = target_protected_by(real, self._protected)
            if pattern is not None:
                return _refused(protected_write_refusal(command, written, pattern, real.path))
        if self._test_guard is not None:
            for target in [*targets, *(real for real, _ in resolved)]:
                reason = self._test_guard.command_refusal(command, target)
                if reason:
                    return f"Refused (test_edit): {reason}"
        return None

    def _write_file(self, args: WriteFileArgs) -> ToolOutcome:
        paths = self._check_writable(args.path)
        self._check_test_edit(paths, args.content)
        data = args.content.encode("utf-8")
        if len(data) > MAX_WRITE_BYTES:
            return ToolOutcome(
                "error", f"Refused: content is {len(data)} bytes; the limit is 2 MB."
            )
        self._ask_write("write_file", paths, None, args.content)
        self._sandbox.write_file(args.path, data)
        return ToolOutcome("ok", f"Wrote {args.path} ({len(data)} bytes).")

    def _edit_file(self, args: EditFileArgs) -> ToolOutcome:
        paths = self._check_writable(args.path)
        # A test file is refused whatever the edit, before `old` is looked for: a model
        # told its text was not found would try again for nothing.
        self._check_test_edit(paths, None)
        try:
            text = self._sandbox.read_file(args.path).decode("utf-8", errors="strict")
        except UnicodeDecodeError as exc:
            return ToolOutcome(
                "error",
                f"{args.path} is not UTF-8 text (byte {exc.start}), so edit_file cannot edit "
                "it; change it with run_command, or rewrite it whole with write_file.",
            )
        count = text.count(args.old)
        if count == 0:
            hint = (
                " The text differs only in whitespace from the file; copy it exactly."
                if _squash(args.old) in _squash(text)
                else " Read the file again and copy the text exactly."
            )
            return ToolOutcome("error", f"`old` was not found in {args.path}.{hint}")
        if count > 1:
            return ToolOutcome(
                "error",
                f"`old` occurs {count} times in {args.path}; include more surrounding lines "
                "so it matches exactly once.",
            )
        edited = text.replace(args.old, args.new, 1)
        self._check_test_edit(paths, edited)
        self._ask_write("edit_file", paths, text, edited)
        self._sandbox.write_file(args.path, edited.encode("utf-8"))
        line = text[: text.index(args.old)].count("\n") + 1
        return ToolOutcome("ok", f"Edited {args.path} at line {line}.")

    def _run_command(self, args: RunCommandArgs) -> ToolOutcome:
        refusal = check_command(args.command)
        refused = _refused(refusal) if refusal else self._check_command_writes(args.command)
        if refused is not None:
            return ToolOutcome("refused", refused)
        approved = self._approved
        if approved is None and self._ask_rules is not None:
            ask = check_ask(args.command, self._ask_rules, network_on=self._network_on)
            if ask is not None:
                raise NeedsApproval(_request("run_command", ask, command=args.command))
        timeout = min(args.timeout_s or self._command_timeout_s, self._command_timeout_s)
        with self._network_for(approved):
            result = self._sandbox.exec(args.command, timeout_s=timeout, on_output=self._on_output)
        return ToolOutcome(
            "ok" if result.ok else "failed",
            render_exec(result, timeout),
            exit_code=result.exit_code,
            timed_out=result.timed_out,
            truncated=result.truncated,
            duration_s=result.duration_s,
            output=result.output,
        )

    def _ask_write(self, tool: str, paths: Sequence[str], old: str | None, new: str) -> None:
        """Raise `NeedsApproval` for a write under `ask_paths` (as written or resolved)
        that nobody approved yet, with the change as a diff."""
        if self._ask_rules is None or self._approved is not None:
            return
        for path in paths:
            ask = ask_path_for(path, self._ask_rules)
            if ask is not None:
                if old is None:
                    try:
                        old = self._sandbox.read_file(paths[0]).decode("utf-8", errors="replace")
                    except FileToolError:
                        old = ""
                diff = "".join(
                    difflib.unified_diff(
                        old.splitlines(keepends=True),
                        new.splitlines(keepends=True),
                        f"a/{paths[0]}",
                        f"b/{paths[0]}",
                    )
                )
                raise NeedsApproval(_request(tool, ask, diff=diff, path=paths[0]))

    @contextlib.contextmanager
    def _network_for(self, approved: ApprovalRequest | None) -> Iterator[None]:
        """The network attached for an approved command that needs it, and only while it
        runs (a no-op where the sandbox has no isolation to switch)."""
        if approved is None or not approved.network or self._network_on:
            yield
            return
        self._sandbox.set_network(True)
        try:
            yield
        finally:
            self._sandbox.set_network(False)

    def _finish(self, args: FinishArgs) -> ToolOutcome:
        if self._review is not None and self._approved is None:
            try:
                review = self._review.check()
            except PatchTooLarge as exc:
                return ToolOutcome("refused", f"Refused: not finished. {_capital(str(exc))}.")
            if review is not None:
                raise NeedsApproval(finish_request(review))
        self.title = args.title
        return ToolOutcome(
            "ok", "Finish recorded; verification will now run.", finished=args.summary
        )


def render_exec(result: ExecResult, timeout_s: float) -> str:
    status = f"exit code {result.exit_code}"
    if result.timed_out:
        status = (
            f"timed out after {timeout_s:g}s and was killed; long-running processes are not "
            "allowed here"
        )
    return f"{result.output.rstrip()}\n({status})" if result.output.strip() else f"({status})"


def _request(
    tool: str, ask: Ask, *, command: str | None = None, diff: str | None = None, path: str = ""
) -> ApprovalRequest:
    """The request for `ask`; the loop gives it its id."""
    what = f"Run `{command}`" if command is not None else f"Change {path}"
    return ApprovalRequest(
        id="",
        tool=tool,
        rule=ask.rule,
        what=what,
        why=ask.reason,
        command=command,
        diff=diff,
        network=ask.network,
    )


def _refused(refusal: Refusal) -> str:
    return f"Refused ({refusal.rule}): {refusal.message}"


def _squash(text: str) -> str:
    return " ".join(text.split())


def _is_refusal(exc: FileToolError) -> bool:
    return str(exc).startswith("Refused")


def _lone_surrogate(data: Any) -> str | None:
    """The first lone surrogate in any string of the parsed arguments `data` (JSON's
    `\\ud800` decodes to one): it cannot be encoded, written, run or logged."""
    stack = [data]
    while stack:
        value = stack.pop()
        if isinstance(value, str):
            found = LONE_SURROGATE.search(value)
            if found is not None:
                return found.group()
        elif isinstance(value, dict):
            stack.extend(value.keys())
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
    return None


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]
