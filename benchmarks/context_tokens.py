"""Prompt tokens sent over a 60-step mission whose commands print 50 kB each, against a
naive loop that resends the full history every step.

Both counts use the same estimator over the exact messages a real run sends (the scripted
server records every request). The plan and the latest test result must be in every request.

    .venv/bin/python -m benchmarks.context_tokens [--steps 60] [--kb 50]
    .venv/bin/python -m benchmarks.context_tokens --smoke    # 6 steps of 5 kB: does it work
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from loopwright.agent.budget import Budget
from loopwright.agent.context import Conversation, estimate_tokens
from loopwright.agent.loop import AgentLoop
from loopwright.agent.model import OpenAIModel
from loopwright.agent.scripted import ScriptedModelServer
from loopwright.agent.scripted_steps import load_script
from loopwright.agent.tools import TOOL_SPECS, Toolbox
from loopwright.config import Settings
from loopwright.events import EventBus
from loopwright.redaction import Redactor
from loopwright.sandbox.local import LocalProvider
from loopwright.sandbox.workspace import git


def request_tokens(messages: list[dict[str, object]]) -> int:
    return estimate_tokens(json.dumps(messages)) + estimate_tokens(json.dumps(TOOL_SPECS))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--kb", type=int, default=50)
    parser.add_argument("--smoke", action="store_true", help="6 steps of 5 kB, to check it works")
    args = parser.parse_args()
    if args.smoke:
        args.steps, args.kb = 6, 5
    noisy = f"python3 -c \"print('x' * {args.kb * 1024})\"; python3 -m pytest -q 2>/dev/null; true"
    plan = {
        "name": "update_plan",
        "arguments": {"items": [{"step": "investigate the noisy output", "status": "in_progress"}]},
    }
    steps = [{"tool_calls": [plan]}] + [
        {"tool_calls": [{"name": "run_command", "arguments": {"command": noisy}}]}
    ] * (args.steps - 1)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        tree = root / "repo"
        tree.mkdir()
        (tree / "README.md").write_text("bench\n")
        git(["init", "-q"], tree)
        script = root / "script.json"
        script.write_text(json.dumps(steps))
        settings = Settings.from_env({}).with_overrides(max_steps=args.steps, model_api_key="b")
        with ScriptedModelServer(load_script(script)) as server:
            settings = settings.with_overrides(model_base_url=server.base_url)
            provider = LocalProvider(settings.sandbox_limits)
            sandbox = provider.create("bench", tree, network=False)
            conversation = Conversation("system prompt", "task", settings.context_tokens)
            events = EventBus("bench", [], Redactor())
            model = OpenAIModel(settings)
            loop = AgentLoop(
                settings=settings,
                model=model,
                toolbox=Toolbox(sandbox, command_timeout_s=60, protected_paths=()),
                conversation=conversation,
                budget=Budget(settings),
                events=events,
            )
            events.enter("loop")
            for _ in range(args.steps):
                loop.step()
            requests = list(server.requests)
            model.close()
            sandbox.close()
            provider.close()
    sent = sum(request_tokens(r["messages"]) for r in requests)
    # The naive loop appends every full observation and resends everything each step.
    naive = 0
    history: list[dict[str, object]] = [
        {"role": "system", "content": "system prompt"},
        {"role": "user", "content": "task"},
    ]
    output_chars = args.kb * 1024 + 40
    for index in range(args.steps):
        naive += request_tokens(history)
        call = {
            "id": f"c{index}",
            "type": "function",
            "function": {"name": "run_command", "arguments": json.dumps({"command": noisy})},
        }
        history.append({"role": "assistant", "content": None, "tool_calls": [call]})
        history.append({"role": "tool", "tool_call_id": f"c{index}", "content": "x" * output_chars})
    with_state = sum(
        1
        for r in requests
        if "Plan:" in r["messages"][-1]["content"] and "investigate" in r["messages"][-1]["content"]
    )
    with_test = sum(1 for r in requests[2:] if "Latest test run:" in r["messages"][-1]["content"])
    print(f"steps: {args.steps}, output per command: {args.kb} kB")
    print("| measure | value |")
    print("| --- | --- |")
    print(f"| prompt tokens sent (Loopwright) | {sent:,} |")
    print(f"| prompt tokens, naive full history | {naive:,} |")
    print(f"| ratio | {sent / naive:.3f} |")
    print(f"| requests with the plan restated | {with_state}/{len(requests)} |")
    label = "requests with the latest test result (after the first run)"
    print(f"| {label} | {with_test}/{len(requests) - 2} |")
    print(
        f"| largest request (tokens) | {max(request_tokens(r['messages']) for r in requests):,} |"
    )


if __name__ == "__main__":
    main()
