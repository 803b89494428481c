"""The fix-rate benchmark: Loopwright and mini-swe-agent on the bug corpus, real local models.

For each configuration (`0.5b`, `1.5b`, `0.5b+1.5b` escalating) it fetches and checks the
model files, starts llama.cpp's server on loopback, runs `loopwright fix` on every corpus
task and judges each patch with the task's hidden tests; the peer runs on the same tasks,
server and model. Per task and in total: verified, false-verified (verified but a hidden
test fails), wall time, steps, tokens (uncached, cached, completion), attempts, tier.

    .venv/bin/python -m benchmarks.fix_rate                       # everything, <= 90 min
    .venv/bin/python -m benchmarks.fix_rate --config 0.5b --limit 3 --sandbox local
    .venv/bin/python -m benchmarks.fix_rate --smoke    # no model: a scripted one, one task

The default run fits 90 minutes by construction: every run is killed at `--run-timeout`
(default 150 s; Loopwright's loop stops at 70 % of it so verification fits), and a task is
started only while the time left of `--budget-min` (default 88) covers all its runs at that
cap; the tasks that did not fit are listed as not run. Ctrl-C prints what finished.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from benchmarks.model_router import ModelRouter
from loopwright.sandbox.workspace import WorkspaceError, git

ROOT = Path(__file__).resolve().parents[1]
MODELS = {"0.5b": "qwen2.5-coder-0.5b", "1.5b": "qwen2.5-coder-1.5b"}
CONFIGS: dict[str, tuple[str, ...]] = {
    "0.5b": ("0.5b",),
    "1.5b": ("1.5b",),
    "0.5b+1.5b": ("0.5b", "1.5b"),
}
PEER_MODES = ("text", "tools")
LOOPWRIGHT = "loopwright"
AGENTS = (LOOPWRIGHT, *(f"mini-swe-agent/{m}" for m in PEER_MODES))
"""Every agent a run can select with --agent: Loopwright, then the peer in each mode."""
BUDGET_S = 88 * 60
"""The default run's whole budget; model fetch and server start come out of it too."""
RUN_TIMEOUT_S = 150
MAX_STEPS = 8


@dataclass
class Run:
    """One agent on one task under one configuration, judged by the hidden tests."""

    task: str
    agent: str
    """`loopwright`, `mini-swe-agent/text` or `mini-swe-agent/tools`."""
    config: str
    status: str
    """Loopwright's mission status, the peer's exit status, `timeout` or `error`."""
    claimed: bool = False
    """Loopwright: verified; the peer: submitted (it has no verification of its own)."""
    visible_ok: bool | None = None
    hidden_ok: bool | None = None
    wall_s: float = 0.0
    steps: int = 0
    uncached_tokens: int = 0
    cached_tokens: int = 0
    completion_tokens: int = 0
    attempts: int = 0
    tier: str | None = None
    prefix: list[float] = field(default_factory=list)
    """Per model call after the first of a conversation: the share of the previous request's
    prompt tokens that the server served from its cache for this one (1.0: the whole
    previous request was reused; Loopwright only, read from its `model_call` events)."""
    attempt_log: list[dict[str, Any]] = field(default_factory=list)
    """The mission's independent attempts (LOOPWRIGHT_ATTEMPTS) in order, each with its
    `tier` and whether its patch `passed` the tests in the loop's sandbox."""
    patch: str = ""
    note: str = ""

    @property
    def fixed(self) -> bool:
        """The hidden tests, run on the patch, agree the bug is fixed."""
        return bool(self.visible_ok and self.hidden_ok)

    @property
    def false_verified(self) -> bool:
        return self.claimed and not self.fixed

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "fixed": self.fixed, "false_verified": self.false_verified}


@dataclass
class Report:
    runs: list[Run] = field(default_factory=list)
    not_run: list[str] = field(default_factory=list)
    interrupted: bool = False
    wall_s: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "runs": [r.to_dict() for r in self.runs],
            "totals": totals(self.runs),
            "not_run": self.not_run,
            "interrupted": self.interrupted,
            "wall_s": round(self.wall_s, 1),
        }


