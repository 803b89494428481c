"""One real mission against llama.cpp's server with the pinned 0.5B model: the wire path
(tool calls parsed, streamed replies with usage, the prompt cache reported, well-formed
events, a valid final status), not whether the model fixes the bug.

The model is fetched into the model cache on first use and reused afterwards. Without
xllamacpp or the model the test skips on a laptop and fails in CI (CI=true).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from loopwright.agent.local_model import (
    LocalModelError,
    LocalServer,
    fetch_model,
    xllamacpp_available,
)
from loopwright.events import check_event
from tests.conftest import CliRun, init_repo

MODEL = "qwen2.5-coder-0.5b"
TINY_TASK = {
    "calc.py": 'def add(a, b):\n    """The sum of a and b."""\n    return a - b\n',
    "tests/test_calc.py": "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n",
    ".loopwright.yml": "test_cmd: python -m pytest -q\n",
}
"""A one-line bug: the smallest mission that still reads, edits and runs."""
STATUSES = {"verified", "unverified", "flaky", "nothing_to_fix", "budget_exceeded", "error"}
MAX_STEPS = 2

pytestmark = [
    pytest.mark.timeout(2400),
    pytest.mark.xdist_group("real-model"),
    pytest.mark.slow,
]


def unavailable(why: str) -> None:
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(f"the real-model test cannot run in CI: {why}")
    pytest.skip(why)


@pytest.fixture(scope="module")
def local_server() -> Iterator[LocalServer]:
    if not xllamacpp_available():
        unavailable("xllamacpp is not installed: pip install -e '.[test]'")
    try:
        gguf = fetch_model(MODEL)
    except LocalModelError as exc:
        unavailable(str(exc))
    # Temperature 0 and a fixed seed: the same replies run after run on one machine. A small
    # context and reply cap keep the two steps short on two cores.
    with LocalServer(
        gguf, threads=2, ctx_size=8192, temperature=0.0, seed=7, max_tokens=192
    ) as server:
        yield server


def test_a_real_mission_against_a_local_model(
    local_server: LocalServer, tmp_path: Path, run_cli: Callable[..., CliRun]
) -> None:
    repo = tmp_path / "tiny-calc"
    for rel, text in TINY_TASK.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    init_repo(repo)
    run = run_cli(
        "fix",
        str(repo),
        "--sandbox",
        "local",
        env={
            "LOOPWRIGHT_MODEL_TIERS": local_server.tier_line("local"),
            "LOOPWRIGHT_MAX_STEPS": str(MAX_STEPS),
            "LOOPWRIGHT_CONTEXT_TOKENS": "6000",
            # Generous: a busy machine slows a 2-thread model tenfold; a stall still fails.
            "LOOPWRIGHT_MODEL_TIMEOUT_S": "1200",
            "LOOPWRIGHT_STALL_TIMEOUT_S": "1200",
            "LOOPWRIGHT_MODEL_RETRIES": "0",
        },
    )
    assert run.result is not None, run.stderr
    assert run.result["status"] in STATUSES
    for event in run.events:
        check_event(event)
    assert run.of_type("done"), "the mission ended without a done event"

    calls = run.of_type("model_call")
    assert 1 <= len(calls) <= MAX_STEPS, run.stderr
    for call in calls:
        # Streamed with usage: the server's own counts, not Loopwright's estimate.
        assert call["prompt_tokens"] > 0 and call["completion_tokens"] > 0
        assert not call.get("usage_estimated")
        assert call["tier"] == "local" and call["cost_usd"] == 0.0
    # The model's calls arrive as tool calls, natively or recovered from its text.
    with_calls = [c for c in calls if c["tool_calls"]]
    assert with_calls, [c.get("content") for c in calls]
    assert all(c["tool_call_source"] in ("native", "content") for c in with_calls)
    assert run.of_type("tool_call") and run.of_type("tool_result")
    # Conversations only grow, so every request after the first reuses the cached prefix.
    for call in calls[1:]:
        assert (call.get("cached_tokens") or 0) > 0, call
    print(
        "real model:",
        [
            (c["prompt_tokens"], c.get("cached_tokens"), c["tool_call_source"], c["duration_s"])
            for c in calls
        ],
    )
