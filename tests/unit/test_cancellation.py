"""A cancellation reaches the agent loop between model steps: an answer that arrives after it
is recorded but never acted on (the scripted model speaks real HTTP; the tools run in a
real local sandbox)."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from loopwright.agent.budget import Budget
from loopwright.agent.context import Conversation
from loopwright.agent.loop import AgentLoop
from loopwright.agent.model import OpenAIModel
from loopwright.agent.scripted import ScriptedModelServer
from loopwright.agent.scripted_steps import parse_steps
from loopwright.agent.tools import Toolbox
from loopwright.cancellation import Cancellation, Cancelled
from loopwright.config import Settings, Tier
from loopwright.events import EventBus, EventList
from loopwright.redaction import Redactor
from tests.conftest import step, tool


@pytest.fixture
def slow_model() -> Iterator[ScriptedModelServer]:
    marker = tool("run_command", command="touch ran-after-cancel")
    server = ScriptedModelServer(parse_steps([step(marker, delay_s=1.0)])).start()
    yield server
    server.stop()


def test_an_answer_that_arrives_after_a_cancel_is_not_acted_on(
    slow_model: ScriptedModelServer, toolbox: Toolbox
) -> None:
    settings = Settings(
        model_base_url=slow_model.base_url,
        model_api_key="sk-test-secret-key-123456",
        tiers=(Tier("nano", "model-nano", 0.1, 0.4),),
        model_retries=0,
    )
    model = OpenAIModel(settings)
    events = EventList()
    cancellation = Cancellation()
    loop = AgentLoop(
        settings=settings,
        model=model,
        toolbox=toolbox,
        conversation=Conversation(system="s", task="fix it", context_tokens=10_000),
        budget=Budget(settings),
        events=EventBus("m-unit", [events], Redactor()),
        cancellation=cancellation,
    )
    threading.Timer(0.3, cancellation.cancel, args=("Cancelled by @ann.",)).start()
    try:
        with pytest.raises(Cancelled, match=r"Cancelled by @ann\."):
            loop.run()
    finally:
        model.close()
    assert len(slow_model.requests) == 1
    assert len(events.of_type("model_call")) == 1  # paid for, so recorded
    assert events.of_type("tool_call") == []
    assert toolbox.run("run_command", '{"command": "ls"}').observation.count("ran-after") == 0


def test_callbacks_run_once_and_late_ones_at_once() -> None:
    cancellation = Cancellation()
    calls: list[str] = []
    cancellation.on_cancel(lambda: calls.append("early"))
    assert cancellation.cancel("Cancelled by @ann.")
    assert not cancellation.cancel("Cancelled by @bob.")
    cancellation.on_cancel(lambda: calls.append("late"))
    assert calls == ["early", "late"]
    assert cancellation.summary == "Cancelled by @ann."
    assert cancellation.wait(0)  # already set: no waiting needed to see it
