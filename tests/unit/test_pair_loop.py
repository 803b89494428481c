"""Pair mode in the agent loop: an action that needs approval waits for a decision, and the
decision (approve, reject, redirect, expiry, guidance) decides what the model sees next.

The model and sandbox are the in-process fakes of `test_agent_loop`; the `Pair` here is a
queue of decisions, so every outcome is the loop's own doing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from loopwright.agent.budget import Budget
from loopwright.agent.change_review import ChangeReview
from loopwright.agent.context import Conversation
from loopwright.agent.loop import AgentLoop
from loopwright.agent.pair import (
    ApprovalRequest,
    Decision,
    PairMode,
    wait_for_decision,
)
from loopwright.agent.policy import AskRules
from loopwright.agent.tools import Toolbox
from loopwright.cancellation import Cancellation, Cancelled
from loopwright.config import Settings, effective_network
from loopwright.events import EventBus, EventList
from loopwright.missions.attempts import ask_rules
from loopwright.redaction import Redactor
from loopwright.repo_config import parse_repo_config
from tests.unit.test_agent_loop import TIERS, MemorySandbox, ScriptedModel, finish, run


@dataclass
class QueuePair:
    """Answers each request with the next decision; guidance is handed out once."""

    decisions: list[Decision] = field(default_factory=list)
    pending_guidance: list[Decision] = field(default_factory=list)
    asked: list[ApprovalRequest] = field(default_factory=list)
    on_ask: Callable[[ApprovalRequest], None] | None = None
    opened: list[str] = field(default_factory=list)
    on_open: Callable[[ApprovalRequest], None] | None = None

    def open(self, request: ApprovalRequest) -> None:
        self.opened.append(request.id)
        if self.on_open is not None:
            self.on_open(request)

    def ask(self, request: ApprovalRequest, cancellation: Cancellation) -> Decision:
        self.asked.append(request)
        if self.on_ask is not None:
            self.on_ask(request)
        return self.decisions.pop(0)

    def guidance(self) -> list[Decision]:
        taken, self.pending_guidance = self.pending_guidance, []
        return taken


class NetworkSandbox(MemorySandbox):
    """Records the network state each command ran with."""

    def __init__(self) -> None:
        super().__init__()
        self.network = False
        self.ran_with: list[tuple[str, bool]] = []
        self.switches: list[bool] = []

    def exec(self, command: str, **kwargs: Any) -> Any:
        self.ran_with.append((command, self.network))
        return super().exec(command, **kwargs)

    def set_network(self, enabled: bool) -> None:
        self.network = enabled
        self.switches.append(enabled)


def make(
    model: ScriptedModel,
    pair: QueuePair,
    *,
    rules: AskRules | None = None,
    sandbox: MemorySandbox | None = None,
    review: ChangeReview | None = None,
) -> tuple[AgentLoop, EventList, MemorySandbox]:
    config = Settings(model_base_url="http://model.invalid/v1", tiers=TIERS)
    sandbox = sandbox or NetworkSandbox()
    events = EventList()
    loop = AgentLoop(
        settings=config,
        model=model,
        toolbox=Toolbox(
            sandbox,
            command_timeout_s=30,
            protected_paths=(".github/**",),
            ask_rules=rules or AskRules(ask_paths=("migrations/**",)),
            review=review,
        ),
        conversation=Conversation(system="sys", task="fix it", context_tokens=64_000),
        budget=Budget(config),
        events=EventBus("m-pair", [events], Redactor()),
        pair=PairMode(pair, always=True),
    )
    return loop, events, sandbox


def test_an_approved_install_runs_with_the_network_for_that_command_only():
    model = ScriptedModel([[run("pip install requests")], [run("pytest -q")], [finish()]])
    pair = QueuePair([Decision("approve", "@maintainer")])
    loop, events, sandbox = make(model, pair)
    assert loop.run().outcome == "finished"
    assert isinstance(sandbox, NetworkSandbox)
    assert sandbox.ran_with == [("pip install requests", True), ("pytest -q", False)]
    assert sandbox.switches == [True, False]
    (asked,) = events.of_type("approval_requested")
    assert asked.fields["command"] == "pip install requests"
    assert asked.fields["rule"] == "network" and asked.fields["network"] is True
    assert asked.fields["expires_s"] == 900
    (decided,) = events.of_type("decision")
    assert decided.fields == {"decision": "approve", "by": "@maintainer", "id": asked.fields["id"]}
    assert pair.asked[0].id == asked.fields["id"]
    # The model was not called while the request waited: one call per step, three steps.
    assert len(model.requests) == 3


def test_a_request_is_opened_before_its_event_is_published():
    """Someone who decides the moment `approval_requested` shows must find it pending."""
    model = ScriptedModel([[run("pip install requests")], [finish()]])
    pair = QueuePair([Decision("reject", "@maintainer")])
    loop, events, _ = make(model, pair)
    published_at_open: list[int] = []
    pair.on_open = lambda _: published_at_open.append(len(events.of_type("approval_requested")))
    loop.run()
    (asked,) = events.of_type("approval_requested")
    assert pair.opened == [asked.fields["id"]]
    assert published_at_open == [0]
    assert [r.id for r in pair.asked] == pair.opened


def test_a_rejected_command_never_runs_and_the_model_reads_the_reason():
    model = ScriptedModel([[run("npm install left-pad")], [finish()]])
    pair = QueuePair([Decision("reject", "@maintainer", "we vendor our dependencies")])
    loop, events, sandbox = make(model, pair)
    loop.run()
    assert sandbox.commands == []
    seen = model.requests[1].last_tool_result()
    assert "rejected it: we vendor our dependencies" in seen
    assert "npm install left-pad" in seen
    assert events.of_type("tool_result")[0].fields["status"] == "refused"


def test_an_expired_request_is_a_reject_by_expiry():
    now = [0.0]
    cancellation = Cancellation()

    def advance() -> None:
        now[0] += 1.0

    decision = wait_for_decision(
        lambda: advance(),  # type: ignore[func-returns-value]
        expiry_s=5.0,
        cancellation=cancellation,
        interval_s=0.0,
        clock=lambda: now[0],
    )
    assert decision == Decision("reject", "expiry", "nobody decided within 5s")


def test_a_cancel_while_waiting_ends_the_wait():
    cancellation = Cancellation()
    cancellation.cancel("Cancelled by @maintainer.")
    with pytest.raises(Cancelled):
        wait_for_decision(lambda: None, expiry_s=60, cancellation=cancellation)


def test_redirect_refuses_the_action_and_the_next_request_carries_the_guidance():
    model = ScriptedModel([[run("rm -rf src")], [finish()]])
    pair = QueuePair([Decision("redirect", "dashboard", "Only touch src/total.py.")])
    loop, events, sandbox = make(model, pair)
    loop.run()
    assert sandbox.commands == []
    (said,) = [m for m in model.requests[1].messages if "Only touch" in str(m.get("content"))]
    assert said["role"] == "user"
    assert "update_plan" in said["content"]
    assert events.of_type("decision")[0].fields["decision"] == "redirect"


def test_guidance_sent_during_the_loop_reaches_the_next_model_request():
    model = ScriptedModel([[run("pytest -q")], [run("pytest -q")], [finish()]])
    pair = QueuePair()
    model.on_complete = lambda n: (
        pair.pending_guidance.append(Decision("redirect", "@maintainer", "Look at rounding."))
        if n == 1
        else None
    )
    loop, events, _ = make(model, pair)
    loop.run()
    assert not any("Look at rounding." in str(m) for m in model.requests[0].messages)
    (said,) = [m for m in model.requests[1].messages if "Look at rounding" in str(m.get("content"))]
    assert said["role"] == "user"
    (decided,) = events.of_type("decision")
    assert decided.fields == {
        "decision": "guidance",
        "by": "@maintainer",
        "text": "Look at rounding.",
    }


def test_a_write_under_ask_paths_shows_its_diff_and_waits():
    sandbox = NetworkSandbox()
    sandbox.files["migrations/0001.sql"] = b"create table a;\n"
    edit = ("edit_file", {"path": "migrations/0001.sql", "old": "table a", "new": "table b"})
    model = ScriptedModel([[edit], [edit], [finish()]])
    pair = QueuePair([Decision("reject", "terminal"), Decision("approve", "terminal")])
    loop, events, _ = make(model, pair, sandbox=sandbox)
    loop.run()
    first, second = events.of_type("approval_requested")
    assert "-create table a;" in first.fields["diff"] and "+create table b;" in first.fields["diff"]
    assert first.fields["id"] != second.fields["id"]
    assert sandbox.files["migrations/0001.sql"] == b"create table b;\n"


def test_without_pair_mode_the_same_commands_run_as_before():
    sandbox = NetworkSandbox()
    model = ScriptedModel([[run("pip install requests")], [finish()]])
    config = Settings(model_base_url="http://model.invalid/v1", tiers=TIERS)
    events = EventList()
    AgentLoop(
        settings=config,
        model=model,
        toolbox=Toolbox(sandbox, command_timeout_s=30, protected_paths=()),
        conversation=Conversation(system="sys", task="fix it", context_tokens=64_000),
        budget=Budget(config),
        events=EventBus("m-pair", [events], Redactor()),
    ).run()
    assert sandbox.ran_with == [("pip install requests", False)]
    assert events.of_type("approval_requested") == []


@pytest.mark.parametrize(
    ("operator", "repo_network"),
    [("none", None), ("always", "none"), ("setup", "none")],
    ids=["operator-none", "repo-none", "repo-narrows-setup"],
)
def test_with_the_network_setting_none_an_install_is_not_asked_and_runs_without_it(
    operator: str, repo_network: str | None
):
    """An approval never widens the network past the operator's or the repository's
    setting: with `none` there is nothing to approve, the command runs as it would
    without pair mode."""
    text = "pair: true\n" + (f"network: {repo_network}\n" if repo_network else "")
    repo = parse_repo_config(text, ".github/loopwright.yml")
    settings = Settings(model_base_url="http://model.invalid/v1", tiers=TIERS, network=operator)
    network = effective_network(settings.network, repo.network)
    model = ScriptedModel([[run("pip install requests")], [finish()]])
    pair = QueuePair([Decision("approve", "@maintainer")])
    loop, events, sandbox = make(model, pair, rules=ask_rules(repo, network=network))
    assert loop.run().outcome == "finished"
    assert isinstance(sandbox, NetworkSandbox)
    assert sandbox.ran_with == [("pip install requests", False)]
    assert sandbox.switches == []
    assert pair.asked == [] and events.of_type("approval_requested") == []