def totals(runs: Sequence[Run]) -> list[dict[str, Any]]:
    """One row per agent and configuration, in the order they first ran."""
    groups: dict[tuple[str, str], list[Run]] = {}
    for run in runs:
        groups.setdefault((run.agent, run.config), []).append(run)
    rows = []
    for (agent, config), group in groups.items():
        rows.append(
            {
                "agent": agent,
                "config": config,
                "tasks": len(group),
                "verified": sum(r.claimed for r in group),
                "fixed": sum(r.fixed for r in group),
                "false_verified": sum(r.false_verified for r in group),
                "wall_s": round(sum(r.wall_s for r in group), 1),
                "steps": sum(r.steps for r in group),
                "uncached_tokens": sum(r.uncached_tokens for r in group),
                "cached_tokens": sum(r.cached_tokens for r in group),
                "completion_tokens": sum(r.completion_tokens for r in group),
                "attempts": sum(r.attempts for r in group),
                "prefix": [share for r in group for share in r.prefix],
                "tiers": ", ".join(sorted({r.tier for r in group if r.tier})) or "-",
            }
        )
    return rows


def prefix_reuse(events: Sequence[dict[str, Any]]) -> list[float]:
    """For each model call that continues a conversation, the share of the previous
    request's prompt served from the server's prompt cache: min(cached, previous prompt) /
    previous prompt. A new attempt or tier starts a new conversation; a call whose usage
    the server did not report (estimated) has no share."""
    shares: list[float] = []
    previous: dict[str, Any] | None = None
    for event in events:
        if event.get("type") == "attempt" and event.get("status") == "started":
            previous = None
        if event.get("type") != "model_call":
            continue
        if previous is not None and previous.get("tier") == event.get("tier"):
            before = int(previous.get("prompt_tokens") or 0)
            cached = event.get("cached_tokens")
            if before > 0 and cached is not None and not event.get("usage_estimated"):
                shares.append(min(int(cached), before) / before)
        previous = event
    return shares


def _prefix(shares: Sequence[float]) -> str:
    """`mean (min lowest), hits/steps >= 95%` over the steps (a long run weighs more in a
    total, as each of its steps counts once), or `-`."""
    if not shares:
        return "-"
    mean = sum(shares) / len(shares)
    hits = sum(s >= 0.95 for s in shares)
    return f"{mean:.1%} (min {min(shares):.0%}), {hits}/{len(shares)} >= 95%"


def pass_at_k(runs: Sequence[Run]) -> list[dict[str, Any]]:
    """Per agent, configuration and tier that made independent attempts: of the runs with
    attempts there, how many passed with the first attempt (pass@1) and with any of them
    (pass@K, K the most attempts a run made on the tier)."""
    groups: dict[tuple[str, str, str], list[list[bool]]] = {}
    for run in runs:
        per_tier: dict[str, list[bool]] = {}
        for attempt in run.attempt_log:
            per_tier.setdefault(str(attempt.get("tier")), []).append(bool(attempt.get("passed")))
        for tier, passed in per_tier.items():
            groups.setdefault((run.agent, run.config, tier), []).append(passed)
    return [
        {
            "agent": agent,
            "config": config,
            "tier": tier,
            "runs": len(outcomes),
            "k": max(len(o) for o in outcomes),
            "pass_at_1": sum(o[0] for o in outcomes),
            "pass_at_k": sum(any(o) for o in outcomes),
        }
        for (agent, config, tier), outcomes in groups.items()
    ]


def _mark(value: bool | None) -> str:
    return "-" if value is None else ("yes" if value else "no")


