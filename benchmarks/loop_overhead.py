"""Loopwright's own time per step: the whole step minus the model's time, on Docker.

A scripted model over real HTTP asks for `run_command("true")` every step in a Docker
sandbox (or a local one with `--sandbox local`). Each step's wall time minus the model
call's duration is what a step costs beyond the model: the sandbox round trip of the
command plus the harness (validation, policy, context rendering, events); target p50
<= 15 ms. The step minus the command's own duration too is the harness alone.

    .venv/bin/python -m benchmarks.loop_overhead [--steps 200] [--sandbox docker|local] [--smoke]

`--smoke` runs 5 steps, to check that the benchmark works.
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
from loopwright.sandbox.factory import get_provider
from loopwright.sandbox.image import ensure_image
from loopwright.sandbox.workspace import git


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


TARGET_MS = 15.0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--sandbox", choices=("docker", "local"), default="docker")
    parser.add_argument("--smoke", action="store_true", help="5 steps, to check it works")
    args = parser.parse_args()
    if args.smoke:
        args.steps = 5
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
            max_steps=args.steps + 1, model_api_key="bench", sandbox=args.sandbox, warm_pool=0
        )
        if args.sandbox == "docker":
            from loopwright.sandbox.docker.engine import connect

            client = connect()
            ensure_image(client, settings, lambda line: None)
            client.close()
        with ScriptedModelServer(load_script(script)) as server:
            settings = settings.with_overrides(model_base_url=server.base_url)
            provider = get_provider(settings)
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
        beyond_model_ms = [(w - m) * 1000 for w, m in zip(walls, model_s, strict=True)]
    if len(walls) != args.steps:
        raise SystemExit(f"ran {len(walls)} of {args.steps} steps")
    print(f"steps: {args.steps}, sandbox: {args.sandbox}")
    print("| measure | p50 | p95 | max |")
    print("| --- | --- | --- | --- |")
    for name, values in (
        ("whole step minus model call (ms)", beyond_model_ms),
        ("Loopwright overhead per step, without the command (ms)", overhead_ms),
        ("model call over HTTP (ms)", [v * 1000 for v in model_s]),
        ("command `true` (ms)", [v * 1000 for v in exec_s]),
        ("whole step (ms)", [v * 1000 for v in walls]),
    ):
        print(
            f"| {name} | {statistics.median(values):.2f} | {percentile(values, 0.95):.2f} "
            f"| {max(values):.2f} |"
        )
    p50 = statistics.median(beyond_model_ms)
    met = "met" if p50 <= TARGET_MS else "NOT met"
    print(f"whole step minus model p50 {p50:.1f} ms (target <= {TARGET_MS:g} ms) {met}")


if __name__ == "__main__":
    main()
