"""Runs the peer agent, mini-swe-agent, on one task, for the fix-rate benchmark.

Its own configurations, unchanged: `text` is its text-based bash mode
(`mini_textbased.yaml`: one ```mswea_bash_command block per reply), `tools` its
tool-calling mode (`mini.yaml`: one `bash` tool). The model is the benchmark's
OpenAI-compatible server on loopback, through litellm. Run in a process of its own:

    python -m benchmarks.fix_rate_peer --mode text --cwd REPO --base-url URL --model ID \
        --task-file TASK.txt --out RESULT.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from importlib import resources
from pathlib import Path
from typing import Any

MODES = {
    "text": ("mini_textbased.yaml", "litellm_textbased"),
    "tools": ("mini.yaml", "litellm"),
}


def run_peer(
    *,
    mode: str,
    cwd: Path,
    base_url: str,
    model: str,
    task: str,
    step_limit: int,
    wall_s: int,
    command_timeout_s: int = 60,
) -> dict[str, Any]:
    """One mini-swe-agent run; returns its exit status and what it used."""
    import yaml
    from minisweagent.agents.default import DefaultAgent
    from minisweagent.environments.local import LocalEnvironment
    from minisweagent.models import get_model

    config_name, model_class = MODES[mode]
    config = yaml.safe_load(
        resources.files("minisweagent.config").joinpath(config_name).read_text(encoding="utf-8")
    )
    agent_config = {k: v for k, v in config["agent"].items() if k != "mode"}
    agent_config.update(step_limit=step_limit, cost_limit=0, wall_time_limit_seconds=wall_s)
    model_config = dict(config.get("model") or {})
    model_config.update(
        model_class=model_class,
        cost_tracking="ignore_errors",
        model_kwargs={
            **(model_config.get("model_kwargs") or {}),
            "api_base": base_url,
            "api_key": "local",
            "temperature": 0.0,
        },
    )
    env_config = dict(config.get("environment") or {})
    env_config.update(cwd=str(cwd), timeout=command_timeout_s)
    agent = DefaultAgent(
        get_model(f"openai/{model}", model_config),
        LocalEnvironment(**env_config),
        **agent_config,
    )
    started = time.monotonic()
    error = ""
    try:
        info = agent.run(task)
    except Exception as exc:  # the run's own failure is a result, not a crash of the benchmark
        info = {"exit_status": type(exc).__name__}
        error = str(exc)
    prompt = completion = cached = format_errors = 0
    for message in agent.messages:
        extra = message.get("extra") or {}
        response = extra.get("response")
        if isinstance(response, dict):
            usage = response.get("usage") or {}
            prompt += int(usage.get("prompt_tokens") or 0)
            completion += int(usage.get("completion_tokens") or 0)
            details = usage.get("prompt_tokens_details") or {}
            cached += int(details.get("cached_tokens") or 0)
            if "actions" not in extra:
                format_errors += 1
    return {
        "exit_status": info.get("exit_status", ""),
        "submitted": info.get("exit_status") == "Submitted",
        "steps": agent.n_calls,
        "format_errors": format_errors,
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "cached_tokens": cached,
        "wall_s": round(time.monotonic() - started, 3),
        "error": error,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=sorted(MODES), required=True)
    parser.add_argument("--cwd", type=Path, required=True)
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--task-file", type=Path, required=True)
    parser.add_argument("--step-limit", type=int, default=10)
    parser.add_argument("--wall-s", type=int, default=300)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    os.environ.setdefault("MSWEA_SILENT_STARTUP", "1")
    os.environ.setdefault("MSWEA_COST_TRACKING", "ignore_errors")
    # litellm must not fetch its price list from the network.
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    result = run_peer(
        mode=args.mode,
        cwd=args.cwd,
        base_url=args.base_url,
        model=args.model,
        task=args.task_file.read_text(encoding="utf-8"),
        step_limit=args.step_limit,
        wall_s=args.wall_s,
    )
    args.out.write_text(json.dumps(result, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
