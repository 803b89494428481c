"""Loopwright's own time per step, excluding model and command time.

A scripted model over real HTTP asks for `run_command("true")` every step in a local
sandbox; each step's wall time minus the model call's duration and the command's duration
is the harness overhead (validation, policy, context rendering, events).

    .venv/bin/python -m benchmarks.loop_overhead [--steps 200]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from loopwright.agent.budget import Budget
from loopwright.agent.context import Conversation
from loopwright.agent.loop import AgentLoop
from loopwright.agent.model import OpenAIModel
from loopwright.agent.scripted import ScriptedModelServer
from loopwright.agent.scripted_steps import load_script
from loopwright.agent.tools import Toolbox
from loopwright.config import Settings
from loopwright.events import EventBus, EventList
from loopwright.redaction import Redactor
from loopwright.sandbox.local import LocalProvider
from loopwright.sandbox.workspace import git


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        tree = root / "repo"
        tree.mkdir()
        (tree / "README.md").write_text("bench\n")
        git(["init", "-q"], tree)
        script = root / "script.json"
        call = {"name": "run_command", "arguments": {"command": "true"}}
        script.write_text(json.dumps([{"tool_calls": [call], "repeat": True}]))
        settings = Settings.from_env({}).with_overrides(
            max_steps=args.steps + 1, model_api_key="bench"
        )
        with ScriptedModelServer(load_script(script)) as server:
            settings = settings.with_overrides(model_base_url=server.base_url)
            provider = LocalProvider(settings.sandbox_limits)
            sandbox = provider.create("bench", tree, network=False)
            sink = EventList()
            events = EventBus("bench", [sink], Redactor())
            model = OpenAIModel(settings)
            loop = AgentLoop(
                settings=settings,
                model=model,
                toolbox=Toolbox(sandbox, command_timeout_s=30, protected_paths=()),
                conversation=Conversation("system", "task", settings.context_tokens),
                budget=Budget(settings),
                events=events,
            )
            events.enter("loop")
            walls = []
            for _ in range(args.steps):
                started = time.perf_counter()
                loop.step()
                walls.append(time.perf_counter() - started)
            model.close()
            sandbox.close()
            provider.close()
        model_s = [e.fields["duration_s"] for e in sink.of_type("model_call")]
        exec_s = [e.fields["duration_s"] for e in sink.of_type("tool_result")]
        overhead_ms = [(w - m - x) * 1000 for w, m, x in zip(walls, model_s, exec_s, strict=True)]
    print(f"steps: {args.steps}")
    print("| measure | p50 | p95 | max |")
    print("| --- | --- | --- | --- |")
    for name, values in (
        ("Loopwright overhead per step (ms)", overhead_ms),
        ("model call over HTTP (ms)", [v * 1000 for v in model_s]),
        ("command `true` (ms)", [v * 1000 for v in exec_s]),
        ("whole step (ms)", [v * 1000 for v in walls]),
    ):
        print(
            f"| {name} | {statistics.median(values):.2f} | {percentile(values, 0.95):.2f} "
            f"| {max(values):.2f} |"
        )


if __name__ == "__main__":
    main()
