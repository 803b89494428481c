"""Scripted model sessions and the checks on their results that several test modules share:
the one-line discount fix of the example repository, step by step."""

from __future__ import annotations

import json

from tests.conftest import step, tool

FIX_OLD = "    discounted = gross - gross * line.discount_percent\n"
FIX_NEW = "    discounted = gross - gross * line.discount_percent / 100\n"
PLAN = tool("update_plan", items=[{"step": "fix the discount", "status": "in_progress"}])
EDIT = tool("edit_file", path="invoice/totals.py", old=FIX_OLD, new=FIX_NEW)
FINISH = tool("finish", summary="discount_percent is a percentage; divide by 100")
CORRECT = [
    step(PLAN),
    step(tool("read_file", path="invoice/totals.py")),
    step(EDIT),
    step(tool("run_command", command="python -m pytest -q")),
    step(FINISH),
]


def assert_one_deliver_then_done(events: list[dict], status: str) -> None:
    """A mission's one deliver stage ends with `status`, `done` is the last event after it,
    and no event speaks of a dry run the user never asked for."""
    deliver = [e for e in events if e["type"] == "stage" and e["stage"] == "deliver"]
    assert [e["status"] for e in deliver] == ["started", status], deliver
    assert events[-1]["type"] == "done"
    assert [e["type"] for e in events].count("done") == 1
    assert events.index(deliver[-1]) < len(events) - 1
    assert "dry run" not in json.dumps(events)


def model_env(server, **extra: str) -> dict[str, str]:
    return {
        "LOOPWRIGHT_MODEL_BASE_URL": server.base_url,
        "LOOPWRIGHT_MODEL_API_KEY": "sk-test-not-a-real-key",
        "LOOPWRIGHT_MODEL_TIERS": "nano=model-nano,super=model-super,ultra=model-ultra",
        **extra,
    }