def render(report: Report) -> str:
    """The per-task table, then the totals side by side, as Markdown."""
    lines = [
        "| task | agent | config | status | verified | hidden tests | false-verified "
        "| wall s | steps | tokens uncached / cached / out | prefix reused | attempts | tier |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in report.runs:
        hidden = "-" if r.visible_ok is None else _mark(r.fixed)
        lines.append(
            f"| {r.task} | {r.agent} | {r.config} | {r.status} | {_mark(r.claimed)} | {hidden} "
            f"| {'**YES**' if r.false_verified else 'no'} | {r.wall_s:.0f} | {r.steps} "
            f"| {r.uncached_tokens} / {r.cached_tokens} / {r.completion_tokens} "
            f"| {_prefix(r.prefix)} | {r.attempts} | {r.tier or '-'} |"
        )
    lines += [
        "",
        "| agent | config | tasks | verified | fixed (hidden tests) | false-verified "
        "| wall s | steps | tokens uncached / cached / out | prefix reused | attempts | tiers |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for t in totals(report.runs):
        lines.append(
            f"| {t['agent']} | {t['config']} | {t['tasks']} | {t['verified']} | {t['fixed']} "
            f"| {t['false_verified']} | {t['wall_s']:.0f} | {t['steps']} "
            f"| {t['uncached_tokens']} / {t['cached_tokens']} / {t['completion_tokens']} "
            f"| {_prefix(t['prefix'])} | {t['attempts']} | {t['tiers']} |"
        )
    attempts = pass_at_k(report.runs)
    if attempts:
        lines += [
            "",
            "| agent | config | tier | runs with attempts | pass@1 | pass@K |",
            "| --- | --- | --- | --- | --- | --- |",
        ]
        lines += [
            f"| {a['agent']} | {a['config']} | {a['tier']} | {a['runs']} | {a['pass_at_1']} "
            f"| {a['pass_at_k']} (K={a['k']}) |"
            for a in attempts
        ]
    if report.not_run:
        lines += ["", f"not run (time budget): {', '.join(report.not_run)}"]
    if report.interrupted:
        lines += ["", "interrupted: the tables hold the runs that finished"]
    lines += ["", f"benchmark wall time: {report.wall_s:.0f} s"]
    return "\n".join(lines)


# --- trees and judging ---------------------------------------------------------------


def task_repo(task: Any) -> Path:
    """The task's buggy repository, exactly as an agent gets it."""
    for name in ("repo", "repo_dir", "path"):
        value = getattr(task, name, None)
        if isinstance(value, Path):
            return value if value.name == "repo" else value / "repo"
    return ROOT / "benchmarks" / "corpus" / str(task.id) / "repo"


def fresh_copy(repo: Path, dest: Path) -> Path:
    """A copy of `repo` as a git repository with one commit, so a patch is `git diff`."""
    shutil.copytree(repo, dest, ignore=shutil.ignore_patterns(".git"))
    git(["init", "-q", "-b", "main"], dest)
    git(["add", "-A"], dest)
    git(["commit", "-qm", "task", "--no-verify"], dest)
    return dest


def tree_patch(tree: Path) -> str:
    """Everything an agent changed in a `fresh_copy`, new files included."""
    git(["add", "-A"], tree)
    return git(["diff", "--cached", "--binary"], tree)


def judge(task: Any, patch: str, scratch: Path) -> tuple[bool, bool, str]:
    """(visible tests pass, hidden tests pass, output) for `patch` on a fresh copy of the
    task; `Task.judge` puts the task's own tests back first, so no agent is credited for a
    fix that edits the tests."""
    if not patch.strip():
        return False, False, "no patch: the buggy tree fails its tests"
    tree = fresh_copy(task_repo(task), scratch / "judged")
    (scratch / "judged.patch").write_text(patch, encoding="utf-8")
    try:
        git(["apply", "--whitespace=nowarn", str(scratch / "judged.patch")], tree)
    except WorkspaceError as exc:
        return False, False, f"the patch does not apply: {exc}"
    judgement = task.judge(tree)
    return bool(judgement.visible_ok), bool(judgement.hidden_ok), str(judgement.output)


# --- running the agents ---------------------------------------------------------------


def _stop(process: subprocess.Popen[Any]) -> None:
    """Interrupt a run's whole process group (it cleans up its sandboxes), then kill it."""
    if process.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGINT)
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def run_bounded(
    argv: list[str], *, env: dict[str, str], timeout_s: float, log: Path, out: Path | None = None
) -> int | None:
    """Run argv in its own process group, stdout to `out` (else `log`), stderr to `log`;
    None when it hit the timeout. Ctrl-C stops the child too, and propagates."""
    with log.open("wb") as err, (out or log).open("ab") as stdout:
        process = subprocess.Popen(argv, env=env, stdout=stdout, stderr=err, start_new_session=True)
        try:
            return process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            _stop(process)
            return None
        except BaseException:
            _stop(process)
            raise


def _clean_env(extra: dict[str, str]) -> dict[str, str]:
    """This environment without Loopwright's settings; `python` is this interpreter (with
    pytest), as the corpus's own judging has it, for `--sandbox local` and the peer."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOOPWRIGHT_")}
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    return {**env, **extra}


@dataclass(frozen=True)
class Endpoint:
    """Where one configuration's models answer: the base URL and the tiers, cheapest first."""

    base_url: str
    tiers: tuple[tuple[str, str], ...]
    """(tier name, model id) pairs."""


@dataclass(frozen=True)
class Limits:
    max_steps: int = MAX_STEPS
    run_timeout_s: float = RUN_TIMEOUT_S
    sandbox: str = "docker"


def run_loopwright(task: Any, config: str, endpoint: Endpoint, limits: Limits) -> Run:
    with tempfile.TemporaryDirectory(prefix="fixrate-") as tmp:
        scratch = Path(tmp)
        tree = fresh_copy(task_repo(task), scratch / "repo")
        result_path, events_path = scratch / "result.json", scratch / "events.ndjson"
        env = _clean_env(
            {
                "LOOPWRIGHT_MODEL_BASE_URL": endpoint.base_url,
                "LOOPWRIGHT_MODEL_API_KEY": "local",
                "LOOPWRIGHT_MODEL_TIERS": ",".join(f"{n}={m}" for n, m in endpoint.tiers),
                "LOOPWRIGHT_MODEL_PRICES": ",".join(f"{n}=0/0" for n, _ in endpoint.tiers),
                "LOOPWRIGHT_DATA_DIR": str(scratch / "data"),
                # The loop stops in time for verification to finish inside the run's cap.
                "LOOPWRIGHT_WALL_CLOCK_S": str(max(30, int(limits.run_timeout_s * 0.7))),
                # A small model on a busy CPU reads a first prompt for minutes; the run's cap
                # bounds the wait, so a retry must not throw that work away.
                "LOOPWRIGHT_MODEL_TIMEOUT_S": str(int(limits.run_timeout_s)),
                "LOOPWRIGHT_STALL_TIMEOUT_S": str(int(limits.run_timeout_s)),
            }
        )
        argv = [
            sys.executable,
            "-c",
            "import sys; from loopwright.cli.main import main; sys.exit(main(sys.argv[1:]))",
            "fix",
            str(tree),
            "--test-cmd",
            str(task.test_cmd),
            "--sandbox",
            limits.sandbox,
            "--max-steps",
            str(limits.max_steps),
            "--dry-run",
            "--quiet",
            "--events",
            str(events_path),
        ]
        started = time.monotonic()
        code = run_bounded(
            [*argv, "--json"],
            env=env,
            timeout_s=limits.run_timeout_s,
            log=scratch / "loopwright.log",
            out=result_path,
        )
        wall = time.monotonic() - started
        try:
            result = json.loads(result_path.read_text(encoding="utf-8"))
        except ValueError:
            result = {}
        events = _read_events(events_path)
        run = Run(task=task.id, agent=LOOPWRIGHT, config=config, status="", wall_s=round(wall, 1))
        if code is None:
            run.status = "timeout"
        else:
            run.status = str(result.get("status") or "error")
        run.claimed = run.status == "verified"
        usage = result.get("usage") or _usage_from_events(events)
        for tier_usage in usage.values():
            prompt = int(tier_usage.get("prompt_tokens") or 0)
            cached = int(tier_usage.get("cached_tokens") or 0)
            run.uncached_tokens += prompt - cached
            run.cached_tokens += cached
            run.completion_tokens += int(tier_usage.get("completion_tokens") or 0)
        run.steps = int(result.get("steps") or sum(e["type"] == "model_call" for e in events))
        run.attempts = _attempts(result, events)
        log = result.get("attempts")
        run.attempt_log = [a for a in log if isinstance(a, dict)] if isinstance(log, list) else []
        run.prefix = [round(share, 4) for share in prefix_reuse(events)]
        run.tier = result.get("final_tier") or _last_tier(events)
        run.patch = str(result.get("patch") or "")
        if not result:
            log = (scratch / "loopwright.log").read_text(encoding="utf-8", errors="replace")
            run.note = "no result: " + log[-2000:]
        run.visible_ok, run.hidden_ok, output = judge(task, run.patch, scratch)
        if run.false_verified:
            run.note = output[-2000:]
        return run


def _read_events(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    events = []
    for line in path.read_text(encoding="utf-8").splitlines():
        with contextlib.suppress(ValueError):
            events.append(json.loads(line))
    return events


def _usage_from_events(events: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    usage: dict[str, dict[str, Any]] = {}
    for e in events:
        if e.get("type") == "model_call":
            u = usage.setdefault(str(e.get("tier")), {})
            for key in ("prompt_tokens", "completion_tokens", "cached_tokens"):
                u[key] = int(u.get(key) or 0) + int(e.get(key) or 0)
    return usage


def _attempts(result: dict[str, Any], events: list[dict[str, Any]]) -> int:
    """Independent attempts the mission made (LOOPWRIGHT_ATTEMPTS): the result's list of
    them when it has any, else one per tier that was called."""
    value = result.get("attempts")
    if isinstance(value, int):
        return value
    if isinstance(value, list | dict) and value:
        return len(value)
    tiers = {e.get("tier") for e in events if e.get("type") == "model_call"}
    return max(1, len(tiers)) if events else 0


def _last_tier(events: list[dict[str, Any]]) -> str | None:
    calls = [e for e in events if e.get("type") == "model_call"]
    return str(calls[-1].get("tier")) if calls else None


def peer_task_text(task: Any, tree: Path) -> str:
    """What the peer is told: the failing test command and its output, as Loopwright's
    first prompt shows them; nothing about the bug itself."""
    try:
        proc = subprocess.run(
            ["bash", "-c", str(task.test_cmd)],
            cwd=tree,
            capture_output=True,
            text=True,
            timeout=120,
            env=_clean_env({}),
        )
        output = (proc.stdout + proc.stderr)[-3000:]
    except subprocess.TimeoutExpired:
        output = "(the test command did not finish in 120 s)"
    return (
        f"The tests of the repository in the current directory fail. The test command is "
        f"`{task.test_cmd}`. Fix the bug in the code so that the tests pass; do not change "
        f"the tests.\n\nIts output now:\n\n{output}"
    )


def run_peer(task: Any, config: str, mode: str, endpoint: Endpoint, limits: Limits) -> Run:
    with tempfile.TemporaryDirectory(prefix="fixrate-peer-") as tmp:
        scratch = Path(tmp)
        tree = fresh_copy(task_repo(task), scratch / "repo")
        task_file, out = scratch / "task.txt", scratch / "peer.json"
        task_file.write_text(peer_task_text(task, tree), encoding="utf-8")
        model = endpoint.tiers[0][1]
        argv = [
            sys.executable,
            "-m",
            "benchmarks.fix_rate_peer",
            f"--mode={mode}",
            f"--cwd={tree}",
            f"--base-url={endpoint.base_url}",
            f"--model={model}",
            f"--task-file={task_file}",
            f"--step-limit={limits.max_steps}",
            f"--wall-s={int(limits.run_timeout_s * 0.9)}",
            f"--out={out}",
        ]
        started = time.monotonic()
        code = run_bounded(
            argv, env=_clean_env({}), timeout_s=limits.run_timeout_s, log=scratch / "peer.log"
        )
        wall = time.monotonic() - started
        run = Run(task=task.id, agent=f"mini-swe-agent/{mode}", config=config, status="")
        run.wall_s = round(wall, 1)
        try:
            result = json.loads(out.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            result = {}
        if code is None:
            run.status = "timeout"
        elif not result:
            log = (scratch / "peer.log").read_text(encoding="utf-8", errors="replace")
            run.status, run.note = "error", log[-2000:]
        else:
            run.status = str(result.get("exit_status") or "error")
            run.claimed = bool(result.get("submitted"))
            run.steps = int(result.get("steps") or 0)
            cached = int(result.get("cached_tokens") or 0)
            run.uncached_tokens = int(result.get("prompt_tokens") or 0) - cached
            run.cached_tokens = cached
            run.completion_tokens = int(result.get("completion_tokens") or 0)
            run.note = str(result.get("error") or "")
        run.attempts = 1
        run.tier = endpoint.tiers[0][0]
        run.patch = tree_patch(tree)
        run.visible_ok, run.hidden_ok, _ = judge(task, run.patch, scratch)
        return run


# --- models and servers ---------------------------------------------------------------


@contextlib.contextmanager
def serving(sizes: Sequence[str], *, threads: int, external: dict[str, str]) -> Iterator[str]:
    """One loopback base URL for every model in `sizes`: a llama.cpp server per model (or
    the URL given with `--endpoint`) behind one router. Only one model computes at a time,
    so each server may have all `threads`; every server stops when the block ends."""
    with contextlib.ExitStack() as stack:
        routes: dict[str, str] = {}
        for size in sizes:
            if size in external:
                routes[MODELS[size]] = external[size]
                continue
            from loopwright.agent.local_model import LocalServer, fetch_model

            gguf = fetch_model(MODELS[size])
            server = stack.enter_context(LocalServer(gguf, port=0, threads=threads))
            routes[MODELS[size]] = server.base_url
        yield stack.enter_context(ModelRouter(routes)).base_url


def endpoint_for(config: str, base_url: str) -> Endpoint:
    """A configuration's tiers, cheapest first, on the router."""
    return Endpoint(base_url, tuple((f"q{s.replace('.', '')}", MODELS[s]) for s in CONFIGS[config]))


def runs_per_task(configs: Sequence[str], peers: bool, agents: Sequence[str] = AGENTS) -> int:
    """Loopwright once per configuration; the peer in each mode once per single model."""
    singles = sum(len(CONFIGS[c]) == 1 for c in configs)
    modes = [m for m in PEER_MODES if f"mini-swe-agent/{m}" in agents] if peers else []
    return len(configs) * (LOOPWRIGHT in agents) + len(modes) * singles


def run_benchmark(
    tasks: Sequence[Any],
    configs: Sequence[str],
    *,
    limits: Limits,
    peers: bool = True,
    agents: Sequence[str] = AGENTS,
    threads: int = 2,
    external: dict[str, str] | None = None,
    budget_s: float = BUDGET_S,
    report: Report | None = None,
    progress: Any = None,
    clock: Any = time.monotonic,
) -> Report:
    """Every task under every configuration, task by task, so that when the budget ends
    every agent and configuration has run the same tasks. A task starts only while the
    time left covers all its runs at the run cap. Fills `report` as runs finish, so an
    interrupted benchmark still has them."""
    report = report if report is not None else Report()
    started = clock()
    per_task_s = runs_per_task(configs, peers, agents) * limits.run_timeout_s
    sizes = sorted({s for c in configs for s in CONFIGS[c]})
    try:
        with serving(sizes, threads=threads, external=external or {}) as base_url:
            for index, task in enumerate(tasks):
                if budget_s - (clock() - started) < per_task_s:
                    report.not_run = [t.id for t in tasks[index:]]
                    break
                for config in configs:
                    endpoint = endpoint_for(config, base_url)
                    runs = (
                        [partial(run_loopwright, task, config, endpoint, limits)]
                        if LOOPWRIGHT in agents
                        else []
                    )
                    if peers and len(CONFIGS[config]) == 1:
                        runs += [
                            partial(run_peer, task, config, mode, endpoint, limits)
                            for mode in PEER_MODES
                            if f"mini-swe-agent/{mode}" in agents
                        ]
                    for start in runs:
                        run = start()
                        report.runs.append(run)
                        if progress:
                            progress(run)
    except KeyboardInterrupt:
        report.interrupted = True
    finally:
        report.wall_s = clock() - started
    return report


def _progress(run: Run) -> None:
    flag = " FALSE-VERIFIED" if run.false_verified else ""
    print(
        f"  {run.task} {run.agent} [{run.config}]: {run.status}, hidden tests "
        f"{_mark(run.fixed) if run.visible_ok is not None else '-'}, {run.steps} steps, "
        f"{run.wall_s:.0f}s{flag}",
        file=sys.stderr,
        flush=True,
    )


SMOKE_TASK = "py-paginate"
SMOKE_FIX = [
    ("pager/paginator.py", "self.count // self.per_page\n", "-(-self.count // self.per_page)\n"),
]


def smoke(sandbox: str) -> int:
    """One Loopwright run on one corpus task, its model a scripted server that applies the
    task's fix: the benchmark's own path (run, judge, table) without a model to fetch."""
    from benchmarks.corpus.tasks import load_tasks
    from loopwright.agent.scripted import ScriptedModelServer
    from loopwright.agent.scripted_steps import parse_steps

    task = next(t for t in load_tasks() if t.id == SMOKE_TASK)
    calls: list[dict[str, Any]] = [
        {"name": "edit_file", "arguments": {"path": path, "old": old, "new": new}}
        for path, old, new in SMOKE_FIX
    ]
    calls.append({"name": "finish", "arguments": {"summary": "page_count rounds up"}})
    script = parse_steps([{"content": "", "tool_calls": [call]} for call in calls])
    with tempfile.TemporaryDirectory() as data:
        os.environ["LOOPWRIGHT_DATA_DIR"] = data
        server = ScriptedModelServer(script, models=[MODELS["1.5b"]]).start()
        try:
            report = run_benchmark(
                [task],
                ["1.5b"],
                limits=Limits(max_steps=10, run_timeout_s=240, sandbox=sandbox),
                peers=False,
                agents=(LOOPWRIGHT,),
                external={"1.5b": server.base_url},
                progress=_progress,
            )
        finally:
            server.stop()
    print(render(report))
    runs = [r for r in report.runs if r.agent == LOOPWRIGHT]
    if len(runs) != 1 or runs[0].visible_ok is None:
        raise SystemExit(f"the smoke run produced no judged run: {report.runs}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--config", action="append", choices=sorted(CONFIGS), help="repeatable")
    parser.add_argument("--task", action="append", metavar="ID", help="only this task (repeatable)")
    parser.add_argument("--limit", type=int, help="only the first N tasks")
    parser.add_argument("--max-steps", type=int, default=MAX_STEPS, help="model calls per run")
    parser.add_argument(
        "--run-timeout", type=float, default=RUN_TIMEOUT_S, help="seconds before a run is killed"
    )
    parser.add_argument(
        "--budget-min", type=float, default=BUDGET_S / 60, help="the whole run's time budget"
    )
    parser.add_argument("--sandbox", choices=("docker", "local"), default="docker")
    parser.add_argument("--threads", type=int, default=2, help="llama.cpp threads per server")
    parser.add_argument("--no-peer", action="store_true", help="skip mini-swe-agent")
    parser.add_argument(
        "--agent",
        action="append",
        choices=AGENTS,
        help="only this agent (repeatable; default: all), e.g. to run one agent at a time",
    )
    parser.add_argument(
        "--endpoint",
        action="append",
        default=[],
        metavar="SIZE=URL",
        help="use a server already running for a model (e.g. 0.5b=http://127.0.0.1:8080/v1)",
    )
    parser.add_argument("--json", type=Path, metavar="OUT", help="write the raw numbers here")
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="check the benchmark works without models: Loopwright on one task, driven by a "
        "scripted model server that makes the task's fix (--sandbox applies)",
    )
    args = parser.parse_args(argv)
    if args.smoke:
        return smoke(args.sandbox)

    from benchmarks.corpus.tasks import load_tasks

    external: dict[str, str] = {}
    for item in args.endpoint:
        size, sep, url = item.partition("=")
        if not sep or size not in MODELS:
            parser.error(f"--endpoint {item!r}: write SIZE=URL with SIZE one of {sorted(MODELS)}")
        external[size] = url
    tasks = load_tasks()
    if args.task:
        known = {t.id for t in tasks}
        unknown = [t for t in args.task if t not in known]
        if unknown:
            parser.error(f"unknown task {', '.join(unknown)}; the corpus has {sorted(known)}")
        tasks = [t for t in tasks if t.id in args.task]
    if args.limit is not None:
        tasks = tasks[: args.limit]
    agents = tuple(args.agent or AGENTS)
    if args.no_peer and args.agent and LOOPWRIGHT not in agents:
        parser.error("--no-peer with only mini-swe-agent in --agent runs nothing")
    peers = not args.no_peer and any(a != LOOPWRIGHT for a in agents)
    if peers and importlib.util.find_spec("minisweagent") is None:
        parser.error("mini-swe-agent is not installed: pip install -e '.[bench]' or --no-peer")
    configs = args.config or list(CONFIGS)
    limits = Limits(args.max_steps, args.run_timeout, args.sandbox)
    report = Report()
    try:
        run_benchmark(
            tasks,
            configs,
            limits=limits,
            peers=peers,
            agents=agents,
            threads=args.threads,
            external=external,
            budget_s=args.budget_min * 60,
            report=report,
            progress=_progress,
        )
    except KeyboardInterrupt:
        report.interrupted = True
    print(render(report))
    if args.json:
        args.json.write_text(json.dumps(report.to_dict(), indent=2), encoding="utf-8")
    return 130 if report.interrupted else 0


if __name__ == "__main__":
    sys.exit(main())
