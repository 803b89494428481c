import json

from loopwright.agent.context import Conversation, PlanItem, estimate_tokens


def _conversation(context_tokens: int) -> Conversation:
    conv = Conversation(system="sys", task="fix it", context_tokens=context_tokens)
    conv.plan = [PlanItem("read", "done"), PlanItem("fix", "in_progress")]
    for i in range(30):
        call = {
            "id": f"c{i}",
            "type": "function",
            "function": {"name": "run_command", "arguments": "{}"},
        }
        conv.add_assistant("", [call])
        conv.add_tool_result(f"c{i}", f"output {i} " + "y" * 20_000)
    conv.set_latest_test("python -m pytest", 1, "FAILED tests/test_a.py::test_x - assert 0")
    return conv


def test_render_fits_budget_and_keeps_plan_and_latest_test():
    conv = _conversation(context_tokens=20_000)
    messages = conv.render()
    total = sum(estimate_tokens(json.dumps(m)) for m in messages)
    assert total <= 20_000
    state = messages[-1]["content"]
    assert "[~] fix" in state and "[x] read" in state
    assert "`python -m pytest` exited 1" in state and "Failing: tests/test_a.py::test_x." in state
    # the newest observations stay verbatim, the oldest are elided
    tool_messages = [m for m in messages if m["role"] == "tool"]
    assert tool_messages[-1]["content"].startswith("output 29")
    assert "elided" in tool_messages[0]["content"]


def test_every_tool_call_keeps_its_result_message():
    messages = _conversation(context_tokens=5_000).render()
    pending: set[str] = set()
    for message in messages:
        if message["role"] == "assistant":
            assert not pending
            pending = {c["id"] for c in message.get("tool_calls", [])}
        elif message["role"] == "tool":
            pending.discard(message["tool_call_id"])
    assert not pending


def test_observations_are_capped_when_recorded():
    conv = Conversation(system="s", task="t", context_tokens=100_000, observation_chars=1_000)
    conv.add_tool_result("c1", "z" * 50_000)
    assert len(conv.turns[0]["content"]) <= 1_000


def test_no_elision_when_it_fits():
    conv = Conversation(system="s", task="t", context_tokens=100_000)
    conv.add_assistant(
        "", [{"id": "a", "type": "function", "function": {"name": "x", "arguments": "{}"}}]
    )
    conv.add_tool_result("a", "small output")
    assert conv.render()[3]["content"] == "small output"


def _step(conv: Conversation, i: int, output: str) -> None:
    call = {
        "id": f"c{i}",
        "type": "function",
        "function": {"name": "run_command", "arguments": "{}"},
    }
    conv.add_assistant("", [call])
    conv.add_tool_result(f"c{i}", output)


def _is_prefix(before: list[dict], after: list[dict]) -> bool:
    return after[: len(before)] == before


def test_each_request_extends_the_previous_one():
    conv = Conversation(system="sys", task="fix it", context_tokens=100_000)
    previous = conv.render()
    for i in range(12):
        _step(conv, i, f"output {i}")
        if i % 3 == 0:
            conv.plan = [PlanItem(f"step {i}", "in_progress")]
        if i % 4 == 0:
            conv.set_latest_test("pytest -q", i // 4 % 2, f"run {i}")
        messages = conv.render()
        assert _is_prefix(previous, messages), i
        previous = messages
    # What changed in the state is appended, and only that.
    states = [
        m["content"] for m in previous if m["role"] == "user" and "Current state" in m["content"]
    ]
    plans = [s for s in states if "Plan:" in s]
    runs = [s for s in states if "Latest test run:" in s]
    # The first state, then a plan at steps 0, 3, 6, 9 (0 together with the first run).
    assert len(plans) == 5 and "step 9" in plans[-1] and "step 6" not in plans[-1]
    # Runs at steps 0, 4, 8 exit 0, 1, 0: three changes, each without its output.
    assert [r.split("Latest test run: ")[1] for r in runs] == [
        f"`pytest -q` exited {code} (its output is above)." for code in (0, 1, 0)
    ]


def test_a_state_update_carries_only_what_changed_and_never_the_output_again():
    output = "F\nFAILED tests/test_totals.py::test_vat - assert 1 == 2\n" + "x" * 2_000
    conv = Conversation(system="sys", task=f"fix it\n{output}", context_tokens=100_000)
    conv.set_latest_test("python -m pytest", 1, output, in_task=True)
    first = conv.render()[-1]["content"]
    assert first.startswith("Current state.\nPlan: none yet")
    assert "Latest test run: `python -m pytest` exited 1 (its output is above)." in first
    assert "Failing: tests/test_totals.py::test_vat." in first and "xxxx" not in first
    conv.plan = [PlanItem("fix the VAT", "in_progress")]
    plan_only = conv.render()[-1]["content"]
    assert plan_only == "Current state.\nPlan:\n  [~] fix the VAT"
    _step(conv, 1, "4 passed")
    conv.set_latest_test("python -m pytest -q", 0, "4 passed")
    test_only = conv.render()[-1]["content"]
    assert (
        test_only
        == "Current state.\nLatest test run: `python -m pytest -q` exited 0 (its output is above)."
    )


def test_an_unchanged_state_adds_no_message():
    conv = Conversation(system="sys", task="fix it", context_tokens=100_000)
    first = conv.render()
    second = conv.render()
    assert first == second


def test_elision_happens_in_rare_large_steps():
    conv = Conversation(system="sys", task="fix it", context_tokens=20_000)
    previous = conv.render()
    broken = 0
    for i in range(60):
        _step(conv, i, f"output {i} " + "y" * 4_000)
        messages = conv.render()
        total = sum(estimate_tokens(json.dumps(m)) for m in messages)
        assert total <= 20_000, i
        broken += not _is_prefix(previous, messages)
        previous = messages
    # ~1,000 tokens a step against a 17,000-token budget elided to 60%: a break every ~7 steps
    # at most, where eliding just enough would break the prefix on every step once full.
    assert 1 <= broken <= 10, broken


def test_the_latest_test_output_is_never_elided_and_earlier_ones_may_be():
    conv = Conversation(system="sys", task="fix it", context_tokens=3_000)
    _step(conv, 0, "old run: FAILED tests/test_a.py::test_old " + "o" * 1_500)
    conv.set_latest_test("pytest -q", 1, "FAILED tests/test_a.py::test_old")
    _step(conv, 1, "E   assert total(3) == 4\nFAILED tests/test_a.py::test_x " + "z" * 1_500)
    conv.set_latest_test("pytest -q", 1, "FAILED tests/test_a.py::test_x")
    for i in range(2, 9):
        _step(conv, i, f"read {i} " + "r" * 1_500)
    messages = conv.render()
    tools = [m["content"] for m in messages if m["role"] == "tool"]
    assert "elided" in tools[0]  # the earlier run went
    assert tools[1].startswith("E   assert total(3) == 4")  # the latest stays verbatim
    assert "elided" in tools[2]
    assert "(its output is above). Failing: tests/test_a.py::test_x." in messages[-1][
        "content"
    ] or any("Failing: tests/test_a.py::test_x." in str(m["content"]) for m in messages)


def test_a_passing_suite_not_quoted_in_the_task_is_not_said_to_be_above():
    conv = Conversation(system="sys", task="change it", context_tokens=100_000)
    conv.set_latest_test("pytest -q", 0, "4 passed")
    assert conv.render()[-1]["content"].endswith("Latest test run: `pytest -q` exited 0.")
