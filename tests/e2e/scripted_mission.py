"""A recorded mission's event log, played into a running server at a controlled pace.

The player writes through the same two sinks an App mission uses (the store's event log
and the live hub), so the browser sees exactly what it would see during a real mission.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loopwright.agent.call_summary import describe_call
from loopwright.app.stream import LiveHub
from loopwright.events import EventBus
from loopwright.missions.result import MissionResult
from loopwright.redaction import Redactor
from loopwright.request import MissionRequest
from loopwright.store.repository import Store

REPO = "acme/invoice"
PR_URL = "https://github.com/acme/invoice/pull/8"
FAILING = [
    "tests/test_totals.py::test_line_with_percentage_discount",
    "tests/test_totals.py::test_invoice_adds_vat_on_discounted_lines",
]
RED, GREEN, BOLD, RESET = "\x1b[31m", "\x1b[32m", "\x1b[1m", "\x1b[0m"
RULE = "=" * 28
RED_PYTEST = "\n".join(
    [
        f"{BOLD}{RULE} test session starts {RULE}{RESET}",
        "collected 4 items",
        "",
        f"tests/test_totals.py {GREEN}.{RESET}{RED}FF{RESET}{GREEN}.{RESET}{' ' * 40}[100%]",
        "",
        f"{RULE}======= FAILURES ======={RULE}",
        f"{RED}{BOLD}{'_' * 20} test_line_with_percentage_discount {'_' * 20}{RESET}",
        "    def test_line_with_percentage_discount():",
        "        line = Line(price=100, quantity=1, discount_pct=10)",
        f"{BOLD}{RED}E       assert 81.0 == 90.0{RESET}",
        f"{BOLD}{RED}E        +  where 81.0 = line_total(Line(price=100, quantity=1, "
        f"discount_pct=10)){RESET}",
        "",
        "tests/test_totals.py:14: AssertionError",
        "# a test name may say anything: <script>window.__pwned = 1</script> "
        '<img src=x onerror="window.__pwned = 2">',
        f"{RED}{RULE} short test summary info {RULE}{RESET}",
        f"{RED}FAILED{RESET} {FAILING[0]} - assert 81.0 == 90.0",
        f"{RED}FAILED{RESET} {FAILING[1]} - assert 97.2 == 108.0",
        f"{RED}{RULE} {BOLD}2 failed{RESET}, {GREEN}2 passed{RESET}{RED} in 0.04s {RULE}{RESET}",
    ]
)
GREEN_PYTEST = "\n".join(
    [
        "collected 4 items",
        "",
        f"tests/test_totals.py {GREEN}....{RESET}{' ' * 40}[100%]",
        "",
        f"{GREEN}{RULE} {BOLD}4 passed{RESET}{GREEN} in 0.03s {RULE}{RESET}",
    ]
)
TOTALS_PY = "\n".join(
    [
        '"""Invoice totals: lines, discounts and VAT."""',
        "",
        "from dataclasses import dataclass",
        "",
        "",
        "@dataclass",
        "class Line:",
        "    price: float",
        "    quantity: int",
        "    discount_pct: float = 0.0",
        "",
    ]
    + [f"# helper {n}: rounding rules for currency {n}" for n in range(1, 70)]
    + [
        "",
        "def line_total(line: Line) -> float:",
        "    gross = line.price * line.quantity",
        "    discount = gross * line.discount_pct / 100",
        "    return round(gross - discount - discount, 2)",
    ]
)
PLAN_1 = [
    {"step": "Reproduce the two failing discount tests", "status": "in_progress"},
    {"step": "Find where the discount is applied twice", "status": "pending"},
    {"step": "Fix line_total and re-run the suite", "status": "pending"},
]
PLAN_2 = [
    {"step": "Reproduce the two failing discount tests", "status": "done"},
    {"step": "Find where the discount is applied twice", "status": "done"},
    {"step": "Fix line_total and re-run the suite", "status": "in_progress"},
]
PLAN_3 = [{**item, "status": "done"} for item in PLAN_2]

Step = tuple[str, str | None, dict[str, Any]]


def model_call(
    step: int,
    tier: str,
    tools: list[str],
    prompt: int,
    completion: int,
    total: float,
    content: str = "",
) -> Step:
    price = {"nano": (0.07, 0.20), "super": (0.40, 1.20), "ultra": (0.60, 1.80)}[tier]
    cost = round((prompt * price[0] + completion * price[1]) / 1_000_000, 6)
    return (
        "model_call",
        None,
        {
            "step": step,
            "tier": tier,
            "model": f"model-{tier}",
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "cost_usd": cost,
            "total_cost_usd": total,
            "duration_s": 0.8 + step / 10,
            "tool_calls": tools,
            "content": content,
        },
    )


def tool_call(call_id: str, tool: str, **arguments: Any) -> Step:
    raw = json.dumps(arguments)
    described = describe_call(tool, raw)
    fields = {"id": call_id, "tool": tool, "arguments": raw, "args": described.args}
    return ("tool_call", None, {**fields, "summary": described.summary})


def tool_result(
    call_id: str, tool: str, status: str, output: str, exit_code: int | None = None
) -> Step:
    return (
        "tool_result",
        None,
        {
            "id": call_id,
            "tool": tool,
            "status": status,
            "exit_code": exit_code,
            "timed_out": False,
            "duration_s": 0.42 if exit_code is not None else 0.01,
            "output": output,
        },
    )


def stage(name: str, status: str, **fields: Any) -> Step:
    return ("stage", name, {"status": status, **fields})


def fix_mission_script(screenshot: Path | None) -> list[Step]:
    """A fix that starts on `nano`, escalates to `super` after repeated failures, is
    verified with a screenshot and delivered as a pull request."""
    return [
        stage("prepare", "started", source=f"https://github.com/{REPO}.git"),
        stage(
            "prepare",
            "detected",
            test_command="python -m pytest",
            setup_command=None,
            reason="pyproject.toml configures pytest",
            head="9c1e2f4",
            instructions={
                "path": "AGENTS.md",
                "bytes": 2150,
                "truncated": False,
                "origin": "default_branch",
            },
        ),
        stage("prepare", "reproduced", failing=FAILING, exit_code=1),
        stage("plan", "started"),
        model_call(
            1,
            "nano",
            ["update_plan"],
            2310,
            148,
            0.000191,
            "Two discount tests fail; the discount looks subtracted twice.",
        ),
        tool_call("c1", "update_plan", items=PLAN_1),
        ("plan", "plan", {"items": PLAN_1}),
        stage("plan", "done"),
        stage("loop", "started"),
        tool_result("c1", "update_plan", "ok", "plan updated (3 items)"),
        model_call(2, "nano", ["run_command"], 2602, 41, 0.000381),
        tool_call("c2", "run_command", command="python -m pytest -q"),
        tool_result("c2", "run_command", "failed", RED_PYTEST, 1),
        model_call(3, "nano", ["read_file"], 3904, 37, 0.000662),
        tool_call("c3", "read_file", path="invoice/totals.py"),
        tool_result("c3", "read_file", "ok", TOTALS_PY),
        model_call(4, "nano", ["edit_file"], 5120, 96, 0.001040),
        tool_call(
            "c4",
            "edit_file",
            path="invoice/totals.py",
            old="gross - discount - discount",
            new="gross - discount / 2",
        ),
        tool_result("c4", "edit_file", "ok", "edited invoice/totals.py (1 replacement)"),
        model_call(5, "nano", ["run_command"], 5488, 40, 0.001432),
        tool_call("c5", "run_command", command="python -m pytest -q"),
        tool_result("c5", "run_command", "failed", RED_PYTEST.replace("81.0", "85.5"), 1),
        model_call(6, "nano", ["run_command"], 6004, 38, 0.001860),
        tool_call("c6", "run_command", command="git diff"),
        tool_result("c6", "run_command", "refused", "git diff: use read_file to inspect files"),
        (
            "escalation",
            None,
            {
                "from_tier": "nano",
                "to_tier": "super",
                "reason": "3 consecutive failures (last: run_command refused)",
            },
        ),
        model_call(
            7,
            "super",
            ["edit_file", "update_plan"],
            6410,
            212,
            0.004678,
            "The discount must be subtracted once: gross - discount.",
        ),
        tool_call(
            "c7",
            "edit_file",
            path="invoice/totals.py",
            old="gross - discount / 2",
            new="gross - discount",
        ),
        tool_result("c7", "edit_file", "ok", "edited invoice/totals.py (1 replacement)"),
        tool_call("c8", "update_plan", items=PLAN_2),
        ("plan", "loop", {"items": PLAN_2}),
        tool_result("c8", "update_plan", "ok", "plan updated (3 items)"),
        model_call(8, "super", ["run_command"], 6902, 44, 0.007491),
        tool_call("c9", "run_command", command="python -m pytest -q"),
        tool_result("c9", "run_command", "ok", GREEN_PYTEST, 0),
        model_call(9, "super", ["update_plan", "finish"], 7110, 120, 0.010479),
        tool_call("c10", "update_plan", items=PLAN_3),
        ("plan", "loop", {"items": PLAN_3}),
        tool_result("c10", "update_plan", "ok", "plan updated (3 items)"),
        tool_call("c11", "finish", summary="Apply the line discount once, not twice."),
        tool_result("c11", "finish", "ok", "finished"),
        stage("loop", "finished"),
        ("phase", "verify", {"name": "patch_export", "duration_s": 0.043}),
        stage("verify", "started"),
        (
            "screenshot",
            "verify",
            {
                "path": str(screenshot) if screenshot else None,
                "http_status": 200,
                "console_errors": [],
                "ok": True,
                "reason": "",
                "url_path": "/",
            },
        ),
        (
            "verification",
            "verify",
            {
                "verified": True,
                "reasons": [],
                "rows": [
                    {
                        "id": "tests/test_totals.py::test_line_without_discount",
                        "before": "passed",
                        "after": "passed",
                        "status": "ok",
                    },
                    {"id": FAILING[0], "before": "failed", "after": "passed", "status": "fixed"},
                    {"id": FAILING[1], "before": "failed", "after": "passed", "status": "fixed"},
                    {
                        "id": "tests/test_totals.py::test_empty_invoice_is_zero",
                        "before": "passed",
                        "after": "passed",
                        "status": "ok",
                    },
                ],
                "tamper": [],
                "commands": [
                    {"phase": "before", "command": "python -m pytest", "exit_code": 1},
                    {"phase": "after", "command": "python -m pytest", "exit_code": 0},
                ],
                "report_source": {"before": "stream", "after": "stream"},
                "after_output": GREEN_PYTEST,
                "web": None,
            },
        ),
        stage("verify", "verified"),
        stage("deliver", "started"),
        ("delivery", "deliver", {"kind": "pull_request", "url": PR_URL, "reason": ""}),
        stage("deliver", "delivered", kind="pull_request", url=PR_URL),
        (
            "done",
            "deliver",
            {
                "status": "verified",
                "message": "verified: the failing tests pass and nothing else broke",
                "summary": "Apply the line discount once, not twice.",
                "cost_usd": 0.010479,
                "steps": 9,
                "elapsed_s": 41.7,
                "final_tier": "super",
            },
        ),
    ]


def create_mission(
    store: Store,
    *,
    repo: str = REPO,
    sha: str = "9c1e2f4a",
    pr: int = 7,
    trigger: str = "check_run",
    running: bool = True,
) -> str:
    request = MissionRequest(
        trigger=trigger,  # type: ignore[arg-type]
        repo=repo,
        clone_url=f"https://github.com/{repo}.git",
        head_sha=sha,
        pr_number=pr,
        installation_id=1,
    )
    mission, created = store.create_mission(request)
    assert created
    if running:
        assert store.mark_running(mission.id)
    return mission.id


def usage_of(script: list[Step]) -> dict[str, dict[str, Any]]:
    usage: dict[str, dict[str, Any]] = {}
    for type_, _stage, fields in script:
        if type_ != "model_call":
            continue
        u = usage.setdefault(
            fields["tier"],
            {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "cost_usd": 0.0},
        )
        u["calls"] += 1
        u["prompt_tokens"] += fields["prompt_tokens"]
        u["completion_tokens"] += fields["completion_tokens"]
        u["cost_usd"] += fields["cost_usd"]
    return usage


@dataclass
class Player:
    """Plays a script into the store and the hub from a thread, one event per `pace_s`."""

    store: Store
    hub: LiveHub
    mission_id: str
    script: list[Step]
    pace_s: float = 0.05
    status: str = "verified"
    pr_url: str | None = PR_URL
    on_event: Callable[[int], None] | None = None
    played: int = 0
    _thread: threading.Thread | None = field(default=None, repr=False)
    gate: threading.Event = field(default_factory=threading.Event, repr=False)

    def __post_init__(self) -> None:
        self.gate.set()
        self.bus = EventBus(
            self.mission_id,
            [self.store.event_sink(self.mission_id), self.hub.sink(self.mission_id)],
            Redactor(),
        )

    def play(self, count: int | None = None) -> None:
        """Emit the next `count` events (all that are left by default), at the pace."""
        end = len(self.script) if count is None else min(self.played + count, len(self.script))
        while self.played < end:
            self.gate.wait()
            type_, stage_, fields = self.script[self.played]
            self.bus.emit(type_, stage_, **fields)  # type: ignore[arg-type]
            self.played += 1
            if self.on_event is not None:
                self.on_event(self.played)
            time.sleep(self.pace_s)

    def finish(self) -> None:
        done = next((f for t, _s, f in self.script if t == "done"), {})
        result = MissionResult(
            mission=self.mission_id,
            status=self.status,  # type: ignore[arg-type]
            message=str(done.get("message", "")),
            summary=str(done.get("summary", "")),
            usage=usage_of(self.script),
            cost_usd=float(done.get("cost_usd", 0.0)),
            steps=int(done.get("steps", 0)),
            final_tier=done.get("final_tier"),
        )
        self.store.mark_finished(result)
        if self.pr_url:
            self.store.set_links(self.mission_id, pr_url=self.pr_url, check_run_id=4711)

    def start(self) -> Player:
        def run() -> None:
            self.play()
            self.finish()

        self._thread = threading.Thread(target=run, name="scripted-mission", daemon=True)
        self._thread.start()
        return self

    def join(self, timeout: float = 60) -> None:
        assert self._thread is not None
        self._thread.join(timeout)
        assert not self._thread.is_alive(), "the scripted mission did not finish"
